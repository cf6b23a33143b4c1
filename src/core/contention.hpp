// Whether this host's CPUs were lately found busy with work other than the waits
// of this process. The evidence is what a wait cost: a sched_yield() that came
// back only after kLongYield ran behind another task's whole time slice (a busy
// process on this core, e.g. a data-loader worker), and every later yield would
// lose another slice (measured on this 2-core VM beside one spinning process per
// core: each yield ~4 ms, against ~1 us when the other runnable task is a peer
// rank that yields back). While the evidence is fresh (kHold), waits skip their
// spin and yield phases and sleep in the kernel until what they wait for arrives
// (core/backoff.hpp), which the scheduler answers with a prompt wake-up.
// Process-wide: the busy processes slow every wait of this process alike.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

namespace dccl::core {

class Contention {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kLongYield = std::chrono::milliseconds(1);
  static constexpr auto kHold = std::chrono::seconds(1);

  static bool busy(Clock::time_point now) { return ticks(now) < until_.load(std::memory_order_relaxed); }
  // A yield that started at `before` returned at `after`.
  static void yielded(Clock::time_point before, Clock::time_point after) {
    if (after - before >= kLongYield) until_.store(ticks(after + kHold), std::memory_order_relaxed);
  }
  // For tests: forget the evidence, or invent it.
  static void reset() { until_.store(0, std::memory_order_relaxed); }
  static void mark(Clock::time_point now) { until_.store(ticks(now + kHold), std::memory_order_relaxed); }

 private:
  static int64_t ticks(Clock::time_point t) { return t.time_since_epoch().count(); }
  static inline std::atomic<int64_t> until_{0};
};

}  // namespace dccl::core
