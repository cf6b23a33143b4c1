// torch_dccl: a PyTorch (1.13) process group over DirectCCL.
//
// Every call on a ProcessGroupDCCL checks its arguments on the caller's thread,
// then queues a job on the group's one worker thread and returns a WorkDCCL at
// once. The worker runs the jobs in submission order with DirectCCL's blocking
// calls (stream NULL), each bounded by the communicator's timeout, and completes
// the job's Work (and its Future) with the outputs or with the error text that
// DirectCCL left on the worker thread.
#pragma once

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
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <dccl/dccl.h>

namespace torch_dccl {

// "torch_dccl rank R/N: op: cause", the one shape of every error text.
std::string describe(int rank, int size, const std::string& op, const std::string& cause);
// DirectCCL's text for this thread's last error, with the result's name.
std::string dccl_text(dcclResult_t r, dcclComm_t comm);

// One operation's completion: wait() is bounded by the group's timeout (or the
// caller's), the Future carries the output tensors or the error.
class WorkDCCL : public c10d::Work {
 public:
  WorkDCCL(int rank, int size, c10d::OpType type, std::string op, std::vector<at::Tensor> outputs,
           std::chrono::milliseconds timeout);
  ~WorkDCCL() override;

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Called once, by the worker: nullptr for success.
  void complete(std::exception_ptr error);
  const std::string& op() const { return op_; }

 private:
  const int size_;
  const std::string op_;
  std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread running jobs in the order they were posted. The destructor runs
// what is queued (each job is bounded by the communicator's timeout), then joins.
class Worker {
 public:
  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void post(c10::intrusive_ptr<WorkDCCL> work, std::function<void()> body);

 private:
  struct Job {
    c10::intrusive_ptr<WorkDCCL> work;
    std::function<void()> body;
  };
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

// ---- tensors (tensors.cc) ----

// DirectCCL type of a tensor's dtype for reductions; throws naming rank, op and dtype.
dcclDataType_t reduce_type(const at::Tensor& t, int rank, int size, const std::string& op);
// A reduction as the worker runs it: DirectCCL's op, or for PREMUL_SUM its
// factor, which the worker turns into a DirectCCL PreMulSum op around the call.
struct Reduction {
  dcclRedOp_t op = dcclSum;
  bool premul = false;
  double factor = 1.0;
  at::ScalarType dtype = at::kFloat;  // the tensors', for the factor's representation
};
// The reduction for a PyTorch ReduceOp on dtype t; throws for BAND, BOR, BXOR,
// for sums of bool and for PREMUL_SUM on a dtype that is not floating point.
Reduction reduction(const c10d::ReduceOp& op, const at::Tensor& t, int rank, int size, const std::string& name);
// Throws unless t is a defined, dense CPU tensor.
void check_tensor(const at::Tensor& t, int rank, int size, const std::string& op);
// Throws unless the list holds exactly one tensor (one device per process).
const at::Tensor& single(const std::vector<at::Tensor>& ts, int rank, int size, const std::string& op);
// Throws unless a and b have the same dtype (and, when same_numel, element count).
void check_same(const at::Tensor& a, const at::Tensor& b, bool same_numel, int rank, int size,
                const std::string& op, const std::string& what);

// A contiguous view of a tensor for DirectCCL: the tensor itself when it is
// contiguous, else a contiguous copy, written back by finish() for outputs.
class Dense {
 public:
  explicit Dense(const at::Tensor& t);
  void* data() const { return buf_.data_ptr(); }
  size_t bytes() const { return buf_.nbytes(); }
  size_t numel() const { return static_cast<size_t>(buf_.numel()); }
  const at::Tensor& tensor() const { return buf_; }
  void finish();  // copies the contiguous buffer back into a non-contiguous output

 private:
  at::Tensor orig_;
  at::Tensor buf_;
};

// ---- the process group (process_group.cc, exchange.cc) ----

class ProcessGroupDCCL : public c10d::ProcessGroup {
 public:
  // Rendezvous through `store` (rank 0 publishes a dcclUniqueId, the others read
  // it) and a DirectCCL communicator bounded by `timeout`.
  ProcessGroupDCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupDCCL() override;

  const std::string getBackendName() const override { return "dccl"; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Queues body on the worker; the returned Work completes when it has run.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const std::string& op, std::vector<at::Tensor> outputs,
                                         std::chrono::milliseconds timeout, std::function<void()> body);
  // On the worker: throws with DirectCCL's text for this thread unless r is dcclSuccess.
  void check(dcclResult_t r, const std::string& op) const;
  std::chrono::milliseconds bound(std::chrono::milliseconds opt) const;
  void check_peer(int peer, const std::string& op) const;
  // On the worker: check(call(op)) with r's DirectCCL op; for PREMUL_SUM a
  // PreMulSum op of the factor in dtype dt is made before and destroyed after.
  void reduce_with(const Reduction& r, dcclDataType_t dt, const std::string& op,
                   const std::function<dcclResult_t(dcclRedOp_t)>& call) const;
  // On the worker: one DirectCCL group of sends and receives (zero-byte ones
  // skipped); throws with the first failure's text after closing the group.
  struct Transfer {
    int peer;
    void* data;
    size_t bytes;
  };
  void exchange(const std::string& op, const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs) const;

  dcclComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace torch_dccl
