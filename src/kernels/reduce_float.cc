// float32 and float64 kernels: plain loops, vectorised by the compiler for the
// baseline (SSE) and, in a second copy, for AVX2.
#include "kernels/kernels.hpp"
#include "kernels/loops.hpp"

namespace dccl::kernels::reduce_detail {
namespace {

DCCL_REDUCE_INLINE void float_body(void* d, const void* a, const void* b, size_t n,
                                   dcclDataType_t dt, dcclRedOp_t op) {
  if (dt == dcclFloat32) run_op<Native<float>>(op, d, a, b, n);
  else if (dt == dcclFloat64) run_op<Native<double>>(op, d, a, b, n);
}

DCCL_REDUCE_INLINE void float_div(void* buf, size_t n, dcclDataType_t dt, int nranks) {
  if (dt == dcclFloat32) run_div<Native<float>>(buf, n, nranks);
  else if (dt == dcclFloat64) run_div<Native<double>>(buf, n, nranks);
}

void float_generic(void* d, const void* a, const void* b, size_t n, dcclDataType_t dt,
                   dcclRedOp_t op) {
  float_body(d, a, b, n, dt, op);
}

DCCL_REDUCE_AVX2 void float_avx2(void* d, const void* a, const void* b, size_t n,
                                 dcclDataType_t dt, dcclRedOp_t op) {
  float_body(d, a, b, n, dt, op);
}

void div_generic(void* buf, size_t n, dcclDataType_t dt, int nranks) {
  float_div(buf, n, dt, nranks);
}

DCCL_REDUCE_AVX2 void div_avx2(void* buf, size_t n, dcclDataType_t dt, int nranks) {
  float_div(buf, n, dt, nranks);
}

}  // namespace

void reduce_float(Isa isa, void* d, const void* a, const void* b, size_t n, dcclDataType_t dt,
                  dcclRedOp_t op) {
  if (isa == Isa::Avx2) float_avx2(d, a, b, n, dt, op);
  else float_generic(d, a, b, n, dt, op);
}

void avg_float(Isa isa, void* buf, size_t n, dcclDataType_t dt, int nranks) {
  if (isa == Isa::Avx2) div_avx2(buf, n, dt, nranks);
  else div_generic(buf, n, dt, nranks);
}

}  // namespace dccl::kernels::reduce_detail
