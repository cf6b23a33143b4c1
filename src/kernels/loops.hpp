// Internal: element kinds, reduction ops and the alias-aware loop driver that
// every family file instantiates twice — once in a baseline function and once
// in a target("avx2,f16c") function. Everything here is always_inline so the
// loops are compiled (and vectorised) with the instruction set of the caller.
// Off x86 there is no AVX2 copy to make: DCCL_REDUCE_AVX2 is empty (the second
// copy is the baseline again) and best_isa() never picks Isa::Avx2.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/half_inl.hpp"
#include "dccl/dccl.h"

#if defined(__x86_64__) || defined(__i386__)
#define DCCL_REDUCE_X86 1
#define DCCL_REDUCE_AVX2 __attribute__((target("avx2,f16c")))
#else
#define DCCL_REDUCE_X86 0
#define DCCL_REDUCE_AVX2
#endif
#define DCCL_REDUCE_INLINE __attribute__((always_inline)) inline

namespace dccl::kernels::reduce_detail {

// ---- element kinds: storage type S, compute type C ----

template <class T>
struct Native {
  using S = T;
  using C = T;
  DCCL_REDUCE_INLINE static C load(S v) { return v; }
  DCCL_REDUCE_INLINE static S store(C v) { return v; }
};

struct Bf16 {
  using S = uint16_t;
  using C = float;
  DCCL_REDUCE_INLINE static C load(S v) { return half_detail::bf16_to_f32(v); }
  DCCL_REDUCE_INLINE static S store(C v) { return half_detail::f32_to_bf16(v); }
};

// Software float16, for the baseline path (the AVX2 path uses F16C in reduce_half.cc).
struct F16 {
  using S = uint16_t;
  using C = float;
  DCCL_REDUCE_INLINE static C load(S v) { return half_detail::f16_to_f32(v); }
  DCCL_REDUCE_INLINE static S store(C v) { return half_detail::f32_to_f16(v); }
};

// ---- ops. Integers wrap (computed unsigned); floats follow IEEE, and
// max/min propagate NaN: max(x, y) = NaN if either is NaN, else x > y ? x : y
// (which is exactly MAXPS, so scalar, auto-vectorised and intrinsic paths agree).

struct OpSum {
  template <class T>
  DCCL_REDUCE_INLINE static T f(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(U(U(x) + U(y)));
    } else {
      return x + y;
    }
  }
};

struct OpProd {
  template <class T>
  DCCL_REDUCE_INLINE static T f(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(U(U(x) * U(y)));
    } else {
      return x * y;
    }
  }
};

struct OpMax {
  template <class T>
  DCCL_REDUCE_INLINE static T f(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) {
      return x != x ? x : (x > y ? x : y);
    } else {
      return x > y ? x : y;
    }
  }
};

struct OpMin {
  template <class T>
  DCCL_REDUCE_INLINE static T f(T x, T y) {
    if constexpr (std::is_floating_point_v<T>) {
      return x != x ? x : (x < y ? x : y);
    } else {
      return x < y ? x : y;
    }
  }
};

template <class K, class Op>
DCCL_REDUCE_INLINE typename K::S apply(typename K::S x, typename K::S y) {
  return K::store(Op::f(K::load(x), K::load(y)));
}

// ---- loops: one per aliasing case, so every __restrict promise is true.
// The body runs in blocks of a fixed element count: a constant trip count lets
// GCC vectorise even under -O2's "very cheap" cost model (no epilogue needed);
// the remainder runs element by element.

constexpr size_t kBlockBytes = 256;

template <class S>
constexpr size_t block_elems() {
  return kBlockBytes / sizeof(S);
}

template <class K, class Op>
DCCL_REDUCE_INLINE void loop_out(typename K::S* __restrict d, const typename K::S* __restrict a,
                                 const typename K::S* __restrict b, size_t n) {
  constexpr size_t B = block_elems<typename K::S>();
  size_t i = 0;
  for (; i + B <= n; i += B)
    for (size_t j = 0; j < B; ++j) d[i + j] = apply<K, Op>(a[i + j], b[i + j]);
  for (; i < n; ++i) d[i] = apply<K, Op>(a[i], b[i]);
}

template <class K, class Op>  // d == a
DCCL_REDUCE_INLINE void loop_in_a(typename K::S* __restrict d, const typename K::S* __restrict b,
                                  size_t n) {
  constexpr size_t B = block_elems<typename K::S>();
  size_t i = 0;
  for (; i + B <= n; i += B)
    for (size_t j = 0; j < B; ++j) d[i + j] = apply<K, Op>(d[i + j], b[i + j]);
  for (; i < n; ++i) d[i] = apply<K, Op>(d[i], b[i]);
}

template <class K, class Op>  // d == b
DCCL_REDUCE_INLINE void loop_in_b(typename K::S* __restrict d, const typename K::S* __restrict a,
                                  size_t n) {
  constexpr size_t B = block_elems<typename K::S>();
  size_t i = 0;
  for (; i + B <= n; i += B)
    for (size_t j = 0; j < B; ++j) d[i + j] = apply<K, Op>(a[i + j], d[i + j]);
  for (; i < n; ++i) d[i] = apply<K, Op>(a[i], d[i]);
}

template <class K, class Op>  // d == a == b
DCCL_REDUCE_INLINE void loop_in_ab(typename K::S* __restrict d, size_t n) {
  constexpr size_t B = block_elems<typename K::S>();
  size_t i = 0;
  for (; i + B <= n; i += B)
    for (size_t j = 0; j < B; ++j) d[i + j] = apply<K, Op>(d[i + j], d[i + j]);
  for (; i < n; ++i) d[i] = apply<K, Op>(d[i], d[i]);
}

template <class K, class Op>
DCCL_REDUCE_INLINE void run(void* dst, const void* a, const void* b, size_t n) {
  using S = typename K::S;
  S* d = static_cast<S*>(dst);
  const S* pa = static_cast<const S*>(a);
  const S* pb = static_cast<const S*>(b);
  if (d == pa && d == pb) loop_in_ab<K, Op>(d, n);
  else if (d == pa) loop_in_a<K, Op>(d, pb, n);
  else if (d == pb) loop_in_b<K, Op>(d, pa, n);
  else loop_out<K, Op>(d, pa, pb, n);
}

// dcclAvg reduces as a sum; the caller divides at the end.
template <class K>
DCCL_REDUCE_INLINE void run_op(dcclRedOp_t op, void* dst, const void* a, const void* b, size_t n) {
  switch (op) {
    case dcclSum: case dcclAvg: run<K, OpSum>(dst, a, b, n); break;
    case dcclProd: run<K, OpProd>(dst, a, b, n); break;
    case dcclMax: run<K, OpMax>(dst, a, b, n); break;
    case dcclMin: run<K, OpMin>(dst, a, b, n); break;
    default: break;  // validated by the caller
  }
}

// buf[i] /= nranks in the (floating) compute type: float precision for
// float32/float16/bfloat16, double for float64.
template <class K>
DCCL_REDUCE_INLINE void run_div(void* buf, size_t n, int nranks) {
  using S = typename K::S;
  using C = typename K::C;
  static_assert(std::is_floating_point_v<C>, "integers divide in avg_int");
  S* __restrict d = static_cast<S*>(buf);
  const C div = C(nranks);
  constexpr size_t B = block_elems<S>();
  size_t i = 0;
  for (; i + B <= n; i += B)
    for (size_t j = 0; j < B; ++j) d[i + j] = K::store(C(K::load(d[i + j]) / div));
  for (; i < n; ++i) d[i] = K::store(C(K::load(d[i]) / div));
}

}  // namespace dccl::kernels::reduce_detail
