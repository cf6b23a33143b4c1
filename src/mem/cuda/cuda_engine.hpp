// The CUDA backend's streams and tickets over cuda::Api (no CUDA header, built
// everywhere, tested over the fake runtime).
//
// Three streams on the backend's device: the main stream (kernels, memsets,
// device-to-device copies) and one copy stream per direction (device->host "out",
// host->device "in"), so that a rank's copy-out and copy-in overlap. Ordering:
//   - work on a copy stream waits for everything issued before it on the main
//     stream (an event recorded there), e.g. the reduction that produced the data;
//   - work on the main stream waits for everything issued before it on both copy
//     streams;
//   - the two copy streams do not wait for each other.
// Every piece of work gets a ticket (an event recorded after it); done(t) is true
// once t and every earlier ticket are complete, on whichever stream.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "mem/backend.hpp"
#include "mem/cuda/cuda_api.hpp"

namespace dccl::mem::cuda {

// Makes device `dev` current for the scope and restores the caller's device. It
// calls cudaSetDevice even when `dev` is current already: on a thread that has
// made no CUDA call yet, cudaGetDevice answers 0 while no context is current, and
// the driver calls (export, pointer attributes) would then fail.
class DeviceGuard {
 public:
  DeviceGuard(Api& api, int dev);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  Api& api_;
  int prev_;
  bool restore_ = false;
};

enum class Lane { Main = 0, Out = 1, In = 2 };

class Engine {
 public:
  Engine(Api& api, int dev) : api_(api), dev_(dev) {}
  // Issues work on `lane` (fn queues it on the stream it is given) after the
  // ordering waits above; `what` and `n` name it in timeout messages.
  Ticket issue(Lane lane, const char* what, size_t n, const std::function<void(Api::Stream)>& fn);
  bool done(Ticket t);
  // Throws core::Error(dcclTimeout) after timeout_ms, naming the ticket's work.
  void wait(Ticket t, int64_t timeout_ms);
  // Every stream drained (before memory is freed).
  void sync_all();
  // Backend::time_copies_us: the copies start together (each on its lane) after an
  // event on the main stream and are timed with events to the last one's end.
  double time_copies_us(const Backend::Copy* copies, const Lane* lanes, int n, int64_t timeout_ms);

 private:
  struct Pending {
    Ticket t;
    Api::Event ev;
    const char* what;
    size_t n;
  };
  static constexpr int kLanes = 3;

  // mu_ held: the lane's stream, created at first use.
  Api::Stream stream(Lane lane);
  // mu_ held: stream s waits for ticket t's event unless t is complete already.
  void wait_ticket(Api::Stream s, Ticket t);
  // mu_ held: the ordering waits for new work on `lane`, issued on s.
  void order(Lane lane, Api::Stream s);
  // mu_ held: records a ticket's event on s.
  Ticket record(const char* what, size_t n, Api::Stream s);

  Api& api_;
  const int dev_;
  std::mutex mu_;  // everything below but completed_
  Api::Stream streams_[kLanes] = {nullptr, nullptr, nullptr};
  Ticket tail_[kLanes] = {0, 0, 0};     // the lane's last ticket
  Ticket joined_[kLanes] = {0, 0, 0};   // Main: the copy lane's ticket it waited for; copy lanes: Main's
  Ticket next_ = 1;
  std::atomic<Ticket> completed_{0};
  std::deque<Pending> pending_;
  std::vector<Api::Event> pool_;
};

}  // namespace dccl::mem::cuda
