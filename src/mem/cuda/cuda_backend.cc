// The CUDA backend: cudaMalloc'd memory, a private stream per backend, tickets
// as events recorded on it, reduction kernels (cuda_kernels.cu) and dma-buf
// export through cuMemGetHandleForAddressRange.
//
// The driver API is reached through cudaGetDriverEntryPointByVersion rather than
// by linking libcuda, so libdccl loads (and reports "no device") on machines that
// have the toolkit but no driver.
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"
#include "mem/cuda/cuda_kernels.hpp"

namespace dccl::mem {
namespace {

using PFN_PointerGetAttributes = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
using PFN_GetHandle = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType,
                                   unsigned long long);
using PFN_DeviceGetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
using PFN_DeviceGet = CUresult (*)(CUdevice*, int);
using PFN_PointerGetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
using PFN_GetErrorName = CUresult (*)(CUresult, const char**);

struct Driver {
  PFN_PointerGetAttributes pointer_get_attributes = nullptr;
  PFN_GetHandle get_handle = nullptr;
  PFN_DeviceGetAttribute device_get_attribute = nullptr;
  PFN_DeviceGet device_get = nullptr;
  PFN_PointerGetAttribute pointer_get_attribute = nullptr;
  PFN_GetErrorName get_error_name = nullptr;
};

template <typename F>
bool load(const char* sym, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(sym, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || !p) {
    cudaGetLastError();
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

std::string ptr_text(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

[[noreturn]] void raise_cuda(cudaError_t e, const std::string& what) {
  cudaGetLastError();  // clear a non-sticky error
  core::raise(e == cudaErrorMemoryAllocation ? dcclSystemError : dcclUnhandledDeviceError,
              "cuda: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) raise_cuda(e, what);
}

// Makes the backend's device current for the scope, restoring the caller's.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != dev) {
      check(cudaSetDevice(dev), "cudaSetDevice");
      restore_ = true;
    }
  }
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(prev_);
  }

 private:
  int prev_ = 0;
  bool restore_ = false;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int dev) : dev_(dev) {
    // Nothing here creates a context: a process that only asks backend_of() about
    // host or sim pointers must not pay for one. The stream comes at first use.
    bool ok = load("cuPointerGetAttributes", &drv_.pointer_get_attributes) &&
              load("cuDeviceGet", &drv_.device_get) &&
              load("cuDeviceGetAttribute", &drv_.device_get_attribute) &&
              load("cuPointerGetAttribute", &drv_.pointer_get_attribute) &&
              load("cuGetErrorName", &drv_.get_error_name);
    if (!ok) core::raise(dcclUnavailable, "cuda: driver entry points not found");
    if (!load("cuMemGetHandleForAddressRange", &drv_.get_handle)) {
      dmabuf_reason_ = "cuda: the driver has no cuMemGetHandleForAddressRange (dma-buf needs CUDA 11.7+)";
    } else {
      CUdevice cu = 0;
      int supported = 0;
      CUresult r = drv_.device_get(&cu, dev_);
      if (r == CUDA_SUCCESS)
        r = drv_.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, cu);
      if (r != CUDA_SUCCESS)
        dmabuf_reason_ = "cuda: querying CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED failed: " + cu_name(r);
      else if (!supported)
        dmabuf_reason_ = "cuda: device " + std::to_string(dev_) +
                         " reports no dma-buf support (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED=0; "
                         "needs the open kernel modules and a dma-buf capable kernel)";
    }
    page_ = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    DCCL_INFO("cuda: backend on device %d, dma-buf %s", dev_,
              dmabuf_reason_.empty() ? "supported" : dmabuf_reason_.c_str());
  }

  Kind kind() const override { return Kind::Cuda; }
  const char* name() const override { return "cuda"; }

  void* alloc(size_t bytes) override {
    if (bytes == 0) core::raise(dcclInvalidArgument, "cuda: alloc of 0 bytes");
    DeviceGuard g(dev_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) raise_cuda(e, "cudaMalloc of " + std::to_string(bytes) + " bytes");
    std::lock_guard<std::mutex> lk(mu_);
    live_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }

  void free(void* p) override {
    if (!p) return;
    size_t size;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = live_.find(reinterpret_cast<uintptr_t>(p));
      if (it == live_.end())
        core::raise(dcclInvalidArgument,
                    "cuda: free of " + ptr_text(p) + ", which is not an allocation base of this backend");
      size = it->second;
      live_.erase(it);
    }
    DeviceGuard g(dev_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stream_) check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize before free");
    }
    notify_free(Kind::Cuda, p, size);
    close_exports(buffer_id(p));
    check(cudaFree(p), "cudaFree");
  }

  bool owns(const void* p, size_t len) const override {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!device_range(p, &base, &size)) return false;
    return len <= base + size - reinterpret_cast<CUdeviceptr>(p);
  }

  bool range_of(const void* p, void** base, size_t* size) const override {
    CUdeviceptr b = 0;
    size_t s = 0;
    if (!device_range(p, &b, &s)) return false;
    if (base) *base = reinterpret_cast<void*>(b);
    if (size) *size = s;
    return true;
  }

  Ticket copy_async(void* dst, const void* src, size_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(dev_);
    if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()), "cudaMemcpyAsync");
    return record("copy", bytes);
  }

  Ticket reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
                      dcclRedOp_t op) override {
    if (!core::dtype_valid(dt) || !core::op_valid(op))
      core::raise(dcclInvalidArgument, "cuda: reduce_async: invalid datatype or op");
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(dev_);
    check(cuda::launch_reduce(dst, a, b, count, dt, op, stream()), "reduce kernel launch");
    return record("reduce", count);
  }

  Ticket avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks) override {
    if (!core::dtype_valid(dt) || nranks < 1)
      core::raise(dcclInvalidArgument, "cuda: avg_async: invalid datatype or nranks");
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(dev_);
    check(cuda::launch_avg(buf, count, dt, nranks, stream()), "avg kernel launch");
    return record("avg", count);
  }

  Ticket memset_async(void* dst, int value, size_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    DeviceGuard g(dev_);
    if (bytes) check(cudaMemsetAsync(dst, value, bytes, stream()), "cudaMemsetAsync");
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
                                     std::to_string(pending_.size()) + " pending on device " +
                                     std::to_string(dev_));
      }
      if (spins < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(spins < 1024 ? 10 : 100));
    }
  }

  bool done(Ticket t) override {
    if (completed_.load(std::memory_order_acquire) >= t) return true;
    std::lock_guard<std::mutex> lk(mu_);
    if (t >= next_)
      core::raise(dcclInvalidArgument, "cuda: ticket " + std::to_string(t) + " was never issued");
    while (!pending_.empty()) {
      cudaError_t e = cudaEventQuery(pending_.front().ev);
      if (e == cudaErrorNotReady) break;
      if (e != cudaSuccess)
        raise_cuda(e, "ticket " + std::to_string(pending_.front().t) + " (" + pending_.front().what + ")");
      completed_.store(pending_.front().t, std::memory_order_release);
      pool_.push_back(pending_.front().ev);
      pending_.pop_front();
    }
    return completed_.load(std::memory_order_acquire) >= t;
  }

  DmaBuf export_dmabuf(const void* p, size_t len) override {
    if (!dmabuf_reason_.empty()) core::raise(dcclUnavailable, dmabuf_reason_);
    if (len == 0 || !owns(p, len))
      core::raise(dcclInvalidArgument, "cuda: export_dmabuf: [" + ptr_text(p) + ", +" +
                                           std::to_string(len) + ") is not inside one device allocation");
    const uintptr_t u = reinterpret_cast<uintptr_t>(p);
    const uintptr_t start = u & ~(page_ - 1);
    const uintptr_t end = (u + len + page_ - 1) & ~(page_ - 1);
    const uint64_t id = buffer_id(p);
    std::lock_guard<std::mutex> lk(export_mu_);
    auto key = std::make_tuple(id, start, end);
    auto it = exports_.find(key);
    int fd = -1;
    if (it != exports_.end()) {
      fd = it->second;
    } else {
      DeviceGuard g(dev_);
      CUresult r = drv_.get_handle(&fd, static_cast<CUdeviceptr>(start), end - start,
                                   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      if (r != CUDA_SUCCESS || fd < 0)
        core::raise(dcclUnavailable, "cuda: cuMemGetHandleForAddressRange(" +
                                         ptr_text(reinterpret_cast<void*>(start)) + ", " +
                                         std::to_string(end - start) + ") failed: " + cu_name(r));
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
  struct Pending {
    Ticket t;
    cudaEvent_t ev;
    const char* what;
    size_t n;
  };
  using ExportKey = std::tuple<uint64_t, uintptr_t, uintptr_t>;  // buffer id, start, end
  static constexpr size_t kMaxExports = 1024;

  // Device memory (cudaMalloc, any CUDA allocator of this process) and its
  // allocation's range. cuPointerGetAttributes answers CUDA_SUCCESS with a zero
  // memory type for pointers CUDA does not know, and needs no current context.
  bool device_range(const void* p, CUdeviceptr* base, size_t* size) const {
    unsigned int type = 0;
    CUdeviceptr start = 0;
    size_t range = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void* data[] = {&type, &start, &range};
    if (drv_.pointer_get_attributes(3, attrs, data, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
      return false;
    if (type != CU_MEMORYTYPE_DEVICE || range == 0) return false;
    *base = start;
    *size = range;
    return true;
  }

  // mu_ held: the private stream, created at first use on the backend's device.
  cudaStream_t stream() {
    if (!stream_) check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    return stream_;
  }

  // mu_ held.
  Ticket record(const char* what, size_t n) {
    cudaEvent_t ev;
    if (!pool_.empty()) {
      ev = pool_.back();
      pool_.pop_back();
    } else {
      check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    }
    cudaError_t e = cudaEventRecord(ev, stream());
    if (e != cudaSuccess) {
      pool_.push_back(ev);
      raise_cuda(e, "cudaEventRecord");
    }
    Ticket t = next_++;
    pending_.push_back(Pending{t, ev, what, n});
    return t;
  }

  std::string cu_name(CUresult r) const {
    const char* s = nullptr;
    if (drv_.get_error_name && drv_.get_error_name(r, &s) == CUDA_SUCCESS && s) return s;
    return "CUresult " + std::to_string(static_cast<int>(r));
  }

  uint64_t buffer_id(const void* p) const {
    unsigned long long id = 0;
    if (drv_.pointer_get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
      return 0;
    return id;
  }

  void close_exports(uint64_t id) {
    std::lock_guard<std::mutex> lk(export_mu_);
    for (auto it = exports_.lower_bound(ExportKey{id, 0, 0});
         it != exports_.end() && std::get<0>(it->first) == id;) {
      close(it->second);
      it = exports_.erase(it);
    }
  }

  const int dev_;
  cudaStream_t stream_ = nullptr;
  Driver drv_;
  std::string dmabuf_reason_;  // empty when dma-buf export is possible
  uintptr_t page_ = 4096;

  std::mutex mu_;  // live_, tickets
  std::map<uintptr_t, size_t> live_;
  Ticket next_ = 1;
  std::atomic<Ticket> completed_{0};
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> pool_;

  std::mutex export_mu_;
  std::map<ExportKey, int> exports_;
  std::deque<ExportKey> order_;
};

std::once_flag g_once;
CudaBackend* g_backend = nullptr;
std::string g_reason;

void init() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    g_reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" +
               cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return;
  }
  if (n == 0) {
    g_reason = "no CUDA device";
    return;
  }
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    dev = 0;
  }
  try {
    g_backend = new CudaBackend(dev);  // immortal: destroying streams at exit races the driver
  } catch (const std::exception& ex) {
    g_reason = ex.what();
  }
  if (!g_backend) DCCL_INFO("cuda backend unavailable: %s", g_reason.c_str());
}

}  // namespace

Backend* cuda_backend() {
  std::call_once(g_once, init);
  return g_backend;
}

std::string cuda_unavailable_reason() {
  std::call_once(g_once, init);
  return g_backend ? std::string() : g_reason;
}

}  // namespace dccl::mem
