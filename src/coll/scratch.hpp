// Scratch memory for collectives, per communicator and memory backend. Grows to the
// largest operation seen and is then reused: no allocation in steady state. When
// kWindow operations in a row used less than half of it, it is returned (device
// memory too) and the next operation allocates what those needed.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dccl::mem {
class Backend;
}

namespace dccl::coll {

class ScratchPool {
 public:
  explicit ScratchPool(mem::Backend& backend) : backend_(backend) {}
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // Bump allocation (64-byte aligned) valid until reset().
  void* take(size_t bytes);
  // Ends an operation; merges blocks so the next operation of that size needs one.
  void reset();
  // Read from other threads (counters), written by the pool's.
  uint64_t allocations() const { return allocations_.load(std::memory_order_relaxed); }
  size_t held_bytes() const;  // allocated now
  static constexpr int kWindow = 16;
  mem::Backend& backend() { return backend_; }

 private:
  struct Block {
    void* base;
    size_t size;
  };
  mem::Backend& backend_;
  std::vector<Block> blocks_;
  size_t used_ = 0;     // bytes used in blocks_.back()
  size_t total_ = 0;    // bytes taken this operation
  size_t peak_ = 0;
  size_t recent_ = 0;   // most bytes one operation took in the current window
  int window_ops_ = 0;  // operations in the current window
  std::atomic<uint64_t> allocations_{0};
};

}  // namespace dccl::coll
