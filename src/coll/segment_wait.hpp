// Waiting on flags in the host shared-memory segment (coll/allreduce_segment*.cc).
#pragma once

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "coll/call_context.hpp"
#include "core/backoff.hpp"
#include "core/cpu.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "net/shared_segment.hpp"

namespace dccl::coll {

// The spin budget of a wait for a rank last seen on `peer_cpu`, from this rank on
// `my_cpu` (-1: not known): none when both are known and the same, since the rank
// waited for cannot run while this one spins on its CPU (2 unbound ranks, 8 B, on a
// loaded machine: 154 us per call with the 50 us spin, 3 us without it).
inline int64_t segment_spin_us(int64_t spin_us, int my_cpu, int peer_cpu) {
  return my_cpu >= 0 && my_cpu == peer_cpu ? 0 : spin_us;
}

// Waits until pred() holds: polls for the spin budget (checking the clock every
// 32 polls), then yields (the rank being waited for may share this core: more
// ranks or stream threads than cores). Without the spin budget (ranks outnumber
// cores, or the rank waited for was last seen on this CPU) it yields at once. Past
// core::Backoff's yield window, or past the spin when the CPUs are busy with other
// processes (core/contention.hpp), it sleeps on the segment's futex until a rank
// raises a flag (net::SharedSegment::sleep). Bounded by the operation's deadline;
// stops when the communicator failed.
// The backoff starts at the first idle step, not on entry: a wait that the first
// polls end (most small operations) reads no clock and no CPU number.
template <class Pred>
void segment_await(CallContext& c, const char* what, int peer, Pred pred) {
  const unsigned every = c.spin_us() > 0 ? 32 : 1;
  std::optional<core::Backoff> backoff;
  net::SharedSegment& seg = *c.segment();
  for (unsigned i = 1; !pred(); ++i) {
    core::cpu_relax();
    if (i % every == 0) {
      const auto now = core::Backoff::Clock::now();
      if (!backoff) {
        const int cpu = sched_getcpu();
        seg.set_cpu(cpu);
        backoff.emplace(segment_spin_us(c.spin_us(), cpu, seg.cpu_of(peer)), now);
      }
      // A sleep ends at the deadline's next check at the latest (1 ms naps).
      if (backoff->idle(now, true, [&](int64_t ns) { seg.sleep(ns, pred); })) c.check_deadline(what, peer);
      else if ((i & 255) == 0) c.check_deadline(what, peer);
    }
  }
}

// The segment's chunk slots, for the chunked algorithms (`algo` names the caller).
inline net::SharedSegment& chunk_segment(CallContext& c, const char* algo) {
  if (c.segment() == nullptr || c.segment()->chunk_bytes() == 0)
    throw core::Error(dcclInternalError, std::string(algo) + ": no shared-memory chunk slots");
  return *c.segment();
}

// The chunk loop of the pipelined segment algorithms: body(k, slot, off, len) for
// consecutive chunks of `total` elements, at most max_len (>= 1) each; chunk k uses
// slot k & 1 (slots alternate). A caller whose slot cannot hold one element per
// piece (max_len == 0: a tiny DCCL_SEGMENT_CHUNK_BYTES, the same on every rank) runs
// its message-based equivalent instead.
template <class Body>
void for_each_chunk(CallContext& c, net::SharedSegment& seg, size_t total, size_t max_len, Body body) {
  c.start_deadline();
  for (size_t off = 0; off < total;) {
    const size_t len = std::min(max_len, total - off);
    const uint64_t k = seg.next_chunk();
    body(k, static_cast<int>(k & 1), off, len);
    off += len;
  }
}

// Waits until rank q raised flag `id` (In0/In1/Red0/Red1) for chunk k or later.
inline void await_chunk_flag(CallContext& c, net::SharedSegment& seg, int q, int id, uint64_t k, const char* what) {
  segment_await(c, what, q, [&] { return seg.flag(q, id).v.load(std::memory_order_acquire) >= k; });
}

// The call a rank's input chunk belongs to: which segment algorithm, datatype, op
// and the call's count (elements). Published with every In flag (and with every
// one-shot slot, coll/allreduce_segment.cc): ranks whose calls
// differ (another count, type, op or collective) fail naming both sides instead of
// reducing each other's chunks into a wrong result.
// A step of a hierarchical call carries that call's step mark as well
// (CallContext::parent_mark), so that steps alike in themselves but of calls that
// differ between ranks do not pair. Layout: [63:62] collective, [61:58] datatype,
// [57:55] op (core::wire_op: a PreMulSum is kPreMulOp), [54:39] step mark (0: a call of its own),
// [38:0] count.
enum class ChunkColl : uint64_t { AllReduce = 1, AllGather = 2, ReduceScatter = 3 };
inline uint64_t chunk_call(ChunkColl coll, const CallContext& c, size_t count) {
  const uint64_t op = static_cast<uint64_t>(core::wire_op(c.op(), c.premul())) & 0x7;
  return (static_cast<uint64_t>(coll) << 62) | (static_cast<uint64_t>(c.dt() & 0xf) << 58) | (op << 55) |
         (static_cast<uint64_t>(c.parent_mark() & 0xffff) << 39) |
         (static_cast<uint64_t>(count) & ((uint64_t{1} << 39) - 1));
}
std::string chunk_call_text(uint64_t call);  // "all_reduce of 1048576 x float32 (sum)"

// Fails the call when rank q's call `theirs` is not this rank's `call`, naming both.
inline void refuse_other_call(CallContext& c, int q, uint64_t theirs, uint64_t call) {
  if (theirs != call)
    c.refuse(dcclInvalidUsage, "rank " + std::to_string(q) + " called " + chunk_call_text(theirs) + ", this rank " +
                                   chunk_call_text(call) + ": the calls differ between ranks");
}

// Rank r's input chunk k (its chunk slot of parity p) is ready.
inline void raise_input(net::SharedSegment& seg, int r, int p, uint64_t k, uint64_t call) {
  net::SharedSegment::Flag& f = seg.flag(r, net::SharedSegment::In0 + p);
  f.call.store(call, std::memory_order_relaxed);
  f.v.store(k, std::memory_order_release);
  seg.wake();
}

// Waits for rank q's input chunk k, then checks that it belongs to the same call.
inline void await_input(CallContext& c, net::SharedSegment& seg, int q, int p, uint64_t k, uint64_t call) {
  await_chunk_flag(c, seg, q, net::SharedSegment::In0 + p, k, "its input chunk");
  refuse_other_call(c, q, seg.flag(q, net::SharedSegment::In0 + p).call.load(std::memory_order_relaxed), call);
}

// A chunked call of 0 elements: it takes its turn (one chunk, its call word beside
// its In flag) and meets the others' call words, moving nothing. A rank that skipped
// the turn would pair its next call with the others' call of this turn.
inline void empty_turn(CallContext& c, net::SharedSegment& seg, uint64_t call) {
  c.start_deadline();
  const uint64_t k = seg.next_chunk();
  const int p = static_cast<int>(k & 1);
  raise_input(seg, c.rank(), p, k, call);
  for (int j = 1; j < c.nranks(); ++j) await_input(c, seg, (c.rank() + j) % c.nranks(), p, k, call);
}

}  // namespace dccl::coll
