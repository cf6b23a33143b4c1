// Allgather through the host's shared-memory segment (all ranks on one host, host
// buffers). The per-rank block is cut into chunks; for each chunk every rank
// copies its piece into its chunk slot and raises In, then copies every other
// rank's piece out of that rank's slot as soon as its In is up. Slots alternate
// between consecutive chunks and are reused under the same rule as
// allreduce_segment_rs: a rank raises In for chunk k+1 only after finishing chunk k.
#include <algorithm>
#include <cstring>

#include "coll/algos.hpp"
#include "coll/segment_wait.hpp"
#include "core/error.hpp"
#include "net/shared_segment.hpp"

namespace dccl::coll {

void allgather_segment(CallContext& c, const Args& a) {
  net::SharedSegment& seg = chunk_segment(c, "allgather_segment");
  const int n = c.nranks(), r = c.rank();
  const size_t es = c.esize(), block = a.count;
  const size_t max_len = seg.chunk_bytes() / es;
  if (max_len == 0) return allgather_ring(c, a);  // see for_each_chunk
  if (block == 0) return empty_turn(c, seg, chunk_call(ChunkColl::AllGather, c, 0));
  const char* sb = static_cast<const char*>(a.send);
  char* rb = static_cast<char*>(a.recv);
  // In place, sendbuff is this rank's block of recvbuff already.
  char* own = rb + static_cast<size_t>(r) * block * es;
  if (own != sb) memcpy(own, sb, block * es);
  const uint64_t call = chunk_call(ChunkColl::AllGather, c, block);
  for_each_chunk(c, seg, block, max_len, [&](uint64_t k, int p, size_t off, size_t len) {
    memcpy(seg.chunk_slot(r, p), sb + off * es, len * es);
    raise_input(seg, r, p, k, call);
    for (int j = 1; j < n; ++j) {
      const int q = (r + j) % n;
      await_input(c, seg, q, p, k, call);
      memcpy(rb + (static_cast<size_t>(q) * block + off) * es, seg.chunk_slot(q, p), len * es);
    }
  });
}

}  // namespace dccl::coll
