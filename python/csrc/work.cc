// The execution side of the backend: the worker thread and the Work it completes.
#include "work.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "errors.hpp"

namespace torch_dccl {

namespace {

std::mutex g_drop_mu;    // held while a worker drops a job
bool g_exiting = false;  // python_exiting() was called (under g_drop_mu)
std::atomic<bool> g_uncaught{false};  // uncaught_exception() was called

}  // namespace

void python_exiting() {
  std::lock_guard<std::mutex> lk(g_drop_mu);  // waits for a drop under way
  g_exiting = true;
}

void uncaught_exception() { g_uncaught.store(true); }
bool abort_dropped_groups() { return g_uncaught.load(); }

WorkDCCL::WorkDCCL(int rank, int size, c10d::OpType type, std::string op, std::vector<at::Tensor> outputs,
                   std::chrono::milliseconds timeout, uint64_t seq)
    : c10d::Work(rank, type),
      size_(size),
      op_(std::move(op)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      seq_(seq),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

WorkDCCL::~WorkDCCL() = default;

void WorkDCCL::set_stream_order(std::shared_ptr<Ticket> ticket, std::function<void(const Ticket&)> consumer_wait) {
  ticket_ = std::move(ticket);
  consumer_wait_ = std::move(consumer_wait);
}

bool WorkDCCL::wait_host(std::chrono::milliseconds timeout) {
  // kNoTimeout (0) means the group's timeout, which also bounds the DirectCCL
  // call itself: a little grace lets that call's error, which names the cause
  // (the peer waited for, a count mismatch), arrive before this one. No wait
  // is unbounded; a timeout given to wait() is kept exactly.
  const bool own = timeout == ::kNoTimeout;
  const auto limit = own ? timeout_ + std::min(timeout_ / 4, std::chrono::milliseconds(1000)) : timeout;
  std::unique_lock<std::mutex> lk(mutex_);
  if (!cv_.wait_for(lk, limit, [&] { return completed_; })) {
    std::string why = "not complete after ";
    why.append(std::to_string(limit.count())).append(" ms (");
    why.append(own ? "the process group's timeout" : "the timeout given to wait");
    why.append("); a peer may be missing or slow, and the operation is still queued or running");
    throw std::runtime_error(describe(rank_, size_, op_, why));
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

bool WorkDCCL::wait(std::chrono::milliseconds timeout) {
  if (!ticket_) return wait_host(timeout);
  // CUDA: the current stream waits; the caller's thread does not.
  consumer_wait_(*ticket_);
  std::lock_guard<std::mutex> lk(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WorkDCCL::synchronize() {
  if (ticket_) consumer_wait_(*ticket_);
}

std::vector<at::Tensor> WorkDCCL::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> WorkDCCL::getFuture() { return future_; }

int WorkDCCL::sourceRank() const {
  const int r = source_rank_->load();
  if (r < 0) fail(rank_, size_, op_, "sourceRank() is known only for a completed receive from any source");
  return r;
}

void WorkDCCL::complete(std::exception_ptr error) {
  finish(error);  // completed_, exception_, and wakes wait()
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

Worker::Worker() : thread_([this] { loop(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Worker::post(c10::intrusive_ptr<WorkDCCL> work, std::function<void()> body) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    jobs_.push_back(Job{std::move(work), std::move(body)});
  }
  cv_.notify_one();
}

void Worker::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      // Waits for the next job without a bound: the worker owns no blocking
      // call of its own; every job's DirectCCL calls are bounded by the timeout.
      cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop_ and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::exception_ptr error;
    try {
      job.body();
    } catch (...) {
      error = std::current_exception();
    }
    // The body's tensors go before the caller wakes (it still holds its own), so
    // that a caller that then leaves the interpreter does not race this drop.
    drop(Job{nullptr, std::move(job.body)});
    job.work->complete(error);
    drop(std::move(job));  // the Work, with its outputs when the caller dropped it first
  }
}

void Worker::drop(Job&& job) {
  std::lock_guard<std::mutex> lk(g_drop_mu);
  if (g_exiting) {
    static_cast<void>(new Job(std::move(job)));  // the process is ending: leaked
    return;
  }
  Job gone(std::move(job));  // destroyed here, before the lock is released
}

}  // namespace torch_dccl
