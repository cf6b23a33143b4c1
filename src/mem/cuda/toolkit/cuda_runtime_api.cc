// cuda::Api over the CUDA runtime (streams, events, copies, kernels, page-locking)
// and the driver API (pointer attributes, dma-buf export), the only file of the
// backend that includes CUDA headers. The driver is reached through
// cudaGetDriverEntryPointByVersion rather than by linking libcuda, so libdccl loads
// (and reports "no device") on machines that have the toolkit but no driver.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "mem/cuda/toolkit/cuda_kernels.hpp"
#include "mem/cuda/cuda_api.hpp"

namespace dccl::mem::cuda {
namespace {

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

[[noreturn]] void raise_cuda(cudaError_t e, const std::string& what) {
  cudaGetLastError();  // clear a non-sticky error
  core::raise(e == cudaErrorMemoryAllocation ? dcclSystemError : dcclUnhandledDeviceError,
              "cuda: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) raise_cuda(e, what);
}

cudaStream_t as_stream(Api::Stream s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(Api::Event e) { return static_cast<cudaEvent_t>(e); }

class RuntimeApi final : public Api {
 public:
  // False (and why) when the driver's entry points cannot be found.
  bool load_driver(std::string* why) {
    bool ok = load("cuPointerGetAttributes", &get_attributes_) && load("cuPointerSetAttribute", &set_attribute_) &&
              load("cuDeviceGet", &device_get_) && load("cuDeviceGetAttribute", &device_attribute_) &&
              load("cuGetErrorName", &error_name_);
    if (!ok) {
      *why = "cuda: driver entry points not found (no NVIDIA driver?)";
      return false;
    }
    if (!load("cuMemGetHandleForAddressRange", &get_handle_)) get_handle_ = nullptr;
    return true;
  }

  int device_count() override {
    int n = 0;
    check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
    return n;
  }
  int current_device() override {
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return d;
  }
  void set_device(int dev) override { check(cudaSetDevice(dev), "cudaSetDevice"); }

  std::string dmabuf_unsupported(int dev) override {
    if (!get_handle_) return "cuda: the driver has no cuMemGetHandleForAddressRange (dma-buf needs CUDA 11.7+)";
    CUdevice cu = 0;
    int supported = 0;
    CUresult r = device_get_(&cu, dev);
    if (r == CUDA_SUCCESS) r = device_attribute_(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, cu);
    if (r != CUDA_SUCCESS) return "cuda: querying CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED failed: " + cu_name(r);
    if (!supported)
      return "cuda: device " + std::to_string(dev) +
             " reports no dma-buf support (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED=0; "
             "needs the open kernel modules and a dma-buf capable kernel)";
    return {};
  }

  void* malloc(size_t bytes) override {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) raise_cuda(e, "cudaMalloc of " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void* p) override { check(cudaFree(p), "cudaFree"); }

  // cuPointerGetAttributes answers CUDA_SUCCESS with a zero memory type for
  // pointers CUDA does not know, and needs no current context.
  bool pointer_info(const void* p, PointerInfo* out) const override {
    unsigned int type = 0;
    CUdeviceptr start = 0;
    size_t range = 0;
    int ordinal = -1;
    unsigned long long id = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void* data[] = {&type, &start, &range, &ordinal, &id};
    if (get_attributes_(5, attrs, data, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return false;
    if (type != CU_MEMORYTYPE_DEVICE || range == 0) return false;
    out->base = static_cast<uintptr_t>(start);
    out->size = range;
    out->ordinal = ordinal;
    out->buffer_id = id;
    return true;
  }

  void set_sync_memops(const void* p) override {
    unsigned int one = 1;
    CUresult r = set_attribute_(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, reinterpret_cast<CUdeviceptr>(p));
    if (r != CUDA_SUCCESS) core::raise(dcclUnhandledDeviceError, "cuda: setting SYNC_MEMOPS failed: " + cu_name(r));
  }

  bool sync_memops_set(const void* p) const override {
    unsigned int v = 0;  // the driver writes a boolean
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_SYNC_MEMOPS;
    void* data = &v;
    CUresult r = get_attributes_(1, &attr, &data, reinterpret_cast<CUdeviceptr>(p));
    if (r != CUDA_SUCCESS) core::raise(dcclUnhandledDeviceError, "cuda: reading SYNC_MEMOPS failed: " + cu_name(r));
    return v != 0;
  }

  int export_dmabuf(uintptr_t start, size_t len) override {
    int fd = -1;
    CUresult r = get_handle_ ? get_handle_(&fd, static_cast<CUdeviceptr>(start), len,
                                           CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)
                             : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS || fd < 0)
      core::raise(dcclUnavailable, "cuda: cuMemGetHandleForAddressRange(0x" + hex(start) + ", " + std::to_string(len) +
                                       ") failed: " + cu_name(r));
    return fd;
  }

  void host_register(void* p, size_t bytes) override {
    check(cudaHostRegister(p, bytes, cudaHostRegisterDefault), "cudaHostRegister");
  }
  void host_unregister(void* p) override { check(cudaHostUnregister(p), "cudaHostUnregister"); }

  Stream stream_create() override {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }
  void stream_sync(Stream s) override { check(cudaStreamSynchronize(as_stream(s)), "cudaStreamSynchronize"); }
  void copy_async(void* dst, const void* src, size_t bytes, Stream s) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(s)), "cudaMemcpyAsync");
  }
  void memset_async(void* dst, int value, size_t bytes, Stream s) override {
    check(cudaMemsetAsync(dst, value, bytes, as_stream(s)), "cudaMemsetAsync");
  }
  void reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt, dcclRedOp_t op,
                    Stream s) override {
    check(launch_reduce(dst, a, b, count, dt, op, as_stream(s)), "reduce kernel launch");
  }
  void avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks, Stream s) override {
    check(launch_avg(buf, count, dt, nranks, as_stream(s)), "avg kernel launch");
  }
  Event event_create() override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }
  void event_record(Event e, Stream s) override { check(cudaEventRecord(as_event(e), as_stream(s)), "cudaEventRecord"); }
  bool event_done(Event e) override {
    cudaError_t r = cudaEventQuery(as_event(e));
    if (r == cudaErrorNotReady) return false;
    check(r, "cudaEventQuery");
    return true;
  }
  void stream_wait_event(Stream s, Event e) override {
    check(cudaStreamWaitEvent(as_stream(s), as_event(e), 0), "cudaStreamWaitEvent");
  }
  Event timing_event_create() override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    return e;
  }
  void event_destroy(Event e) override { check(cudaEventDestroy(as_event(e)), "cudaEventDestroy"); }
  float event_elapsed_ms(Event start, Event stop) override {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, as_event(start), as_event(stop)), "cudaEventElapsedTime");
    return ms;
  }
  bool flush_rdma_writes() override {
    int dev = 0, options = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&options, cudaDevAttrGPUDirectRDMAFlushWritesOptions, dev),
          "cudaDeviceGetAttribute(GPUDirectRDMAFlushWritesOptions)");
    if (!(options & cudaFlushGPUDirectRDMAWritesOptionHost)) return false;
    check(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                             cudaFlushGPUDirectRDMAWritesToOwner),
          "cudaDeviceFlushGPUDirectRDMAWrites");
    return true;
  }

 private:
  using PFN_PointerGetAttributes = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  using PFN_PointerSetAttribute = CUresult (*)(const void*, CUpointer_attribute, CUdeviceptr);
  using PFN_GetHandle = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
  using PFN_DeviceGetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  using PFN_DeviceGet = CUresult (*)(CUdevice*, int);
  using PFN_GetErrorName = CUresult (*)(CUresult, const char**);

  static std::string hex(uintptr_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  std::string cu_name(CUresult r) const {
    const char* s = nullptr;
    if (error_name_ && error_name_(r, &s) == CUDA_SUCCESS && s) return s;
    return "CUresult " + std::to_string(static_cast<int>(r));
  }

  PFN_PointerGetAttributes get_attributes_ = nullptr;
  PFN_PointerSetAttribute set_attribute_ = nullptr;
  PFN_GetHandle get_handle_ = nullptr;
  PFN_DeviceGetAttribute device_attribute_ = nullptr;
  PFN_DeviceGet device_get_ = nullptr;
  PFN_GetErrorName error_name_ = nullptr;
};

}  // namespace

Api* runtime_api(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return nullptr;
  }
  auto* api = new RuntimeApi();  // immortal, like the backend over it
  if (!api->load_driver(why)) {
    delete api;
    return nullptr;
  }
  return api;
}

}  // namespace dccl::mem::cuda
