// Stream ordering of CUDA work, as NCCL's backend orders it, behind a seam.
//
// A collective on CUDA tensors must run after the work already queued on the
// caller's current stream, and the work queued on that stream after Work.wait()
// must run after the collective, without the caller's thread waiting. DirectCCL
// runs the collective on the group's worker thread with host-blocking calls, so:
//   before()  (caller's thread, at the call) records a start event on the current
//             stream, and queues on the group's side stream a wait for a host
//             flag to reach the ticket's number, then an end event;
//   run()     (worker) waits for the start event (bounded by the deadline), runs
//             the collective, then sets the flag: the side stream passes its wait
//             and records the end event; the flag is set on failure too;
//   consumer_wait() (Work.wait(), caller's thread) makes the current stream wait
//             for the end event: a queued wait, no host synchronization.
// GpuOps is the seam: CUDA's runtime in cuda_runtime.cc, a simulated GPU in the
// unit test (tests/torch/cuda_order_test.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace torch_dccl {

class GpuOps {
 public:
  using Stream = void*;
  using Event = void*;
  virtual ~GpuOps() = default;

  virtual Event create_event() = 0;
  virtual void destroy_event(Event e) = 0;
  virtual void record(Event e, Stream s) = 0;
  // True when the work before the event's record has run.
  virtual bool query(Event e) = 0;
  virtual void stream_wait_event(Stream s, Event e) = 0;
  // A stream of the ordering's own, not synchronizing with other streams.
  virtual Stream create_side_stream() = 0;
  virtual void destroy_side_stream(Stream s) = 0;
  // A 32-bit word the host writes and the GPU reads (host memory mapped for the
  // device); the stream waits until the word, compared as (int32)(word - value),
  // is >= 0.
  virtual volatile uint32_t* alloc_flag() = 0;
  virtual void free_flag(volatile uint32_t* flag) = 0;
  virtual void stream_wait_flag(Stream s, volatile uint32_t* flag, uint32_t value) = 0;
  // Runs body on the worker thread with the device's work stream current, then
  // waits (on this thread) for what body queued there.
  virtual void run_on_work_stream(const std::function<void()>& body) = 0;
};

// One operation's place in the order; destroying it frees its events.
struct Ticket {
  Ticket(GpuOps* ops, uint32_t seq) : ops(ops), seq(seq) {}
  ~Ticket();
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;

  GpuOps* ops;
  uint32_t seq;
  GpuOps::Event start = nullptr;
  GpuOps::Event end = nullptr;
};

// The ordering of one group on one device. before() must be called in the
// order run() will be: the group calls it and posts the job under one lock.
class CudaOrder {
 public:
  explicit CudaOrder(std::unique_ptr<GpuOps> ops);
  ~CudaOrder();  // releases every ticket issued (nothing waits forever on the flag)
  CudaOrder(const CudaOrder&) = delete;
  CudaOrder& operator=(const CudaOrder&) = delete;

  // With gate, also the side stream's wait for the flag and the end event that
  // consumer_wait() uses; without, only the start event (Work.wait() then waits
  // on the host).
  std::shared_ptr<Ticket> before(GpuOps::Stream current, bool gate = true);
  // False when the start event has not completed by the deadline (body is then
  // not run); rethrows what body throws. The flag reaches the ticket's number on
  // every path.
  bool run(const Ticket& t, std::chrono::steady_clock::time_point deadline, const std::function<void()>& body);
  static void consumer_wait(const Ticket& t, GpuOps::Stream current);
  // Lets the side stream pass every ticket issued so far (abort, shutdown);
  // GpuOps::destroy_side_stream waits for the side stream.
  void release_all();
  uint32_t issued() const { return issued_; }
  GpuOps& ops() { return *ops_; }

 private:
  void release(uint32_t seq);

  std::unique_ptr<GpuOps> ops_;
  GpuOps::Stream side_ = nullptr;
  volatile uint32_t* flag_ = nullptr;
  std::atomic<uint32_t> issued_{0};
  std::mutex release_mu_;
};

}  // namespace torch_dccl
