// ProcessGroupDCCL: DirectCCL as a c10d::Backend of PyTorch 2.x.
//
// Every call checks its arguments on the caller's thread, then queues a job on
// the group's one worker thread and returns a WorkDCCL at once. The worker runs
// the jobs in submission order with DirectCCL's blocking calls (stream NULL),
// each bounded by the communicator's timeout, and completes the job's Work (and
// its Future) with the outputs or with the error text. Before each collective
// the ranks compare what they were called with (operation, dtype, element
// count, root, reduction; TORCH_DCCL_CHECK=0 turns it off), so that mismatched
// calls fail on every rank with a text naming the ranks that differ.
// CUDA tensors: the collective runs after the work queued on the caller's
// current stream (cuda_order.hpp). Work.wait() waits on the host for it, or,
// with TORCH_DCCL_STREAM_WAIT=1, makes the current stream wait (docs/pytorch.md:
// that mode hung on a GPU and is not for use yet).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <dccl/dccl.h>

#include "cuda_order.hpp"
#include "tensors.hpp"
#include "work.hpp"

namespace torch_dccl {

// CUDA builds (cuda_runtime.cc): the current stream of a device, and the GpuOps
// of CUDA's runtime for one device.
GpuOps::Stream current_cuda_stream(int device);
std::unique_ptr<GpuOps> make_cuda_ops(int device);
// Waits for the copies the worker queued on the current (work) stream before a
// DirectCCL call reads what they wrote; nothing for CPU tensors.
void settle(const Place& p);
// On the worker, once per group and device before any CUDA operation is ordered:
// one DirectCCL all_reduce of device memory, so that DirectCCL's first-use setup
// for device memory (allocations, registrations; some of CUDA's calls for these
// wait for the whole device) is done before a side stream waits on a flag.
dcclResult_t cuda_warm_up(dcclComm_t comm, int device);

class ProcessGroupDCCL : public c10d::Backend {
 public:
  // Rendezvous through `store` (rank 0 publishes a dcclUniqueId, the others read
  // it) and a DirectCCL communicator bounded by `timeout`.
  ProcessGroupDCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  // A group over a communicator made by dcclCommSplit (split()).
  ProcessGroupDCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, dcclComm_t comm);
  ~ProcessGroupDCCL() override;

  const std::string getBackendName() const override { return "dccl"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  std::chrono::milliseconds timeout() const { return timeout_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // Between these, send and recv are collected and run as one DirectCCL group
  // (batch_isend_irecv); the Work of endCoalescing completes them all.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void abort() override;
  void shutdown() override;
  c10d::ErrorType getError() override;

 private:
  // What every rank must agree on for a collective.
  struct Call {
    c10d::OpType type;
    at::ScalarType dtype;
    int64_t count;
    int64_t root = -1;
    int redop = -1;
  };
  struct Transfer {
    int peer;
    void* data;
    size_t bytes;
  };

  // Queues body on the worker; the returned Work completes when it has run.
  // With `call`, the ranks' agreement check runs first; with a CUDA place, the
  // job is ordered with the device's current stream.
  c10::intrusive_ptr<WorkDCCL> enqueue(c10d::OpType type, const std::string& op, std::vector<at::Tensor> outputs,
                                       std::chrono::milliseconds timeout, const Place& place,
                                       std::optional<Call> call, std::function<void()> body);
  // On the worker: throws with DirectCCL's text for this thread unless r is dcclSuccess.
  void check(dcclResult_t r, const std::string& op) const;
  std::chrono::milliseconds bound(std::chrono::milliseconds opt) const;
  void check_peer(int64_t peer, const std::string& op) const;
  void usable(const std::string& op) const;  // throws once aborted or shut down
  // On the worker: every rank's Call, compared; throws naming the ranks that differ.
  void agree(const std::string& op, uint64_t seq, const Call& c) const;
  // On the worker: check(call(op)) with r's DirectCCL op; for PREMUL_SUM a
  // PreMulSum op of the factor in dtype dt is made before and destroyed after.
  void reduce_with(const Reduction& r, dcclDataType_t dt, const std::string& op,
                   const std::function<dcclResult_t(dcclRedOp_t)>& call) const;
  // On the worker: one DirectCCL group of sends and receives (zero-byte ones
  // skipped); throws with the first failure's text after closing the group.
  void exchange(const std::string& op, const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs) const;
  void run_batch(const std::string& op, const std::vector<std::pair<at::Tensor, int>>& sends,
                 const std::vector<std::pair<at::Tensor, int>>& recvs);
  CudaOrder& order_for(int device);
  // exchange.cc: the store's parts.
  void number_keys();  // keys_ for this group (exchange.cc)
  void rendezvous(const c10::intrusive_ptr<c10d::Store>& store, dcclUniqueId* id);
  void announce_send(int dst);          // on the worker, before a send: for recvAnysource
  int take_any_source(const std::string& op, std::chrono::milliseconds timeout);  // on the worker
  void note_received(int src);          // on the worker, after a recv from src

  c10::intrusive_ptr<c10d::Store> store_;
  dcclComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  const bool check_calls_;   // TORCH_DCCL_CHECK (default on)
  const bool any_source_;    // TORCH_DCCL_ANY_SOURCE (default on): sends announce themselves in the store
  const bool stream_wait_;   // TORCH_DCCL_STREAM_WAIT (default off): Work.wait() of CUDA work is a stream wait
  std::mutex enqueue_mu_;    // numbers, tickets and posts in one order
  uint64_t coll_seq_ = 0;    // collectives queued: the agreement check's number
  uint64_t seq_base_ = 0;    // setSequenceNumberForGroup's agreed start
  std::atomic<bool> aborted_{false};
  std::atomic<bool> shut_{false};
  std::atomic<bool> failed_{false};
  std::string keys_;        // "torch_dccl/<n>/": every store key of this group (number_keys, split)
  uint64_t splits_ = 0;     // groups split from this one
  uint64_t monitored_ = 0;  // monitoredBarrier calls, for their store keys
  // recvAnysource's view of the announcements (worker thread only).
  int64_t announcements_seen_ = 0;
  std::vector<int64_t> taken_, seen_;
  // Coalescing (batch_isend_irecv).
  bool coalescing_ = false;
  std::vector<std::pair<at::Tensor, int>> batch_sends_, batch_recvs_;
  std::vector<c10::intrusive_ptr<WorkDCCL>> batch_works_;
  Place batch_place_;
  std::map<int, std::unique_ptr<CudaOrder>> orders_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace torch_dccl
