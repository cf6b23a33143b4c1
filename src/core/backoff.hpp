// Waiting for something that has no wake-up source (a completion queue polled by
// hand, a flag in shared memory): busy-poll for the spin budget, then yield for a
// short window (the rank waited for may need this core), then sleep in naps that
// grow from 1 us to 50 us, so that a long wait leaves the CPU to ranks with work
// instead of yielding for up to the whole timeout. The kernel's default 50 us
// timer slack applies to the naps.
#pragma once
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>


namespace dccl::core {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kYieldWindow = std::chrono::microseconds(500);
  static constexpr int64_t kMaxNapNs = 50000;

  explicit Backoff(int64_t spin_us, Clock::time_point start = Clock::now())
      : spin_end_(start + std::chrono::microseconds(std::max<int64_t>(spin_us, 0))),
        yield_end_(spin_end_ + kYieldWindow) {}

  // One idle step after a poll found nothing; `now` is a recent clock reading.
  // Returns false while still in the spin budget (nothing was done).
  bool idle(Clock::time_point now) {
    return idle(now, [](int64_t ns) {
      timespec ts{0, static_cast<long>(ns)};
      nanosleep(&ts, nullptr);
    });
  }
  // The same, napping through nap(ns): a sleep that may end early when what is
  // awaited arrives (a poll on sockets).
  template <class Nap>
  bool idle(Clock::time_point now, Nap&& nap) {
    if (now < spin_end_) return false;
    if (now < yield_end_) {
      sched_yield();
      return true;
    }
    nap(nap_ns_);
    nap_ns_ = std::min<int64_t>(nap_ns_ * 2, kMaxNapNs);
    return true;
  }

 private:
  Clock::time_point spin_end_, yield_end_;
  int64_t nap_ns_ = 1000;
};

}  // namespace dccl::core
