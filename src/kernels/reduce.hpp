// Host reduction kernels for every datatype x op. float16/bfloat16 reduce in
// float32 and round to nearest even. Vectorised for the CPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dccl/dccl.h"

namespace dccl::kernels {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b (exactly, not partially).
// dcclAvg reduces as a sum here; call finish_avg on the final result.
// Integers wrap around; floats follow IEEE; max/min return NaN if either input
// is NaN (max(+0, -0) may be either zero). Throws core::Error: dcclInvalidArgument
// for a bad datatype/op or a null buffer with count > 0, dcclInvalidUsage when
// dst partially overlaps a or b. Instruction set (AVX2+F16C or baseline) is
// chosen once at run time; both give the same results, bit for bit apart from NaN
// payloads (reduce_detail in kernels.hpp).
void reduce(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
            dcclRedOp_t op);
// buf[i] /= nranks (integers: truncating division; floats: in float precision, fp16/bf16 via float32).
// nranks must be positive (dcclInvalidArgument otherwise).
void finish_avg(void* buf, size_t count, dcclDataType_t dt, int nranks);

// Half-precision conversions (round to nearest even), used by kernels and tests.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

}  // namespace dccl::kernels
