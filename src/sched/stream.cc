#include "sched/stream.hpp"

#include <sched.h>

#include <chrono>

#include "core/contention.hpp"
#include "core/cpu.hpp"

namespace dccl::sched {

Stream::Stream() : worker_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::unique_lock<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  worker_.join();
}

namespace {
// Polls `done` for up to ~20 us, yielding so that oversubscribed cores still turn over.
// Not when the CPUs are busy with other processes (core/contention.hpp): a yield
// would then give the core away for a whole time slice, and the condition
// variable's wait that follows wakes as soon as `done` holds.
template <class F>
bool poll_briefly(F done) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  if (core::Contention::busy(start)) return done();
  const auto until = start + std::chrono::microseconds(20);
  for (unsigned i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) == 63) {
      const auto now = Clock::now();
      if (now > until) return false;
      sched_yield();
      core::Contention::yielded(now, Clock::now());
    }
    core::cpu_relax();
  }
}
}  // namespace

void Stream::enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(work));
    outstanding_.fetch_add(1, std::memory_order_release);
  }
  cv_work_.notify_one();
}

void Stream::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      lk.unlock();
      poll_briefly([&] { return outstanding_.load(std::memory_order_acquire) != 0; });
      lk.lock();
    }
    cv_work_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    auto work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    // Work always runs (communicators fail fast after an error themselves), so
    // every queued submission takes its turn and nothing waits forever.
    dcclResult_t code = dcclSuccess;
    std::string text;
    try {
      work();
    } catch (const core::Error& e) {
      code = e.code();
      text = e.what();
    } catch (const std::exception& e) {
      code = dcclInternalError;
      text = e.what();
    }
    lk.lock();
    busy_ = false;
    ++finished_;
    outstanding_.fetch_sub(1, std::memory_order_release);
    if (code != dcclSuccess && !has_error_) {
      has_error_ = true;
      err_code_ = code;
      err_text_ = text;
    }
    if (queue_.empty() || syncing_) cv_idle_.notify_all();
  }
}

void Stream::rethrow_locked() {
  if (!has_error_) return;
  has_error_ = false;
  throw core::Error(err_code_, err_text_);
}

bool Stream::wait_idle(int64_t timeout_ms) {
  poll_briefly([&] { return outstanding_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_idle_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return queue_.empty() && !busy_; }))
    return false;
  rethrow_locked();
  return true;
}

void Stream::synchronize(int64_t timeout_ms) {
  poll_briefly([&] { return outstanding_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lk(mu_);
  ++syncing_;
  for (uint64_t seen = finished_;;) {
    const bool woke = cv_idle_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
                                        [&] { return (queue_.empty() && !busy_) || finished_ != seen; });
    if (queue_.empty() && !busy_) break;
    if (!woke) {
      --syncing_;
      throw core::Error(dcclTimeout, "stream synchronize: no queued call finished for " +
                                         std::to_string(timeout_ms / 1000) + " s (" +
                                         std::to_string(queue_.size() + (busy_ ? 1 : 0)) + " still pending)");
    }
    seen = finished_;  // progress: a new window
  }
  --syncing_;
  rethrow_locked();
}

bool Stream::query() {
  std::lock_guard<std::mutex> lk(mu_);
  bool idle = queue_.empty() && !busy_;
  if (idle) rethrow_locked();
  return idle;
}

}  // namespace dccl::sched
