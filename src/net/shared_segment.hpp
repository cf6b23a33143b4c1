// A POSIX shared-memory segment shared by all ranks of a communicator when they
// run on one host. Per rank: flags (each on its own cache line), two small slots
// for one-shot allreduces (coll/allreduce_segment.cc) and two chunk slots for the
// pipelined reduce-scatter + allgather of larger ones (coll/allreduce_segment_rs.cc).
// Both avoid the provider entirely: plain stores and loads, no system call, no
// page pinning, far below the cost of a message round through libfabric.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/cpu.hpp"

namespace dccl::net {

class SharedSegment {
 public:
  // Atomics shared between processes through the mapping must be lock-free: a
  // lock-based std::atomic would keep its lock in each process's own memory.
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory flags need lock-free 64-bit atomics");
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "shared-memory flags must have no hidden state");
  struct alignas(64) Flag {
    std::atomic<uint64_t> v{0};
    // In0/In1 only: what the chunk belongs to (coll/segment_wait.hpp's chunk_call),
    // written before v and read after it, on v's cache line.
    std::atomic<uint64_t> call{0};
  };
  // Rank 0 creates the segment and publishes its name through `publish`; the others
  // `fetch` it and map it. `barrier` runs between mapping and unlinking, so the name
  // never outlives the setup (a crash cannot leave it behind).
  // Flags per rank. In*: chunk slot holds input chunk k; Red*: this rank's part of
  // chunk k is reduced in its slot. (A one-shot slot carries its own flag, below.)
  enum FlagId { In0, In1, Red0, Red1, kFlags };
  // Sleeping on the flags (a futex in the segment): a rank whose wait has gone on
  // registers as a sleeper, checks its flag again and sleeps on `seq` until a
  // rank that raised a flag bumps it and wakes every sleeper. A rank that raises
  // a flag calls wake() after it: one load of a line nobody writes while no rank
  // sleeps, so waits that never sleep keep their cost. The raising rank's store
  // is not fenced against that load (a fence would cost every small operation):
  // a sleeper may miss a wake-up in that window of a few nanoseconds, so sleeps
  // are short (core::Backoff's naps) and the sleeper polls its flag a moment
  // after registering, by when such a store is visible.
  struct alignas(64) Sleep {
    std::atomic<uint32_t> seq{0};
    std::atomic<uint32_t> sleepers{0};
  };
  static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4,
                "the futex word must be a plain 32-bit word");
  // The CPU a rank ran on when it last waited, on a line of its own per rank: a wait
  // does not spin for a rank that shares its CPU (coll/segment_wait.hpp). Stored as
  // CPU + 1, so that the segment's zeroed pages read "not known yet" (-1).
  struct alignas(64) Seat {
    std::atomic<int32_t> cpu1;
  };
  void set_cpu(int cpu) { seat(rank_).cpu1.store(cpu + 1, std::memory_order_relaxed); }
  int cpu_of(int rank) const { return seat(rank).cpu1.load(std::memory_order_relaxed) - 1; }
  void wake() {
    if (sleep_->sleepers.load(std::memory_order_relaxed) != 0) wake_all();
  }
  // Sleeps up to `ns` unless ready() holds once registered as a sleeper.
  template <class Ready>
  void sleep(int64_t ns, Ready ready) {
    sleep_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = sleep_->seq.load(std::memory_order_acquire);
    bool now = false;
    for (int i = 0; i < 64 && !(now = ready()); ++i) core::cpu_relax();
    if (!now) sleep_on(seen, ns);
    sleep_->sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
  // Payload of a one-shot slot starts this far into the slot's first cache line,
  // right after the slot's sequence flag and its call word: a small message, its
  // flag and what call it belongs to travel between cores as one line.
  static constexpr size_t kSlotData = 16;
  // slot_bytes: one one-shot slot (0: none); chunk_bytes: one chunk slot (0: none).
  SharedSegment(int rank, int nranks, size_t slot_bytes, size_t chunk_bytes, const std::function<void(const std::string&)>& publish,
             const std::function<std::string()>& fetch, const std::function<void()>& barrier);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // Payload capacity of a one-shot slot (its stride less the flag's bytes).
  size_t slot_bytes() const { return slot_stride_ == 0 ? 0 : slot_stride_ - kSlotData; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  int nranks() const { return n_; }
  char* slot(int rank, int parity) const { return slot_line(rank, parity) + kSlotData; }
  // The one-shot slot's flag: the operation whose input the slot holds.
  std::atomic<uint64_t>& seq(int rank, int parity) const {
    return *reinterpret_cast<std::atomic<uint64_t>*>(slot_line(rank, parity));
  }
  // The call the slot's input belongs to (coll/segment_wait.hpp's chunk_call),
  // written before the flag and read after it.
  std::atomic<uint64_t>& call(int rank, int parity) const {
    return *reinterpret_cast<std::atomic<uint64_t>*>(slot_line(rank, parity) + 8);
  }
  char* chunk_slot(int rank, int parity) const;
  Flag& flag(int rank, int id) const;
  uint64_t next_op() { return ++ops_; }        // same sequence on every rank
  uint64_t next_chunk() { return ++chunks_; }  // likewise, for chunk slots

 private:
  // One-shot slots follow the flags: rank r's slot of parity p is line 2r + p.
  char* slot_line(int rank, int parity) const {
    return slots_ + (static_cast<size_t>(rank) * 2 + static_cast<size_t>(parity)) * slot_stride_;
  }
  void wake_all();
  void sleep_on(uint32_t seen, int64_t ns);
  Seat& seat(int rank) const { return seats_[rank]; }
  int rank_, n_;
  Sleep* sleep_ = nullptr;  // after the flags
  Seat* seats_ = nullptr;   // after the sleepers' line
  size_t slot_stride_, chunk_bytes_;  // bytes per one-shot slot (0: none) and per chunk slot
  size_t bytes_ = 0;
  char* base_ = nullptr;
  char* slots_ = nullptr;  // the first one-shot slot (past the flags)
  uint64_t ops_ = 0, chunks_ = 0;
};

}  // namespace dccl::net
