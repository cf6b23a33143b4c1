// The CUDA backend's logic over cuda::Api (cuda_api.hpp): allocations rounded to
// whole pages, streams and tickets (cuda_engine.hpp), dma-buf export of ranges
// that stay inside one allocation, registration keys by buffer id, pinned staging
// memory (or pageable, once refused), and refusal of memory on a GPU this process
// does not drive.
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
#include "mem/cuda/cuda_api.hpp"
#include "mem/cuda/cuda_engine.hpp"

namespace dccl::mem::cuda {
namespace {

std::string ptr_text(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(Api& api, int dev, std::string how) : api_(api), dev_(dev), how_(std::move(how)), engine_(api, dev) {
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
    engine_.sync_all();
    DeviceGuard g(api_, dev_);
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
    std::lock_guard<std::mutex> lk(pin_mu_);
    if (!pin_refused_.empty()) return false;
    try {
      DeviceGuard g(api_, dev_);
      api_.host_register(p, bytes);
    } catch (const std::exception& e) {
      pin_refused_ = e.what();
      DCCL_WARN("cuda: page-locking host memory was refused (%s); device<->host copies use pageable memory "
                "from now on (synchronous, slower), and page-locking is not tried again", e.what());
      return false;
    }
    return true;
  }

  std::string pin_refusal() const override {
    std::lock_guard<std::mutex> lk(pin_mu_);
    return pin_refused_;
  }

  void unpin_host(void* p) override {
    if (!p) return;
    DeviceGuard g(api_, dev_);
    api_.host_unregister(p);
  }

  Ticket copy_async(void* dst, const void* src, size_t bytes) override {
    return engine_.issue(lane(dst, src), "copy", bytes, [&](Api::Stream s) {
      if (bytes) api_.copy_async(dst, src, bytes, s);
    });
  }

  Ticket reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
                      dcclRedOp_t op) override {
    if (!core::dtype_valid(dt) || !core::op_valid(op))
      core::raise(dcclInvalidArgument, "cuda: reduce_async: invalid datatype or op");
    return engine_.issue(Lane::Main, "reduce", count,
                         [&](Api::Stream s) { api_.reduce_async(dst, a, b, count, dt, op, s); });
  }

  Ticket avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks) override {
    if (!core::dtype_valid(dt) || nranks < 1)
      core::raise(dcclInvalidArgument, "cuda: avg_async: invalid datatype or nranks");
    return engine_.issue(Lane::Main, "avg", count, [&](Api::Stream s) { api_.avg_async(buf, count, dt, nranks, s); });
  }

  Ticket memset_async(void* dst, int value, size_t bytes) override {
    return engine_.issue(Lane::Main, "memset", bytes, [&](Api::Stream s) {
      if (bytes) api_.memset_async(dst, value, bytes, s);
    });
  }

  void wait(Ticket t, int64_t timeout_ms) override { engine_.wait(t, timeout_ms); }
  bool done(Ticket t) override { return engine_.done(t); }

  double time_copies_us(const Copy* copies, int n, int64_t timeout_ms) override {
    std::vector<Lane> lanes;
    for (int i = 0; i < n; ++i) lanes.push_back(lane(copies[i].dst, copies[i].src));
    return engine_.time_copies_us(copies, lanes.data(), n, timeout_ms);
  }

  void flush_remote_writes() override {
    DeviceGuard g(api_, dev_);
    if (!api_.flush_rdma_writes() && !flush_warned_.exchange(true))
      DCCL_INFO("cuda: device %d cannot flush GPUDirect RDMA writes (cudaDeviceFlushGPUDirectRDMAWrites); "
                "received data is reduced relying on the device's own write ordering", dev_);
  }

  std::string direct_unfit(const void* p) const override {
    void* base = nullptr;
    size_t size = 0;
    if (!range_of(p, &base, &size)) return {};
    const uintptr_t b = reinterpret_cast<uintptr_t>(base);
    if (b % page_ == 0 && (b + size) % page_ == 0) return {};
    return "buffer " + ptr_text(p) + " lies in a device allocation [" + ptr_text(base) + ", +" + std::to_string(size) +
           ") that does not start and end on page boundaries, so its dma-buf (whole pages) would expose a "
           "neighbour's memory; allocate with dcclMemAlloc for peer-direct";
  }

  int sync_memops(const void* p) const override {
    PointerInfo info;
    if (!api_.pointer_info(p, &info)) return -1;
    return api_.sync_memops_set(p) ? 1 : 0;
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
  using ExportKey = std::tuple<uint64_t, uintptr_t, uintptr_t>;  // buffer id, start, end
  static constexpr size_t kMaxExports = 1024;

  uintptr_t round_up(uintptr_t v) const { return (v + page_ - 1) & ~(page_ - 1); }

  // Device->host and host->device copies each on their copy stream; the rest on the main one.
  Lane lane(const void* dst, const void* src) const {
    const bool dd = is_device(dst), sd = is_device(src);
    return dd == sd ? Lane::Main : dd ? Lane::In : Lane::Out;
  }
  bool is_device(const void* p) const { return range_of(p, nullptr, nullptr); }

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
  Engine engine_;
  std::string dmabuf_reason_;  // empty when dma-buf export is possible
  uintptr_t page_ = 4096;

  mutable std::mutex mu_;  // live_
  std::map<uintptr_t, Live> live_;
  mutable std::mutex pin_mu_;
  std::string pin_refused_;  // why page-locking was refused; "" while it works
  std::atomic<bool> flush_warned_{false};

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
