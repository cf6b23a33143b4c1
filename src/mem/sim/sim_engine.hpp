// The sim backend's copy engine: one thread that runs queued work in submission
// order on already-translated (shadow or host) pointers, like a DMA engine.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "dccl/dccl.h"
#include "mem/backend.hpp"

namespace dccl::mem {

struct SimWork {
  enum class Step : uint8_t { Copy, Reduce, Avg, Memset };
  Step op = Step::Copy;
  void* dst = nullptr;
  const void* a = nullptr;  // Copy: source
  const void* b = nullptr;
  size_t n = 0;             // Copy/Memset: bytes; Reduce/Avg: elements
  dcclDataType_t dt = dcclUint8;
  dcclRedOp_t op_red = dcclSum;
  int arg = 0;              // Memset: byte value; Avg: nranks
};

std::string describe(const SimWork& w);  // "copy of 4096 bytes", ...

class SimEngine {
 public:
  SimEngine();
  ~SimEngine();
  SimEngine(const SimEngine&) = delete;
  SimEngine& operator=(const SimEngine&) = delete;

  Ticket submit(const SimWork& w);
  // timeout_ms < 0 waits without bound. Throws core::Error: dcclTimeout naming the
  // ticket's work, dcclInvalidArgument for a ticket never issued, dcclInternalError
  // when work up to t failed.
  void wait(Ticket t, int64_t timeout_ms);
  bool done(Ticket t) const;
  void drain();  // waits for all work issued so far; reports no errors
  Ticket last_issued() const;

 private:
  struct Item {
    Ticket t;
    SimWork w;
  };
  void run();
  static void execute(const SimWork& w);

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Item> queue_;
  Item running_{};              // valid while busy_
  bool busy_ = false;
  bool stop_ = false;
  Ticket next_ = 1;
  std::atomic<Ticket> completed_{0};  // written under mu_, read lock-free by done()
  Ticket err_ticket_ = 0;        // first failed ticket, 0 when none
  std::string err_;
  std::thread thread_;
};

}  // namespace dccl::mem
