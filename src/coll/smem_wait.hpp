// Waiting on flags in the host shared-memory segment (coll/allreduce_smem*.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "coll/ctx.hpp"
#include "core/backoff.hpp"
#include "core/cpu.hpp"
#include "core/error.hpp"
#include "net/shm_segment.hpp"

namespace dccl::coll {

// Waits until pred() holds, yielding every few polls: the rank being waited for
// may share this core (more ranks or stream threads than cores), and a long spin
// would only delay it. Without the spin budget (ranks outnumber cores) it yields at
// once. Past core::Backoff's yield window it naps instead (a long wait leaves the
// CPU to the ranks with work). Bounded by the operation's deadline; stops when the
// communicator failed.
// The backoff starts at the first idle step, not on entry: a wait that the first
// polls end (most small operations) reads no clock.
template <class Pred>
void smem_await(Ctx& c, const char* what, int peer, Pred pred) {
  const unsigned every = c.spin_us() > 0 ? 32 : 1;
  std::optional<core::Backoff> backoff;
  for (unsigned i = 1; !pred(); ++i) {
    core::cpu_relax();
    if (i % every == 0) {
      const auto now = core::Backoff::Clock::now();
      if (!backoff) backoff.emplace(0, now);
      backoff->idle(now);
      if ((i & 255) == 0) c.check_deadline(what, peer);
    }
  }
}

// The segment's chunk slots, for the chunked algorithms (`algo` names the caller).
inline net::ShmSegment& chunk_segment(Ctx& c, const char* algo) {
  if (c.smem() == nullptr || c.smem()->chunk_bytes() == 0)
    throw core::Error(dcclInternalError, std::string(algo) + ": no shared-memory chunk slots");
  return *c.smem();
}

// The chunk loop of the pipelined segment algorithms: body(k, slot, off, len) for
// consecutive chunks of `total` elements, at most max_len (>= 1) each; chunk k uses
// slot k & 1 (slots alternate). A caller whose slot cannot hold one element per
// piece (max_len == 0: a tiny DCCL_SMEM_CHUNK_BYTES, the same on every rank) runs
// its message-based equivalent instead.
template <class Body>
void for_each_chunk(Ctx& c, net::ShmSegment& seg, size_t total, size_t max_len, Body body) {
  c.start_deadline();
  for (size_t off = 0; off < total;) {
    const size_t len = std::min(max_len, total - off);
    const uint64_t k = seg.next_chunk();
    body(k, static_cast<int>(k & 1), off, len);
    off += len;
  }
}

// Waits until rank q raised flag `id` (In0/In1/Red0/Red1) for chunk k or later.
inline void await_chunk_flag(Ctx& c, net::ShmSegment& seg, int q, int id, uint64_t k, const char* what) {
  smem_await(c, what, q, [&] { return seg.flag(q, id).v.load(std::memory_order_acquire) >= k; });
}

}  // namespace dccl::coll
