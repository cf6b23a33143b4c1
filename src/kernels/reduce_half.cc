// float16 and bfloat16 kernels: widen to float32, reduce, round back to
// nearest even. The AVX2 path uses intrinsics: F16C (VCVTPH2PS / VCVTPS2PH) for
// float16, integer rounding (add 0x7fff + lsb) for bfloat16. The baseline path
// runs plain loops over the scalar converters. Both paths give the same bits
// (NaN payloads aside: which NaN wins when both inputs are NaN may differ).
// Off x86 only the baseline path is built.
#include <cstring>
#include <type_traits>

#include "kernels/kernels.hpp"
#include "kernels/loops.hpp"

#if DCCL_REDUCE_X86
#include <immintrin.h>
#endif

namespace dccl::kernels::reduce_detail {
namespace {

#if DCCL_REDUCE_X86
// ---- AVX2 path: 16 elements at a time through a codec ----

template <class Op>
DCCL_REDUCE_AVX2 DCCL_REDUCE_INLINE __m256 vop(__m256 x, __m256 y) {
  if constexpr (std::is_same_v<Op, OpSum>) {
    return _mm256_add_ps(x, y);
  } else if constexpr (std::is_same_v<Op, OpProd>) {
    return _mm256_mul_ps(x, y);
  } else if constexpr (std::is_same_v<Op, OpMax>) {
    // MAXPS is x > y ? x : y; add "x is NaN -> x" to propagate NaN from either side.
    return _mm256_blendv_ps(_mm256_max_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  } else {
    return _mm256_blendv_ps(_mm256_min_ps(x, y), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
}

// Codecs: 16 half values <-> two __m256 of floats (lo, hi), rounding to nearest
// even. The split of elements between lo and hi is the codec's own business:
// both operands use the same one and store16 undoes it.
struct F16c {
  DCCL_REDUCE_AVX2 DCCL_REDUCE_INLINE static void load16(const uint16_t* p, __m256& lo, __m256& hi) {
    lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  }
  DCCL_REDUCE_AVX2 DCCL_REDUCE_INLINE static void store16(uint16_t* p, __m256 lo, __m256 hi) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8), _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT));
  }
};

// bfloat16 is the top half of a float32. In each 32-bit lane of 16 loaded
// values, the even element is the low half and the odd one the high half:
// lo = lane << 16 and hi = lane & 0xffff0000 widen them without any shuffle.
struct Bf16Avx2 {
  DCCL_REDUCE_AVX2 DCCL_REDUCE_INLINE static void load16(const uint16_t* p, __m256& lo, __m256& hi) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(int(0xffff0000u))));
  }
  // As half_detail::f32_to_bf16, leaving the result in the top 16 bits: add
  // 0x7fff + lsb; a NaN gets no rounding bias and its quiet bit forced.
  DCCL_REDUCE_AVX2 DCCL_REDUCE_INLINE static __m256i round(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i bias = _mm256_andnot_si256(nan, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    const __m256i quiet = _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000));
    return _mm256_add_epi32(_mm256_or_si256(u, quiet), bias);
  }
  DCCL_REDUCE_AVX2 DCCL_REDUCE_INLINE static void store16(uint16_t* p, __m256 lo, __m256 hi) {
    const __m256i even = _mm256_srli_epi32(round(lo), 16);
    const __m256i odd = _mm256_and_si256(round(hi), _mm256_set1_epi32(int(0xffff0000u)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_or_si256(even, odd));
  }
};

// Each block is loaded before it is stored, so dst may alias a or b exactly.
template <class Codec, class Op>
DCCL_REDUCE_AVX2 void half_reduce_avx2(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n) {
  __m256 alo, ahi, blo, bhi;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Codec::load16(a + i, alo, ahi);
    Codec::load16(b + i, blo, bhi);
    Codec::store16(d + i, vop<Op>(alo, blo), vop<Op>(ahi, bhi));
  }
  if (i < n) {  // tail through a zero-padded block, so it rounds exactly as the body
    uint16_t ta[16] = {}, tb[16] = {}, td[16];
    const size_t rest = n - i;
    std::memcpy(ta, a + i, rest * sizeof(uint16_t));
    std::memcpy(tb, b + i, rest * sizeof(uint16_t));
    Codec::load16(ta, alo, ahi);
    Codec::load16(tb, blo, bhi);
    Codec::store16(td, vop<Op>(alo, blo), vop<Op>(ahi, bhi));
    std::memcpy(d + i, td, rest * sizeof(uint16_t));
  }
}

template <class Codec>
DCCL_REDUCE_AVX2 void half_div_avx2(void* buf, size_t n, int nranks) {
  auto* d = static_cast<uint16_t*>(buf);
  const __m256 div = _mm256_set1_ps(float(nranks));
  __m256 lo, hi;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Codec::load16(d + i, lo, hi);
    Codec::store16(d + i, _mm256_div_ps(lo, div), _mm256_div_ps(hi, div));
  }
  if (i < n) {
    uint16_t t[16] = {};
    const size_t rest = n - i;
    std::memcpy(t, d + i, rest * sizeof(uint16_t));
    Codec::load16(t, lo, hi);
    Codec::store16(t, _mm256_div_ps(lo, div), _mm256_div_ps(hi, div));
    std::memcpy(d + i, t, rest * sizeof(uint16_t));
  }
}

template <class Codec>
void half_avx2(void* d, const void* a, const void* b, size_t n, dcclRedOp_t op) {
  auto* pd = static_cast<uint16_t*>(d);
  auto* pa = static_cast<const uint16_t*>(a);
  auto* pb = static_cast<const uint16_t*>(b);
  switch (op) {
    case dcclSum: case dcclAvg: half_reduce_avx2<Codec, OpSum>(pd, pa, pb, n); break;
    case dcclProd: half_reduce_avx2<Codec, OpProd>(pd, pa, pb, n); break;
    case dcclMax: half_reduce_avx2<Codec, OpMax>(pd, pa, pb, n); break;
    case dcclMin: half_reduce_avx2<Codec, OpMin>(pd, pa, pb, n); break;
    default: break;
  }
}
#endif  // DCCL_REDUCE_X86

// ---- baseline path: plain loops over the branch-free scalar converters ----

void bf16_generic(void* d, const void* a, const void* b, size_t n, dcclRedOp_t op) {
  run_op<Bf16>(op, d, a, b, n);
}
void f16_generic(void* d, const void* a, const void* b, size_t n, dcclRedOp_t op) {
  run_op<F16>(op, d, a, b, n);
}
void bf16_div_generic(void* buf, size_t n, int nranks) { run_div<Bf16>(buf, n, nranks); }
void f16_div_generic(void* buf, size_t n, int nranks) { run_div<F16>(buf, n, nranks); }

}  // namespace

void reduce_half(Isa isa, void* d, const void* a, const void* b, size_t n, dcclDataType_t dt,
                 dcclRedOp_t op) {
#if DCCL_REDUCE_X86
  if (isa == Isa::Avx2) {
    if (dt == dcclBfloat16) half_avx2<Bf16Avx2>(d, a, b, n, op);
    else if (dt == dcclFloat16) half_avx2<F16c>(d, a, b, n, op);
    return;
  }
#endif
  if (dt == dcclBfloat16) bf16_generic(d, a, b, n, op);
  else if (dt == dcclFloat16) f16_generic(d, a, b, n, op);
}

void avg_half(Isa isa, void* buf, size_t n, dcclDataType_t dt, int nranks) {
#if DCCL_REDUCE_X86
  if (isa == Isa::Avx2) {
    if (dt == dcclBfloat16) half_div_avx2<Bf16Avx2>(buf, n, nranks);
    else if (dt == dcclFloat16) half_div_avx2<F16c>(buf, n, nranks);
    return;
  }
#endif
  if (dt == dcclBfloat16) bf16_div_generic(buf, n, nranks);
  else if (dt == dcclFloat16) f16_div_generic(buf, n, nranks);
}

}  // namespace dccl::kernels::reduce_detail
