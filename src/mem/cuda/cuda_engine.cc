#include "mem/cuda/cuda_engine.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "core/backoff.hpp"
#include "core/error.hpp"

namespace dccl::mem::cuda {

DeviceGuard::DeviceGuard(Api& api, int dev) : api_(api), prev_(api.current_device()) {
  api_.set_device(dev);
  restore_ = prev_ >= 0 && prev_ != dev;
}

DeviceGuard::~DeviceGuard() {
  if (!restore_) return;
  try {
    api_.set_device(prev_);
  } catch (...) {  // the caller's device could not be restored: nothing better to do here
  }
}

Api::Stream Engine::stream(Lane lane) {
  Api::Stream& s = streams_[static_cast<int>(lane)];
  if (!s) s = api_.stream_create();
  return s;
}

void Engine::wait_ticket(Api::Stream s, Ticket t) {
  if (t == 0 || completed_.load(std::memory_order_acquire) >= t) return;
  for (const Pending& p : pending_)
    if (p.t == t) {
      api_.stream_wait_event(s, p.ev);
      return;
    }
}

void Engine::order(Lane lane, Api::Stream s) {
  const int l = static_cast<int>(lane);
  if (lane == Lane::Main) {
    for (int c : {static_cast<int>(Lane::Out), static_cast<int>(Lane::In)})
      if (tail_[c] > joined_[c]) {
        wait_ticket(s, tail_[c]);
        joined_[c] = tail_[c];
      }
    return;
  }
  const int m = static_cast<int>(Lane::Main);
  if (tail_[m] > joined_[l]) {
    wait_ticket(s, tail_[m]);
    joined_[l] = tail_[m];
  }
}

Ticket Engine::record(const char* what, size_t n, Api::Stream s) {
  Api::Event ev;
  if (!pool_.empty()) {
    ev = pool_.back();
    pool_.pop_back();
  } else {
    ev = api_.event_create();
  }
  try {
    api_.event_record(ev, s);
  } catch (...) {
    pool_.push_back(ev);
    throw;
  }
  Ticket t = next_++;
  pending_.push_back(Pending{t, ev, what, n});
  return t;
}

Ticket Engine::issue(Lane lane, const char* what, size_t n, const std::function<void(Api::Stream)>& fn) {
  std::lock_guard<std::mutex> lk(mu_);
  DeviceGuard g(api_, dev_);
  Api::Stream s = stream(lane);
  order(lane, s);
  fn(s);
  Ticket t = record(what, n, s);
  tail_[static_cast<int>(lane)] = t;
  return t;
}

bool Engine::done(Ticket t) {
  if (completed_.load(std::memory_order_acquire) >= t) return true;
  std::lock_guard<std::mutex> lk(mu_);
  if (t >= next_) core::raise(dcclInvalidArgument, "cuda: ticket " + std::to_string(t) + " was never issued");
  while (!pending_.empty()) {
    const Pending& front = pending_.front();
    bool finished = false;
    try {
      finished = api_.event_done(front.ev);
    } catch (const core::Error& e) {
      core::raise(e.code(), std::string(e.what()) + " (ticket " + std::to_string(front.t) + ": " + front.what + ")");
    }
    if (!finished) break;
    completed_.store(front.t, std::memory_order_release);
    pool_.push_back(front.ev);
    pending_.pop_front();
  }
  return completed_.load(std::memory_order_acquire) >= t;
}

void Engine::wait(Ticket t, int64_t timeout_ms) {
  auto start = std::chrono::steady_clock::now();
  core::Backoff backoff(0, start);  // yield, then nap (at once when the CPUs are busy)
  for (;;) {
    if (done(t)) return;
    const auto now = std::chrono::steady_clock::now();
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
    if (timeout_ms >= 0 && waited >= timeout_ms) {
      std::lock_guard<std::mutex> lk(mu_);
      std::string what = "cuda: ticket " + std::to_string(t);
      for (const Pending& p : pending_)
        if (p.t == t) what += " (" + std::string(p.what) + " of " + std::to_string(p.n) + ")";
      core::raise(dcclTimeout, what + " not done after " + std::to_string(timeout_ms) + " ms; " +
                                   std::to_string(pending_.size()) + " pending on device " + std::to_string(dev_));
    }
    backoff.idle(now);
  }
}

void Engine::sync_all() {
  std::lock_guard<std::mutex> lk(mu_);
  DeviceGuard g(api_, dev_);
  for (Api::Stream s : streams_)
    if (s) api_.stream_sync(s);
}

double Engine::time_copies_us(const Backend::Copy* copies, const Lane* lanes, int n, int64_t timeout_ms) {
  if (n <= 0) return 0;
  std::lock_guard<std::mutex> lk(mu_);
  DeviceGuard g(api_, dev_);
  std::vector<Api::Event> events;  // [0]: start, then one stop per copy
  auto destroy = [&] {
    for (Api::Event e : events) try {
        api_.event_destroy(e);
      } catch (...) {  // a device error is reported by the call that failed
      }
  };
  double us = 0;
  try {
    Api::Stream main = stream(Lane::Main);
    order(Lane::Main, main);
    events.push_back(api_.timing_event_create());
    api_.event_record(events[0], main);
    for (int i = 0; i < n; ++i) {
      Api::Stream s = stream(lanes[i]);
      if (s != main) api_.stream_wait_event(s, events[0]);
      api_.copy_async(copies[i].dst, copies[i].src, copies[i].bytes, s);
      events.push_back(api_.timing_event_create());
      api_.event_record(events.back(), s);
    }
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 1; i < events.size(); ++i) {
      while (!api_.event_done(events[i])) {
        if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(timeout_ms))
          core::raise(dcclTimeout, "cuda: timed copies not done after " + std::to_string(timeout_ms) +
                                       " ms on device " + std::to_string(dev_));
        std::this_thread::yield();
      }
      us = std::max(us, 1000.0 * api_.event_elapsed_ms(events[0], events[i]));
    }
  } catch (...) {
    destroy();
    throw;
  }
  destroy();
  return us;
}

}  // namespace dccl::mem::cuda
