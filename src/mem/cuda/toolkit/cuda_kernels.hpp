// Reduction kernels of the CUDA backend (cuda_kernels.cu); host-callable launchers.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "dccl/dccl.h"

namespace dccl::mem::cuda {

// dst[i] = a[i] op b[i] (dcclAvg: sum); float16/bfloat16 compute in float and round
// to nearest even. Returns the launch error, cudaErrorInvalidValue for a bad dtype/op.
cudaError_t launch_reduce(void* dst, const void* a, const void* b, size_t count,
                          dcclDataType_t dt, dcclRedOp_t op, cudaStream_t stream);
// buf[i] /= nranks (integers truncate; half types via float).
cudaError_t launch_avg(void* buf, size_t count, dcclDataType_t dt, int nranks,
                       cudaStream_t stream);

}  // namespace dccl::mem::cuda
