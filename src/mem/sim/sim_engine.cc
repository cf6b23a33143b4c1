#include "mem/sim/sim_engine.hpp"

#include <chrono>
#include <cstring>

#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/types.hpp"

namespace dccl::mem {

std::string describe(const SimWork& w) {
  switch (w.op) {
    case SimWork::Step::Copy:
      return "copy of " + std::to_string(w.n) + " bytes";
    case SimWork::Step::Memset:
      return "memset of " + std::to_string(w.n) + " bytes";
    case SimWork::Step::Reduce:
      return std::string("reduce (") + core::dtype_name(w.dt) + " " + core::op_name(w.op_red) +
             ") of " + std::to_string(w.n) + " elements";
    case SimWork::Step::Avg:
      return std::string("avg (") + core::dtype_name(w.dt) + " / " + std::to_string(w.arg) +
             ") of " + std::to_string(w.n) + " elements";
  }
  return "work";
}

SimEngine::SimEngine() : thread_([this] { run(); }) {}

SimEngine::~SimEngine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

Ticket SimEngine::submit(const SimWork& w) {
  Ticket t;
  {
    std::lock_guard<std::mutex> lk(mu_);
    t = next_++;
    queue_.push_back(Item{t, w});
  }
  work_cv_.notify_one();
  return t;
}

void SimEngine::execute(const SimWork& w) {
  switch (w.op) {
    case SimWork::Step::Copy:
      if (w.n && w.dst != w.a) std::memmove(w.dst, w.a, w.n);
      break;
    case SimWork::Step::Memset:
      if (w.n) std::memset(w.dst, w.arg, w.n);
      break;
    case SimWork::Step::Reduce:
      if (w.n) kernels::reduce(w.dst, w.a, w.b, w.n, w.dt, w.op_red);
      break;
    case SimWork::Step::Avg:
      if (w.n) kernels::finish_avg(w.dst, w.n, w.dt, w.arg);
      break;
  }
}

void SimEngine::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    running_ = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    std::string err;
    try {
      execute(running_.w);
    } catch (const std::exception& e) {
      err = e.what();
    }
    lk.lock();
    if (!err.empty() && err_ticket_ == 0) {
      err_ticket_ = running_.t;
      err_ = "sim: ticket " + std::to_string(running_.t) + " (" + describe(running_.w) +
             ") failed: " + err;
      DCCL_WARN("%s", err_.c_str());
    }
    busy_ = false;
    completed_.store(running_.t, std::memory_order_release);
    done_cv_.notify_all();
  }
}

void SimEngine::wait(Ticket t, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  if (t >= next_)
    core::raise(dcclInvalidArgument, "sim: wait on ticket " + std::to_string(t) +
                                         ", which was never issued (last " +
                                         std::to_string(next_ - 1) + ")");
  auto ready = [&] { return completed_.load(std::memory_order_relaxed) >= t; };
  if (timeout_ms < 0) {
    done_cv_.wait(lk, ready);
  } else if (!done_cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), ready)) {
    std::string what = "sim: ticket " + std::to_string(t);
    for (const Item& it : queue_)
      if (it.t == t) what += " (" + describe(it.w) + ")";
    if (busy_ && running_.t == t) what += " (" + describe(running_.w) + ")";
    what += " not done after " + std::to_string(timeout_ms) + " ms";
    if (busy_ && running_.t != t)
      what += "; engine busy with ticket " + std::to_string(running_.t) + " (" +
              describe(running_.w) + ")";
    what += ", " + std::to_string(queue_.size()) + " queued";
    core::raise(dcclTimeout, what);
  }
  if (err_ticket_ != 0 && err_ticket_ <= t) core::raise(dcclInternalError, err_);
}

bool SimEngine::done(Ticket t) const {
  return completed_.load(std::memory_order_acquire) >= t;
}

void SimEngine::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  const Ticket last = next_ - 1;
  done_cv_.wait(lk, [&] { return completed_.load(std::memory_order_relaxed) >= last; });
}

Ticket SimEngine::last_issued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return next_ - 1;
}

}  // namespace dccl::mem
