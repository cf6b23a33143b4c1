// Exported scalar float16 / bfloat16 conversions (see half_inl.hpp).
#include "kernels/half_inl.hpp"
#include "kernels/reduce.hpp"

namespace dccl::kernels {

float half_to_float(uint16_t h) { return half_detail::f16_to_f32(h); }
uint16_t float_to_half(float f) { return half_detail::f32_to_f16(f); }
float bf16_to_float(uint16_t h) { return half_detail::bf16_to_f32(h); }
uint16_t float_to_bf16(float f) { return half_detail::f32_to_bf16(f); }

}  // namespace dccl::kernels
