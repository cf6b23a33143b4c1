// One-shot allreduce through the host's shared-memory segment, for small messages
// when every rank is on one host and the buffers are host memory: each rank copies
// its input into its slot and raises the slot's flag (in the slot's first cache
// line with the call it belongs to, so that a small input and its flag cross cores
// as one line; a rank whose call differs fails naming both); once all flags
// are up, every rank reduces all slots in rank order (identical results
// everywhere). Two slots per rank alternate between consecutive operations. Slot p
// is rewritten by operation k+2 only after every rank finished operation k: a rank
// raises its flag for k+1 after it finished k (release after its reads), and every
// rank waited for all flags of k+1 before it got to k+2, so no separate "done"
// flag (and no extra cache-line transfer) is needed.
#include <cstring>
#include <string>

#include "coll/algos.hpp"
#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "coll/segment_wait.hpp"
#include "net/shared_segment.hpp"

namespace dccl::coll {

void allreduce_segment(CallContext& c, const Args& a) {
  // A call of 0 elements takes its turn too (its slot word says 0 bytes): returning at
  // once would leave this rank one operation behind the others, and its next call
  // would pair with theirs of this turn (their data taken for its next call's).
  if (c.segment() == nullptr) throw core::Error(dcclInternalError, "allreduce_segment: no shared-memory segment");
  net::SharedSegment& seg = *c.segment();
  const int n = c.nranks(), r = c.rank();
  const size_t bytes = a.count * c.esize();
  if (bytes > seg.slot_bytes())
    throw core::Error(dcclInternalError, "allreduce_segment: message larger than the shared slot");
  const uint64_t k = seg.next_op();
  const int p = static_cast<int>(k & 1);
  c.start_deadline();
  if (bytes > 0) memcpy(seg.slot(r, p), a.send, bytes);
  // The slot's word carries the operation (high half) and its byte count (low
  // half), and the word beside it the call (datatype, op, count): ranks whose
  // counts, datatypes or ops differ find out here instead of reducing garbage.
  const uint64_t word = (k << 32) | static_cast<uint32_t>(bytes);
  const uint64_t call = chunk_call(ChunkColl::AllReduce, c, a.count);
  seg.call(r, p).store(call, std::memory_order_relaxed);
  seg.seq(r, p).store(word, std::memory_order_release);
  seg.wake();
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    uint64_t theirs = 0;
    segment_await(c, "its contribution", q, [&] {
      theirs = seg.seq(q, p).load(std::memory_order_acquire);
      return (theirs >> 32) == (k & 0xffffffffULL);
    });
    if (theirs != word)
      c.refuse(dcclInvalidUsage, "rank " + std::to_string(q) + " passed " + std::to_string(theirs & 0xffffffffULL) +
                                     " bytes, this rank " + std::to_string(bytes) + ": the count differs between ranks");
    refuse_other_call(c, q, seg.call(q, p).load(std::memory_order_relaxed), call);
  }
  if (bytes == 0) return;
  if (n == 1) {
    memcpy(a.recv, seg.slot(0, p), bytes);
  } else {
    kernels::reduce(a.recv, seg.slot(0, p), seg.slot(1, p), a.count, c.dt(), c.op());
    for (int q = 2; q < n; ++q) kernels::reduce(a.recv, a.recv, seg.slot(q, p), a.count, c.dt(), c.op());
  }
  if (c.op() == dcclAvg) kernels::finish_avg(a.recv, a.count, c.dt(), n);
}

}  // namespace dccl::coll
