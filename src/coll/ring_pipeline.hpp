// Chunk-pipelined ring engine shared by ring allreduce, reduce-scatter and allgather.
// The message is split into blocks (one per rank) and each block into C chunks.
// Chunk ch of step t+1 is sent as soon as chunk ch of step t has arrived and been
// processed, so chunks flow around the ring back to back.
#pragma once
#include <functional>

#include "coll/call_context.hpp"

namespace dccl::coll {

struct RingPipeline {
  int steps = 0;   // ring steps
  int chunks = 1;  // chunks per block
  // Bytes of chunk ch this rank sends / receives at step t (the receiver's recv_bytes
  // equals the sender's bytes for the same step and chunk).
  std::function<size_t(int t, int ch)> bytes;
  std::function<size_t(int t, int ch)> recv_bytes;  // empty: same as bytes
  std::function<const void*(int t, int ch)> send_ptr;
  std::function<void*(int t, int ch)> recv_ptr;
  // Called when chunk ch of step t has arrived (e.g. reduce it). May be empty.
  std::function<void(int t, int ch)> on_recv;
  // Step whose send of chunk ch must be complete before recv/on_recv of (t, ch) may
  // write memory that send reads; -1 when none.
  std::function<int(int t)> recv_after_send_of;
  std::function<int(int t)> on_recv_after_send_of;

  void run(CallContext& c, int next, int prev) const;
};

// Number of chunks so that each is about chunk_bytes (at least one).
int chunks_for(size_t block_elems, size_t esize, size_t chunk_bytes);
// Element range of chunk ch when a block of block_elems is cut into `chunks`
// pieces of ceil(max_block_elems / chunks) elements.
void chunk_range(size_t max_block_elems, size_t block_elems, int chunks, int ch, size_t* off,
                 size_t* len);

}  // namespace dccl::coll
