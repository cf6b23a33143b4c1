// The CUDA backend's logic over cuda::Api (cuda_api.hpp): allocations rounded to
// whole pages, one private stream with tickets as events, dma-buf export of ranges
// that stay inside one allocation, registration keys by buffer id, pinned bounce
// memory, and refusal of memory on a GPU this process does not drive.
// It includes no CUDA header: tests run it over a fake Api on any machine.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/types.hpp"
#include "mem/cuda_api.hpp"

namespace dccl::mem::cuda {
namespace {

std::string ptr_text(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Makes the backend's device current for the scope, restoring the caller's.
class DeviceGuard {
 public:
  DeviceGuard(Api& api, int dev) : api_(api), prev_(api.current_device()) {
    if (prev_ != dev) {
      api_.set_device(dev);
      restore_ = prev_ >= 0;
    }
  }
  ~DeviceGuard() {
    if (!restore_) return;
    try {
      api_.set_device(prev_);
    } catch (...) {  // the caller's device could not be restored: nothing better to do here
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  Api& api_;
  int prev_;
  bool restore_ = false;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(Api& api, int dev, std::string how) : api_(api), dev_(dev), how_(std::move(how)) {
    // Nothing here creates a context: a process that only asks backend_of() about
    // host or sim pointers must not pay for one. The stream comes at first use.
    dmabuf_reason_ = api_.dmabuf_unsupported(dev_);
    page_ = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    DCCL_INFO("cuda: backend on device %d (%s), dma-buf %s", dev_, how_.c_str(),
              dmabuf_reason_.empty() ? "supported" : dmabuf_reason_.c_str());
  }

  Kind kind() const override { return Kind::Cuda; }
  const char* name() const override { return "cuda"; }
  int device() const override { return dev_; }

  // Whole pages, page-aligned: every page-rounded range inside the allocation lies
  // inside what cudaMalloc returned, so an export never reaches a neighbour's memory.
  void* alloc(size_t bytes) override {
    if (bytes == 0) core::raise(dcclInvalidArgument, "cuda: alloc of 0 bytes");
    const size_t size = round_up(bytes);
    if (size < bytes) core::raise(dcclInvalidArgument, "cuda: alloc of " + std::to_string(bytes) + " bytes");
    DeviceGuard g(api_, dev_);
    void* raw = api_.malloc(size);
    uintptr_t at = reinterpret_cast<uintptr_t>(raw);
    if (at % page_) {  // cudaMalloc promises 256 bytes: ask for a page more and align
      api_.free(raw);
      raw = api_.malloc(size + page_);
      at = round_up(reinterpret_cast<uintptr_t>(raw));
    }
    std::lock_guard<std::mutex> lk(mu_);
    live_[at] = Live{raw, size};
    return reinterpret_cast<void*>(at);
  }

  void free(void* p) override {
    if (!p) return;
    Live a;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = live_.find(reinterpret_cast<uintptr_t>(p));
      if (it == live_.end())
        core::raise(dcclInvalidArgument,
                    "cuda: free of " + ptr_text(p) + ", which is not an allocation base of this backend");
      a = it->second;
      live_.erase(it);
    }
    DeviceGuard g(api_, dev_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stream_) api_.stream_sync(stream_);
    }
    notify_free(Kind::Cuda, p, a.size);
    close_exports(buffer_id(p));
    api_.free(a.raw);
  }

  bool owns(const void* p, size_t len) const override {
    void* base = nullptr;
    size_t size = 0;
    if (!range_of(p, &base, &size)) return false;
    return len <= size - static_cast<size_t>(static_cast<const char*>(p) - static_cast<char*>(base));
  }

  // Device memory of any GPU: memory on another GPU is this backend's to refuse
  // (unusable_reason), not host memory to read.
  bool range_of(const void* p, void** base, size_t* size) const override {
    const uintptr_t u = reinterpret_cast<uintptr_t>(p);
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = live_.upper_bound(u);
      if (it != live_.begin() && u < std::prev(it)->first + std::prev(it)->second.size) {
        --it;
        if (base) *base = reinterpret_cast<void*>(it->first);
        if (size) *size = it->second.size;
        return true;
      }
    }
    PointerInfo info;
    if (!api_.pointer_info(p, &info) || info.size == 0) return false;
    if (base) *base = reinterpret_cast<void*>(info.base);
    if (size) *size = info.size;
    return true;
  }

  std::string unusable_reason(const void* p) const override {
    PointerInfo info;
    if (!api_.pointer_info(p, &info) || info.ordinal == dev_) return {};
    return "buffer " + ptr_text(p) + " is on GPU " + std::to_string(info.ordinal) + ", but this process drives GPU " +
           std::to_string(dev_) + " (" + how_ + "); pass memory of GPU " + std::to_string(dev_);
  }

  uint64_t buffer_id(const void* p) const override {
    PointerInfo info;
    return api_.pointer_info(p, &info) ? info.buffer_id : 0;
  }

  bool pin_host(void* p, size_t bytes) override {
    if (!p || !bytes) return false;
    DeviceGuard g(api_, dev_);
    api_.host_register(p, bytes);
    return true;
  }

  void unpin_host(void* p) override {
    if (!p) return;
    DeviceGuard g(api_, dev_);
    api_.host_unregister(p);
  }

  Ticket copy_async(void* dst, const void* src, size_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(api_, dev_);
    if (bytes) api_.copy_async(dst, src, bytes, stream());
    return record("copy", bytes);
  }

  Ticket reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
                      dcclRedOp_t op) override {
    if (!core::dtype_valid(dt) || !core::op_valid(op))
      core::raise(dcclInvalidArgument, "cuda: reduce_async: invalid datatype or op");
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(api_, dev_);
    api_.reduce_async(dst, a, b, count, dt, op, stream());
    return record("reduce", count);
  }

  Ticket avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks) override {
    if (!core::dtype_valid(dt) || nranks < 1)
      core::raise(dcclInvalidArgument, "cuda: avg_async: invalid datatype or nranks");
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(api_, dev_);
    api_.avg_async(buf, count, dt, nranks, stream());
    return record("avg", count);
  }

  Ticket memset_async(void* dst, int value, size_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(api_, dev_);
    if (bytes) api_.memset_async(dst, value, bytes, stream());
    return record("memset", bytes);
  }

  void wait(Ticket t, int64_t timeout_ms) override {
    auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      if (done(t)) return;
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start).count();
      if (timeout_ms >= 0 && waited >= timeout_ms) {
        std::lock_guard<std::mutex> lk(mu_);
        std::string what = "cuda: ticket " + std::to_string(t);
        for (const Pending& p : pending_)
          if (p.t == t) what += " (" + std::string(p.what) + " of " + std::to_string(p.n) + ")";
        core::raise(dcclTimeout, what + " not done after " + std::to_string(timeout_ms) + " ms; " +
                                     std::to_string(pending_.size()) + " pending on device " + std::to_string(dev_));
      }
      if (spins < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(spins < 1024 ? 10 : 100));
    }
  }

  bool done(Ticket t) override {
    if (completed_.load(std::memory_order_acquire) >= t) return true;
    std::lock_guard<std::mutex> lk(mu_);
    if (t >= next_) core::raise(dcclInvalidArgument, "cuda: ticket " + std::to_string(t) + " was never issued");
    while (!pending_.empty()) {
      const Pending& front = pending_.front();
      bool finished = false;
      try {
        finished = api_.event_done(front.ev);
      } catch (const core::Error& e) {
        core::raise(e.code(), std::string(e.what()) + " (ticket " + std::to_string(front.t) + ": " + front.what + ")");
      }
      if (!finished) break;
      completed_.store(front.t, std::memory_order_release);
      pool_.push_back(front.ev);
      pending_.pop_front();
    }
    return completed_.load(std::memory_order_acquire) >= t;
  }

  DmaBuf export_dmabuf(const void* p, size_t len) override {
    if (!dmabuf_reason_.empty()) core::raise(dcclUnavailable, dmabuf_reason_);
    void* base = nullptr;
    size_t size = 0;
    if (len == 0 || !range_of(p, &base, &size) || !owns(p, len))
      core::raise(dcclInvalidArgument, "cuda: export_dmabuf: [" + ptr_text(p) + ", +" + std::to_string(len) +
                                           ") is not inside one device allocation");
    const uintptr_t u = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base);
    const uintptr_t start = u & ~(page_ - 1), end = round_up(u + len);
    if (start < b || end > b + size)
      core::raise(dcclUnavailable, "cuda: export_dmabuf: the pages of [" + ptr_text(p) + ", +" + std::to_string(len) +
                                       ") reach outside its allocation [" + ptr_text(base) + ", +" +
                                       std::to_string(size) + "); allocate with dcclMemAlloc (whole pages)");
    const uint64_t id = buffer_id(p);
    std::lock_guard<std::mutex> lk(export_mu_);
    auto key = std::make_tuple(id, start, end);
    auto it = exports_.find(key);
    int fd = -1;
    if (it != exports_.end()) {
      fd = it->second;
    } else {
      DeviceGuard g(api_, dev_);
      if (synced_.insert(id).second) api_.set_sync_memops(base);
      fd = api_.export_dmabuf(start, end - start);
      exports_.emplace(key, fd);
      order_.push_back(key);
      // Bound the fds kept for memory this backend did not allocate (it never
      // learns when such memory is freed); a registration holds its own reference.
      while (order_.size() > kMaxExports) {
        auto old = exports_.find(order_.front());
        if (old != exports_.end()) {
          close(old->second);
          exports_.erase(old);
        }
        order_.pop_front();
      }
    }
    DmaBuf d;
    d.fd = fd;
    d.offset = u - start;
    d.len = len;
    return d;
  }

 private:
  struct Live {
    void* raw = nullptr;  // what the runtime returned (freed with it)
    size_t size = 0;      // whole pages from the aligned base
  };
  struct Pending {
    Ticket t;
    Api::Event ev;
    const char* what;
    size_t n;
  };
  using ExportKey = std::tuple<uint64_t, uintptr_t, uintptr_t>;  // buffer id, start, end
  static constexpr size_t kMaxExports = 1024;

  uintptr_t round_up(uintptr_t v) const { return (v + page_ - 1) & ~(page_ - 1); }

  // mu_ held: the private stream, created at first use on the backend's device.
  Api::Stream stream() {
    if (!stream_) stream_ = api_.stream_create();
    return stream_;
  }

  // mu_ held.
  Ticket record(const char* what, size_t n) {
    Api::Event ev;
    if (!pool_.empty()) {
      ev = pool_.back();
      pool_.pop_back();
    } else {
      ev = api_.event_create();
    }
    try {
      api_.event_record(ev, stream());
    } catch (...) {
      pool_.push_back(ev);
      throw;
    }
    Ticket t = next_++;
    pending_.push_back(Pending{t, ev, what, n});
    return t;
  }

  void close_exports(uint64_t id) {
    std::lock_guard<std::mutex> lk(export_mu_);
    synced_.erase(id);
    for (auto it = exports_.lower_bound(ExportKey{id, 0, 0}); it != exports_.end() && std::get<0>(it->first) == id;) {
      close(it->second);
      it = exports_.erase(it);
    }
  }

  Api& api_;
  const int dev_;
  const std::string how_;
  Api::Stream stream_ = nullptr;
  std::string dmabuf_reason_;  // empty when dma-buf export is possible
  uintptr_t page_ = 4096;

  mutable std::mutex mu_;  // live_, stream_, tickets
  std::map<uintptr_t, Live> live_;
  Ticket next_ = 1;
  std::atomic<Ticket> completed_{0};
  std::deque<Pending> pending_;
  std::vector<Api::Event> pool_;

  std::mutex export_mu_;  // exports_, order_, synced_
  std::map<ExportKey, int> exports_;
  std::deque<ExportKey> order_;
  std::set<uint64_t> synced_;  // buffer ids with SYNC_MEMOPS set
};

}  // namespace

std::unique_ptr<Backend> make_backend(Api& api, int dev, const std::string& how) {
  return std::make_unique<CudaBackend>(api, dev, how);
}

}  // namespace dccl::mem::cuda
