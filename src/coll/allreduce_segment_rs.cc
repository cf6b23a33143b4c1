// Pipelined allreduce through the host's shared-memory segment, for messages above
// the one-shot's limit when every rank is on one host and the buffers are host
// memory. The message is cut into chunks that fit a chunk slot; each chunk is cut
// into one part per rank. Per chunk, every rank
//   1. copies the parts of its input chunk that other ranks reduce into its own
//      slot and raises In,
//   2. once every rank's In is up, reduces its own part (its input first, then the
//      other slots in rank order) into its own slot and raises Red,
//   3. copies every rank's reduced part out of that rank's slot as soon as its Red
//      is up.
// Each element is reduced by exactly one rank, so every rank gets the same bits.
// Two slots per rank alternate between consecutive chunks, so a rank copies chunk
// k+1 in while others still copy chunk k out. A slot is rewritten (chunk k+2) only
// after every rank finished chunk k: each raised In for k+1 after it, and this rank
// waited for all of those before it got to k+2. No provider, no system call, no
// page pinning: every byte moves with user-space vector loads and stores, and the
// slots stay in cache.
#include <cstring>

#include "coll/algos.hpp"
#include "kernels/reduce.hpp"
#include "coll/segment_wait.hpp"
#include "core/error.hpp"
#include "net/shared_segment.hpp"

namespace dccl::coll {

namespace {
using Seg = net::SharedSegment;

// Part q of a chunk of `len` elements: whole cache lines where possible.
struct Parts {
  size_t per;
  size_t len;
  size_t off(int q) const { return std::min(per * static_cast<size_t>(q), len); }
  size_t size(int q) const { return std::min(per * static_cast<size_t>(q + 1), len) - off(q); }
};

Parts split(size_t len, int n, size_t esize) {
  const size_t line = esize >= 64 ? 1 : 64 / esize;
  size_t per = (len + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  per = (per + line - 1) / line * line;
  return Parts{per, len};
}
}  // namespace

void allreduce_segment_rs(CallContext& c, const Args& a) {
  Seg& seg = chunk_segment(c, "allreduce_segment_rs");
  const int n = c.nranks(), r = c.rank();
  const size_t es = c.esize();
  const size_t max_elems = seg.chunk_bytes() / es;
  if (max_elems == 0) return allreduce_ring(c, a);  // see for_each_chunk
  const char* sb = static_cast<const char*>(a.send);
  char* rb = static_cast<char*>(a.recv);
  const uint64_t call = chunk_call(ChunkColl::AllReduce, c, a.count);
  if (a.count == 0) return empty_turn(c, seg, call);
  for_each_chunk(c, seg, a.count, max_elems, [&](uint64_t k, int p, size_t done, size_t len) {
    const Parts parts = split(len, n, es);
    const int red = Seg::Red0 + p;
    char* mine = seg.chunk_slot(r, p);
    const size_t po = parts.off(r), pl = parts.size(r);
    // Every part but this rank's own, which it reduces straight from its input.
    memcpy(mine, sb + done * es, po * es);
    memcpy(mine + (po + pl) * es, sb + (done + po + pl) * es, (len - po - pl) * es);
    raise_input(seg, r, p, k, call);

    for (int j = 1; j < n; ++j) await_input(c, seg, (r + j) % n, p, k, call);
    if (pl > 0) {
      char* acc = mine + po * es;
      const void* first = sb + (done + po) * es;
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        kernels::reduce(acc, first, seg.chunk_slot(q, p) + po * es, pl, c.dt(), c.op());
        first = acc;
      }
      if (c.op() == dcclAvg) kernels::finish_avg(acc, pl, c.dt(), n);
    }
    seg.flag(r, red).v.store(k, std::memory_order_release);
    seg.wake();

    for (int j = 0; j < n; ++j) {
      const int q = (r + j) % n;
      const size_t qo = parts.off(q), ql = parts.size(q);
      if (j > 0) await_chunk_flag(c, seg, q, red, k, "its reduced part");
      if (ql > 0) memcpy(rb + (done + qo) * es, seg.chunk_slot(q, p) + qo * es, ql * es);
    }
  });
}

}  // namespace dccl::coll
