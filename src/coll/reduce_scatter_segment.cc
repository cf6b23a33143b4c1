// Reduce-scatter through the host's shared-memory segment (all ranks on one host,
// host buffers). The per-rank block is cut into chunks; for each chunk every rank
// copies the pieces other ranks own (piece q of its input, for q != rank) into its
// chunk slot and raises In; once every rank's In is up, it reduces its own piece:
// its input first, then every other slot in rank order, straight into recvbuff.
// Slots alternate between consecutive chunks and are reused under the same rule as
// allreduce_segment_rs: a rank raises In for chunk k+1 only after finishing chunk k.
#include <algorithm>
#include <cstring>

#include "coll/algos.hpp"
#include "kernels/reduce.hpp"
#include "coll/segment_wait.hpp"
#include "core/error.hpp"
#include "net/shared_segment.hpp"

namespace dccl::coll {

void reduce_scatter_segment(CallContext& c, const Args& a) {
  net::SharedSegment& seg = chunk_segment(c, "reduce_scatter_segment");
  const int n = c.nranks(), r = c.rank();
  const size_t es = c.esize(), block = a.count;
  const size_t max_len = seg.chunk_bytes() / (es * static_cast<size_t>(n));
  if (max_len == 0) return reduce_scatter_ring(c, a);  // see for_each_chunk
  const char* sb = static_cast<const char*>(a.send);
  char* rb = static_cast<char*>(a.recv);
  const uint64_t call = chunk_call(ChunkColl::ReduceScatter, c, block);
  if (block == 0) return empty_turn(c, seg, call);
  for_each_chunk(c, seg, block, max_len, [&](uint64_t k, int p, size_t off, size_t len) {
    char* mine = seg.chunk_slot(r, p);
    auto piece = [&](int q) { return (static_cast<size_t>(q) * block + off) * es; };  // in the input
    for (int q = 0; q < n; ++q)
      if (q != r) memcpy(mine + static_cast<size_t>(q) * len * es, sb + piece(q), len * es);
    raise_input(seg, r, p, k, call);
    for (int j = 1; j < n; ++j) await_input(c, seg, (r + j) % n, p, k, call);
    char* out = rb + off * es;
    const void* first = sb + piece(r);
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      kernels::reduce(out, first, seg.chunk_slot(q, p) + static_cast<size_t>(r) * len * es, len, c.dt(), c.op());
      first = out;
    }
    if (c.op() == dcclAvg) kernels::finish_avg(out, len, c.dt(), n);
  });
}

}  // namespace dccl::coll
