// Integer kernels: int8, uint8, int32, uint32, int64, uint64 x sum, prod, max, min.
// Sum and prod wrap around (computed in the unsigned type); avg divides truncating.
#include <cstdint>

#include "kernels/kernels.hpp"
#include "kernels/loops.hpp"

namespace dccl::kernels::reduce_detail {
namespace {

DCCL_REDUCE_INLINE void int_body(void* d, const void* a, const void* b, size_t n,
                                 dcclDataType_t dt, dcclRedOp_t op) {
  switch (dt) {
    case dcclInt8: run_op<Native<int8_t>>(op, d, a, b, n); break;
    case dcclUint8: run_op<Native<uint8_t>>(op, d, a, b, n); break;
    case dcclInt32: run_op<Native<int32_t>>(op, d, a, b, n); break;
    case dcclUint32: run_op<Native<uint32_t>>(op, d, a, b, n); break;
    case dcclInt64: run_op<Native<int64_t>>(op, d, a, b, n); break;
    case dcclUint64: run_op<Native<uint64_t>>(op, d, a, b, n); break;
    default: break;  // validated by the caller
  }
}

void int_generic(void* d, const void* a, const void* b, size_t n, dcclDataType_t dt,
                 dcclRedOp_t op) {
  int_body(d, a, b, n, dt, op);
}

DCCL_REDUCE_AVX2 void int_avx2(void* d, const void* a, const void* b, size_t n,
                               dcclDataType_t dt, dcclRedOp_t op) {
  int_body(d, a, b, n, dt, op);
}

// Truncating division (toward zero for signed types), in 64 bits so that
// nranks never wraps in a narrow type.
template <class T>
void div_int(void* buf, size_t n, int nranks) {
  T* __restrict p = static_cast<T*>(buf);
  if constexpr (std::is_signed_v<T>) {
    const int64_t div = nranks;
    for (size_t i = 0; i < n; ++i) p[i] = T(int64_t(p[i]) / div);
  } else {
    const uint64_t div = uint64_t(nranks);
    for (size_t i = 0; i < n; ++i) p[i] = T(uint64_t(p[i]) / div);
  }
}

}  // namespace

void reduce_int(Isa isa, void* d, const void* a, const void* b, size_t n, dcclDataType_t dt,
                dcclRedOp_t op) {
  if (isa == Isa::Avx2) int_avx2(d, a, b, n, dt, op);
  else int_generic(d, a, b, n, dt, op);
}

void avg_int(void* buf, size_t n, dcclDataType_t dt, int nranks) {
  switch (dt) {
    case dcclInt8: div_int<int8_t>(buf, n, nranks); break;
    case dcclUint8: div_int<uint8_t>(buf, n, nranks); break;
    case dcclInt32: div_int<int32_t>(buf, n, nranks); break;
    case dcclUint32: div_int<uint32_t>(buf, n, nranks); break;
    case dcclInt64: div_int<int64_t>(buf, n, nranks); break;
    case dcclUint64: div_int<uint64_t>(buf, n, nranks); break;
    default: break;
  }
}

}  // namespace dccl::kernels::reduce_detail
