// Waiting for something without a wake-up of its own (a completion queue polled
// by hand, a flag in shared memory): busy-poll for the spin budget, then yield
// for a short window (the rank waited for may need this core), then sleep in
// naps that grow from 1 us, so that a long wait leaves the CPU to ranks with
// work instead of yielding for up to the whole timeout.
//
// The naps: `nap(ns)` may end early when what is awaited arrives (a futex on a
// shared-memory flag, a poll on sockets: `wakes` true); such naps last
// kMaxWakeNap, since they cost no latency. Plain naps (nanosleep) grow to
// kMaxNap, and to a 64th of the time waited so far beyond that (at most
// kMaxWakeNap), so that a peer that comes seconds late costs little CPU while
// the wake-up comes at most ~2 % late.
//
// When the CPUs are busy (core/contention.hpp: a yield lately lost a whole time
// slice to another process), a yield gives the core away for a slice: the wait
// then sleeps right after its spin budget, and the scheduler runs it again
// promptly when it is woken (or its nap ends). The spin stays: a peer that runs
// at the same time answers within it, and a sleep would add two wake-ups per
// step. Each yield is timed to gather the evidence. The same holds where ranks
// outnumber cores (no spin budget): 4 ranks over TCP on 2 cores beside 2 spinning
// processes took 12-14 ms per 8 B allreduce while they yielded (every yield lost
// a slice to a spinner) and 0.4-2 ms when they slept; a long yield behind the
// job's own ranks does not count (core/contention.hpp), so on a quiet machine they
// keep yielding. A nap marks its thread asleep on the host's board of the job's
// sleepers (core/host_sleepers.hpp), which that count reads. The kernel's default
// 50 us timer slack applies to the naps.
//
// While busy, a sleep costs a wake-up behind the busy processes, so the spin
// adapts to what the thread's waits lately cost (an average of their lengths,
// kept per thread): while they were short (up to kMaxBusySpin) a wait spins for
// up to twice that average, at most kMaxBusySpin, before it sleeps; once they were
// long (a late peer, a slow link) it sleeps after the configured spin, as before.
// 2 ranks beside 2 spinning processes on 2 cores, 1 MiB allreduce over TCP: 2.4 ms
// a call sleeping after 50 us, 1.6 ms spinning up to 2 ms (MPICH, which polls:
// 1.8); bench/results/2026-12-05-busy-spin. A wait without a spin budget (ranks
// outnumber cores, or the rank waited for shares this CPU) never spins.
#pragma once
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "core/contention.hpp"
#include "core/host_sleepers.hpp"

namespace dccl::core {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kYieldWindow = std::chrono::microseconds(500);
  static constexpr int64_t kMaxNapNs = 50000;
  static constexpr int64_t kMaxWakeNapNs = 1000000;
  static constexpr auto kMaxBusySpin = std::chrono::milliseconds(2);

  explicit Backoff(int64_t spin_us, Clock::time_point start = Clock::now())
      : start_(start),
        spin_end_(start + std::chrono::microseconds(std::max<int64_t>(spin_us, 0))),
        yield_end_(spin_end_ + kYieldWindow),
        last_(start),
        may_extend_(spin_us > 0) {}
  // The wait is over: its length (to the last idle step) joins the thread's average.
  ~Backoff() { note_wait(last_ - start_); }
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  // The thread's average wait (for tests and logs), and a wait's length noted by
  // hand (tests). reset_waits() forgets them.
  static Clock::duration recent_wait() { return Clock::duration(t_recent_wait); }
  static void note_wait(Clock::duration d) {
    t_recent_wait += (std::max<Clock::rep>(d.count(), 0) - t_recent_wait) / 4;
  }
  static void reset_waits() { t_recent_wait = 0; }
  // Idle steps this thread took past the spin (yields and naps), for tests: a wait
  // whose message had already arrived takes none.
  static uint64_t idle_steps() { return t_idle_steps; }

  // One idle step after a poll found nothing; `now` is a recent clock reading.
  // Returns false while still in the spin budget (nothing was done). Where the wait
  // progresses a transport, the poll must follow that progress: a step taken right
  // after a progress that completed the wait naps through it (net/transport.cc wait).
  bool idle(Clock::time_point now) {
    return idle(now, false, [](int64_t ns) {
      timespec ts{0, static_cast<long>(ns)};
      nanosleep(&ts, nullptr);
    });
  }
  // The same, napping through nap(ns); `wakes`: the nap ends when what is
  // awaited arrives.
  template <class Nap>
  bool idle(Clock::time_point now, bool wakes, Nap&& nap) {
    last_ = now;
    if (now < spin_end_) return false;
    if (may_extend_ && Contention::busy(now)) {  // once per wait: spin on while waits are short
      may_extend_ = false;
      const Clock::duration recent = recent_wait();
      if (recent <= kMaxBusySpin) {
        const Clock::time_point end = start_ + std::min<Clock::duration>(2 * recent, kMaxBusySpin);
        if (end > spin_end_) {
          spin_end_ = end;
          yield_end_ = end + kYieldWindow;
          if (now < spin_end_) return false;
        }
      }
    }
    ++t_idle_steps;
    if (now < yield_end_ && !Contention::busy(now)) {
      sched_yield();
      Contention::yielded(now, Clock::now());
      return true;
    }
    const HostSleepers::Asleep asleep;  // not runnable for the nap (core/host_sleepers.hpp)
    if (wakes) {
      nap(kMaxWakeNapNs);
      return true;
    }
    nap(nap_ns_);
    const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(now - start_).count();
    nap_ns_ = std::min<int64_t>(nap_ns_ * 2, std::clamp<int64_t>(waited / 64, kMaxNapNs, kMaxWakeNapNs));
    return true;
  }

 private:
  Clock::time_point start_, spin_end_, yield_end_, last_;
  bool may_extend_;
  int64_t nap_ns_ = 1000;
  static inline thread_local Clock::rep t_recent_wait = 0;  // the average, Clock ticks
  static inline thread_local uint64_t t_idle_steps = 0;
};

}  // namespace dccl::core
