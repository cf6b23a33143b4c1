// dcclStream_t: an ordered execution queue served by one worker thread.
// Work runs in submission order; the first error is kept and reported by
// synchronize()/query(). Several communicators may share a stream, and a stream
// may outlive a communicator: work of a destroyed communicator that was still
// queued fails when reached (naming why) and the others' work runs on.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/error.hpp"

namespace dccl::sched {

class Stream {
 public:
  Stream();
  ~Stream();  // drains the queue, then joins the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void enqueue(std::function<void()> work);
  // Blocks until every queued item ran; throws the first error (then clears it).
  // dcclTimeout when no item finished for timeout_ms: a long queue that makes
  // progress is waited for (each item is bounded by its own deadline).
  void synchronize(int64_t timeout_ms);
  // Like synchronize(), but returns false when work is still pending after
  // timeout_ms instead of throwing (the caller decides whether to wait on).
  bool wait_idle(int64_t timeout_ms);
  // True when idle; throws the first error like synchronize().
  bool query();

 private:
  void run();
  void rethrow_locked();
  // Enqueued minus finished items, readable without the lock: synchronize() and the
  // idle worker poll it briefly before sleeping, which saves two thread wake-ups
  // (several microseconds) on every small operation.
  std::atomic<uint64_t> outstanding_{0};
  std::mutex mu_;
  std::condition_variable cv_work_, cv_idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stop_ = false, has_error_ = false;
  uint64_t finished_ = 0;  // items run (under mu_), for synchronize()'s progress
  int syncing_ = 0;        // threads in synchronize(): each finished item wakes them
  dcclResult_t err_code_ = dcclSuccess;
  std::string err_text_;
  std::thread worker_;
};

}  // namespace dccl::sched
