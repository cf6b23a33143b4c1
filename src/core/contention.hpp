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
//
// Where ranks outnumber cores a yield also waits behind a peer rank's slice (a
// reduction, a copy), and sleeping then only adds wake-ups (4 ranks over TCP on 2
// quiet cores: 1-4 MiB allreduce 1.2-1.7x slower when those yields marked the
// process busy). So a long yield counts only when more tasks are runnable on the
// host than the job's ranks there that are not asleep in a wait (others_runnable;
// core/host_sleepers.hpp counts those), read only after a long yield.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
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
    if (after - before >= kLongYield && others_runnable_now()) marked_in_wait(after);
  }
  // Marks the host busy from a wait of this thread, and lets the thread's running call
  // leave its one CPU if it is large (core/affinity.hpp).
  static void marked_in_wait(Clock::time_point now);
  // Whether other work has the host's CPUs: `running` tasks runnable (the reader
  // among them; < 0: unknown), `job_ranks` of the job's ranks on this host, of
  // which `asleep` sleep in a wait. The job's runnable ranks are the others, and
  // at least the reader itself. Unknown counts as busy, as before this check.
  static bool others_runnable(int running, int job_ranks, int asleep) {
    return running < 0 || running > std::max(job_ranks - asleep, 1);
  }
  // The same with this host's counts now (after a long yield only: it reads /proc).
  static bool others_runnable_now();
  // The host's runnable tasks (nr_running, /proc/loadavg's 4th field before the
  // '/'), -1 when unknown; parse_nr_running reads it from that file's text.
  static int nr_running();
  static int parse_nr_running(const char* text, size_t len);
  // The evidence, from `now` on for kHold; reset() forgets it (for tests).
  static void reset() { until_.store(0, std::memory_order_relaxed); }
  static void mark(Clock::time_point now) { until_.store(ticks(now + kHold), std::memory_order_relaxed); }

 private:
  static int64_t ticks(Clock::time_point t) { return t.time_since_epoch().count(); }
  static inline std::atomic<int64_t> until_{0};
};

}  // namespace dccl::core
