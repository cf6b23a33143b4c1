// A communicator's failure, set once: the first set() wins and records the code and
// the text; waits poll raised() (an acquire load) and then read both.
#pragma once
#include <atomic>
#include <mutex>
#include <string>

#include "dccl/dccl.h"

namespace dccl::core {

class FailFlag {
 public:
  // True when this call set it (false: it was set already, the first cause stays).
  bool set(dcclResult_t code, const std::string& text) {
    std::lock_guard<std::mutex> lk(mu_);
    if (raised_.load(std::memory_order_relaxed)) return false;
    text_ = text;
    code_ = code;
    raised_.store(true, std::memory_order_release);
    return true;
  }
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  // Only once raised(): written before it, never after.
  dcclResult_t code() const { return code_; }
  const std::string& text() const { return text_; }

 private:
  std::mutex mu_;
  std::atomic<bool> raised_{false};
  std::string text_;
  dcclResult_t code_ = dcclRemoteError;
};

}  // namespace dccl::core
