// One-shot allreduce through the host's shared-memory segment, for small messages
// when every rank is on one host and the buffers are host memory: each rank copies
// its input into its slot and raises its flag; once all flags are up, every rank
// reduces all slots in rank order (identical results everywhere). Two slots per
// rank alternate, and a rank reuses a slot only after every rank finished the
// operation that last read it.
#include <cstring>

#include "coll/algos.hpp"
#include "coll/reduce/reduce.hpp"
#include "core/error.hpp"
#include "coll/smem_wait.hpp"
#include "net/shm_segment.hpp"

namespace dccl::coll {

void allreduce_smem(Ctx& c, const Args& a) {
  if (a.count == 0) return;
  if (c.smem() == nullptr) throw core::Error(dcclInternalError, "allreduce_smem: no shared-memory segment");
  net::ShmSegment& seg = *c.smem();
  const int n = c.nranks(), r = c.rank();
  const size_t bytes = a.count * c.esize();
  if (bytes > seg.slot_bytes())
    throw core::Error(dcclInternalError, "allreduce_smem: message larger than the shared slot");
  const uint64_t k = seg.next_op();
  const int p = static_cast<int>(k & 1);
  c.start_deadline();
  // Slot p was last read in operation k-2: wait until every rank finished it.
  for (int q = 0; q < n; ++q)
    smem_await(c, "the end of its previous operation", q,
          [&] { return seg.done(q).v.load(std::memory_order_acquire) + 2 >= k; });
  memcpy(seg.slot(r, p), a.send, bytes);
  seg.seq(r, p).v.store(k, std::memory_order_release);
  for (int q = 0; q < n; ++q)
    smem_await(c, "its contribution", q, [&] { return seg.seq(q, p).v.load(std::memory_order_acquire) == k; });
  if (n == 1) {
    memcpy(a.recv, seg.slot(0, p), bytes);
  } else {
    coll::reduce(a.recv, seg.slot(0, p), seg.slot(1, p), a.count, c.dt(), c.op());
    for (int q = 2; q < n; ++q) coll::reduce(a.recv, a.recv, seg.slot(q, p), a.count, c.dt(), c.op());
  }
  if (c.op() == dcclAvg) coll::finish_avg(a.recv, a.count, c.dt(), n);
  seg.done(r).v.store(k, std::memory_order_release);
}

}  // namespace dccl::coll
