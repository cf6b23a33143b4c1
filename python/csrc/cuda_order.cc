// CudaOrder: tickets, the worker's side of the order, and the consumer's wait.
#include "cuda_order.hpp"

#include <atomic>
#include <thread>

namespace torch_dccl {

Ticket::~Ticket() {
  if (start) ops->destroy_event(start);
  if (end) ops->destroy_event(end);
}

CudaOrder::CudaOrder(std::unique_ptr<GpuOps> ops) : ops_(std::move(ops)) {
  side_ = ops_->create_side_stream();
  flag_ = ops_->alloc_flag();
  *flag_ = 0;
}

CudaOrder::~CudaOrder() {
  release_all();
  // Every wait queued on the side stream can now pass: destroy_side_stream lets
  // them (it waits for the stream) before the flag they read is freed.
  ops_->destroy_side_stream(side_);
  ops_->free_flag(flag_);
}

std::shared_ptr<Ticket> CudaOrder::before(GpuOps::Stream current, bool gate) {
  auto t = std::make_shared<Ticket>(ops_.get(), ++issued_);
  t->start = ops_->create_event();
  ops_->record(t->start, current);
  if (gate) {
    t->end = ops_->create_event();
    ops_->stream_wait_flag(side_, flag_, t->seq);
    ops_->record(t->end, side_);
  }
  return t;
}

void CudaOrder::release(uint32_t seq) {
  std::lock_guard<std::mutex> lk(release_mu_);
  // Only forward (the word is compared modulo 2^32).
  if (static_cast<int32_t>(seq - *flag_) > 0) {
    std::atomic_thread_fence(std::memory_order_release);
    *flag_ = seq;
  }
}

void CudaOrder::release_all() { release(issued_); }

bool CudaOrder::run(const Ticket& t, std::chrono::steady_clock::time_point deadline,
                    const std::function<void()>& body) {
  struct Release {
    CudaOrder* o;
    uint32_t seq;
    ~Release() { o->release(seq); }
  } release_on_exit{this, t.seq};
  // Polls with a short sleep: this is the worker's thread, not the caller's.
  auto pause = std::chrono::microseconds(2);
  while (!ops_->query(t.start)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::microseconds(500)) pause *= 2;
  }
  ops_->run_on_work_stream(body);
  return true;
}

void CudaOrder::consumer_wait(const Ticket& t, GpuOps::Stream current) { t.ops->stream_wait_event(current, t.end); }

}  // namespace torch_dccl
