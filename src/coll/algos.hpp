// Every algorithm, one per file. Buffers may be host or device memory: algorithms
// touch them only through CallContext (transfers, reduce, copy, scratch).
#pragma once
#include <cstddef>

#include "coll/call_context.hpp"

namespace dccl::coll {

struct Args {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // as in the C API: allgather sendcount, reduce_scatter recvcount, alltoall per peer
  int root = 0;
};

void allreduce_ring(CallContext& c, const Args& a);
void allreduce_rhd(CallContext& c, const Args& a);   // recursive halving-doubling (Rabenseifner)
void allreduce_rd(CallContext& c, const Args& a);    // recursive doubling (latency-bound sizes)
void allreduce_segment(CallContext& c, const Args& a);  // one-shot through host shared memory (one host)
void allreduce_segment_rs(CallContext& c, const Args& a);  // chunked reduce-scatter + allgather through host shared memory
void reduce_scatter_ring(CallContext& c, const Args& a);
void reduce_scatter_segment(CallContext& c, const Args& a);  // chunked through host shared memory (one host)
void allgather_ring(CallContext& c, const Args& a);
void allgather_bruck(CallContext& c, const Args& a);
void allgather_segment(CallContext& c, const Args& a);  // chunked through host shared memory (one host)
void broadcast_tree(CallContext& c, const Args& a);   // binomial tree
void broadcast_chain(CallContext& c, const Args& a);  // pipelined chain
void reduce_tree(CallContext& c, const Args& a);      // binomial tree
void reduce_chain(CallContext& c, const Args& a);     // pipelined chain
void alltoall_pairwise(CallContext& c, const Args& a);
void barrier_dissemination(CallContext& c, const Args& a);

}  // namespace dccl::coll
