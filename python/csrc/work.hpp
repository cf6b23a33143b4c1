// WorkDCCL, one operation's completion, and Worker, the group's one thread that
// runs the operations in submission order.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "cuda_order.hpp"

namespace torch_dccl {

// wait() is bounded by the group's timeout (or the caller's); the Future carries
// the output tensors or the error. For CUDA tensors wait() instead makes the
// current stream wait for the operation's end event (stream-ordered, as NCCL's
// backend) and raises only an error already known.
class WorkDCCL : public c10d::Work {
 public:
  WorkDCCL(int rank, int size, c10d::OpType type, std::string op, std::vector<at::Tensor> outputs,
           std::chrono::milliseconds timeout, uint64_t seq);
  ~WorkDCCL() override;

  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  uint64_t getSequencenumber() const override { return seq_; }

  // Called once, by the worker: nullptr for success.
  void complete(std::exception_ptr error);
  const std::string& op() const { return op_; }
  // CUDA work: its ticket and how to make the current stream wait for it.
  void set_stream_order(std::shared_ptr<Ticket> ticket, std::function<void(const Ticket&)> consumer_wait);
  // The sender of a receive: known at the post (recv) or learnt by the worker
  // (recv from any source), which writes the cell it shares with this Work.
  using SourceCell = std::shared_ptr<std::atomic<int>>;
  void set_source_rank(int r) { source_rank_->store(r); }
  void share_source_rank(SourceCell cell) { source_rank_ = std::move(cell); }

 private:
  bool wait_host(std::chrono::milliseconds timeout);

  const int size_;
  const std::string op_;
  std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds timeout_;
  const uint64_t seq_;
  SourceCell source_rank_ = std::make_shared<std::atomic<int>>(-1);
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<Ticket> ticket_;
  std::function<void(const Ticket&)> consumer_wait_;
};

// Called once at the interpreter's exit (torch_dccl's atexit hook), without the
// GIL: from then on the workers leak what a job held instead of dropping it.
// Dropping a tensor that Python also holds takes the GIL, and Python ends a
// thread that takes it while the interpreter finalizes (pthread_exit through
// C++ frames: std::terminate, the process dies of SIGABRT).
void python_exiting();
// Called from torch_dccl's sys.excepthook: an uncaught exception is ending the
// interpreter. Groups dropped without destroy_process_group are then aborted
// (their peers may wait for this rank in a collective: they fail at once) instead
// of destroyed (which meets the peers, so that their last calls with this rank end).
void uncaught_exception();
bool abort_dropped_groups();

class Worker {
 public:
  Worker();
  ~Worker();  // runs what is queued (each job is bounded by the timeout), then joins
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void post(c10::intrusive_ptr<WorkDCCL> work, std::function<void()> body);

 private:
  struct Job {
    c10::intrusive_ptr<WorkDCCL> work;
    std::function<void()> body;
  };
  void loop();
  static void drop(Job&& job);  // destroys job, or leaks it after python_exiting()

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace torch_dccl
