#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "mem/cuda/toolkit/cuda_kernels.hpp"

namespace dccl::mem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 32768;

// The type arithmetic is done in, and the conversions to and from it.
template <typename T>
struct Acc {
  using type = T;
  __device__ static type load(T v) { return v; }
  __device__ static T store(type v) { return v; }
};
template <>
struct Acc<__half> {
  using type = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct Acc<__nv_bfloat16> {
  using type = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
// int8/uint8 arithmetic promotes to int; the result wraps when stored back.
template <>
struct Acc<int8_t> {
  using type = int;
  __device__ static int load(int8_t v) { return v; }
  __device__ static int8_t store(int v) { return static_cast<int8_t>(v); }
};
template <>
struct Acc<uint8_t> {
  using type = unsigned;
  __device__ static unsigned load(uint8_t v) { return v; }
  __device__ static uint8_t store(unsigned v) { return static_cast<uint8_t>(v); }
};

// Signed integers wrap like their unsigned counterparts (no overflow UB).
template <typename A>
struct Same {
  using type = A;
};
template <typename A>
using Wrap = typename std::conditional_t<std::is_integral_v<A> && std::is_signed_v<A>,
                                         std::make_unsigned<A>, Same<A>>::type;

template <typename A>
__device__ bool is_nan(A x) {
  if constexpr (std::is_floating_point_v<A>) return isnan(x);
  else return false;
}

template <typename A, int Op>
__device__ A apply(A x, A y) {
  using W = Wrap<A>;
  if constexpr (Op == dcclProd) return static_cast<A>(static_cast<W>(x) * static_cast<W>(y));
  // max/min propagate a NaN from either side, as the host kernels do: x > y is
  // false when either is NaN, so "x is NaN" picks x and otherwise y carries it.
  else if constexpr (Op == dcclMax) return (x > y || is_nan(x)) ? x : y;
  else if constexpr (Op == dcclMin) return (x < y || is_nan(x)) ? x : y;
  else return static_cast<A>(static_cast<W>(x) + static_cast<W>(y));  // dcclSum, dcclAvg
}

template <typename T, int Op>
__global__ void reduce_kernel(T* dst, const T* a, const T* b, size_t n) {
  using A = Acc<T>;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = A::store(apply<typename A::type, Op>(A::load(a[i]), A::load(b[i])));
}

template <typename T>
__global__ void avg_kernel(T* buf, size_t n, int nranks) {
  using A = Acc<T>;
  using C = typename A::type;
  const C div = static_cast<C>(nranks);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = A::store(A::load(buf[i]) / div);
}

unsigned blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

template <typename T>
cudaError_t reduce_t(void* dst, const void* a, const void* b, size_t n, dcclRedOp_t op,
                     cudaStream_t s) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const unsigned g = blocks_for(n);
  switch (op) {
    case dcclSum:
    case dcclAvg: reduce_kernel<T, dcclSum><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    case dcclProd: reduce_kernel<T, dcclProd><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    case dcclMax: reduce_kernel<T, dcclMax><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    case dcclMin: reduce_kernel<T, dcclMin><<<g, kThreads, 0, s>>>(d, x, y, n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t avg_t(void* buf, size_t n, int nranks, cudaStream_t s) {
  avg_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(buf), n, nranks);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reduce(void* dst, const void* a, const void* b, size_t n, dcclDataType_t dt,
                          dcclRedOp_t op, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (dt) {
    case dcclInt8: return reduce_t<int8_t>(dst, a, b, n, op, s);
    case dcclUint8: return reduce_t<uint8_t>(dst, a, b, n, op, s);
    case dcclInt32: return reduce_t<int32_t>(dst, a, b, n, op, s);
    case dcclUint32: return reduce_t<uint32_t>(dst, a, b, n, op, s);
    case dcclInt64: return reduce_t<int64_t>(dst, a, b, n, op, s);
    case dcclUint64: return reduce_t<uint64_t>(dst, a, b, n, op, s);
    case dcclFloat16: return reduce_t<__half>(dst, a, b, n, op, s);
    case dcclFloat32: return reduce_t<float>(dst, a, b, n, op, s);
    case dcclFloat64: return reduce_t<double>(dst, a, b, n, op, s);
    case dcclBfloat16: return reduce_t<__nv_bfloat16>(dst, a, b, n, op, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_avg(void* buf, size_t n, dcclDataType_t dt, int nranks, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (nranks < 1) return cudaErrorInvalidValue;
  switch (dt) {
    case dcclInt8: return avg_t<int8_t>(buf, n, nranks, s);
    case dcclUint8: return avg_t<uint8_t>(buf, n, nranks, s);
    case dcclInt32: return avg_t<int32_t>(buf, n, nranks, s);
    case dcclUint32: return avg_t<uint32_t>(buf, n, nranks, s);
    case dcclInt64: return avg_t<int64_t>(buf, n, nranks, s);
    case dcclUint64: return avg_t<uint64_t>(buf, n, nranks, s);
    case dcclFloat16: return avg_t<__half>(buf, n, nranks, s);
    case dcclFloat32: return avg_t<float>(buf, n, nranks, s);
    case dcclFloat64: return avg_t<double>(buf, n, nranks, s);
    case dcclBfloat16: return avg_t<__nv_bfloat16>(buf, n, nranks, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace dccl::mem::cuda
