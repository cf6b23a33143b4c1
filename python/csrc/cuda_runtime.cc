// GpuOps over CUDA's runtime and PyTorch's current stream (TORCH_DCCL_CUDA
// builds); without CUDA the entry points refuse, and check_tensor() has already
// refused CUDA tensors before they are reached.
#include "process_group.hpp"

#include <stdexcept>
#include <string>

#ifdef TORCH_DCCL_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <cuda_runtime.h>
#endif

namespace torch_dccl {

#ifdef TORCH_DCCL_CUDA

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("torch_dccl: ") + what + ": " + cudaGetErrorString(e));
}

using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

WaitValue32 wait_value32() {
  static WaitValue32 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    cuda_check(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &p, 12000, cudaEnableDefault, &q),
               "cudaGetDriverEntryPointByVersion");
    if (q != cudaDriverEntryPointSuccess || !p)
      throw std::runtime_error("torch_dccl: the CUDA driver has no cuStreamWaitValue32 (stream memory operations)");
    return reinterpret_cast<WaitValue32>(p);
  }();
  return fn;
}

class CudaOps final : public GpuOps {
 public:
  explicit CudaOps(int device) : device_(device), work_(c10::cuda::getStreamFromPool(false, device)) {}

  Event create_event() override {
    c10::cuda::CUDAGuard g(device_);
    cudaEvent_t e;
    cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }
  void destroy_event(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  void record(Event e, Stream s) override {
    cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)), "cudaEventRecord");
  }
  bool query(Event e) override {
    const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) return false;
    cuda_check(r, "cudaEventQuery");
    return true;
  }
  void stream_wait_event(Stream s, Event e) override {
    cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0), "cudaStreamWaitEvent");
  }
  Stream create_side_stream() override {
    c10::cuda::CUDAGuard g(device_);
    cudaStream_t s;
    // Non-blocking: the legacy default stream must not wait for its flag waits.
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }
  void destroy_side_stream(Stream s) override {
    cudaStreamSynchronize(static_cast<cudaStream_t>(s));
    cudaStreamDestroy(static_cast<cudaStream_t>(s));
  }
  volatile uint32_t* alloc_flag() override {
    void* p = nullptr;
    cuda_check(cudaHostAlloc(&p, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    return static_cast<volatile uint32_t*>(p);
  }
  void free_flag(volatile uint32_t* flag) override { cudaFreeHost(const_cast<uint32_t*>(flag)); }
  void stream_wait_flag(Stream s, volatile uint32_t* flag, uint32_t value) override {
    void* dev = nullptr;
    cuda_check(cudaHostGetDevicePointer(&dev, const_cast<uint32_t*>(flag), 0), "cudaHostGetDevicePointer");
    const CUresult r = wait_value32()(static_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(dev), value,
                                      CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) throw std::runtime_error("torch_dccl: cuStreamWaitValue32 failed: CUresult " + std::to_string(r));
  }
  void run_on_work_stream(const std::function<void()>& body) override {
    c10::cuda::CUDAGuard g(device_);
    c10::cuda::CUDAStreamGuard sg(work_);
    body();
    work_.synchronize();
  }

 private:
  int device_;
  c10::cuda::CUDAStream work_;
};

}  // namespace

GpuOps::Stream current_cuda_stream(int device) { return c10::cuda::getCurrentCUDAStream(device).stream(); }

std::unique_ptr<GpuOps> make_cuda_ops(int device) { return std::make_unique<CudaOps>(device); }

void settle(const Place& p) {
  if (p.cuda) c10::cuda::getCurrentCUDAStream(p.device).synchronize();
}

dcclResult_t cuda_warm_up(dcclComm_t comm, int device) {
  c10::cuda::CUDAGuard g(device);
  // 4 MiB: past the sizes at which DirectCCL's paths split messages.
  at::Tensor buf = at::zeros({1 << 20}, at::TensorOptions().device(at::kCUDA, device).dtype(at::kFloat));
  c10::cuda::getCurrentCUDAStream(device).synchronize();
  return dcclAllReduce(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), dcclFloat32, dcclSum, comm,
                       nullptr);
}

#else

GpuOps::Stream current_cuda_stream(int) { throw std::logic_error("torch_dccl: built without CUDA"); }
std::unique_ptr<GpuOps> make_cuda_ops(int) { throw std::logic_error("torch_dccl: built without CUDA"); }
void settle(const Place&) {}
dcclResult_t cuda_warm_up(dcclComm_t, int) { return dcclInvalidUsage; }

#endif

}  // namespace torch_dccl
