#include "coll/scratch.hpp"

#include "mem/backend.hpp"

namespace dccl::coll {

namespace {
// Blocks are allocated in whole pages.
size_t whole_pages(size_t bytes) { return (bytes + 4095) & ~size_t{4095}; }
}  // namespace

ScratchPool::~ScratchPool() {
  for (auto& b : blocks_) backend_.free(b.base);
}

void* ScratchPool::take(size_t bytes) {
  size_t need = (bytes + 63) & ~size_t{63};
  if (need == 0) need = 64;
  total_ += need;
  if (blocks_.empty() || used_ + need > blocks_.back().size) {
    size_t size = need > peak_ ? need : peak_;
    size = whole_pages(size);
    blocks_.push_back({backend_.alloc(size), size});
    allocations_.fetch_add(1, std::memory_order_relaxed);
    used_ = 0;
  }
  void* p = static_cast<char*>(blocks_.back().base) + used_;
  used_ += need;
  return p;
}

size_t ScratchPool::held_bytes() const {
  size_t b = 0;
  for (const Block& k : blocks_) b += k.size;
  return b;
}

void ScratchPool::reset() {
  if (total_ > peak_) peak_ = total_;
  if (total_ > recent_) recent_ = total_;
  if (blocks_.size() > 1) {
    // Several blocks were needed: replace them by one of the peak size.
    for (auto& b : blocks_) backend_.free(b.base);
    blocks_.clear();
    size_t size = whole_pages(peak_);
    blocks_.push_back({backend_.alloc(size), size});
    allocations_.fetch_add(1, std::memory_order_relaxed);
  }
  if (++window_ops_ == kWindow) {
    // A transient large operation does not keep its memory for good. Compared in
    // whole pages, as blocks are allocated: a window of 8-byte operations keeps
    // its one-page block (no allocation every window), an idle window returns it.
    if (blocks_.size() == 1 && whole_pages(recent_) * 2 < blocks_.back().size) {
      backend_.free(blocks_.back().base);
      blocks_.clear();
      peak_ = recent_;
    }
    window_ops_ = 0;
    recent_ = 0;
  }
  used_ = 0;
  total_ = 0;
}

}  // namespace dccl::coll
