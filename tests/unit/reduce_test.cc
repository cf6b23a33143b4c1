// Host reduction kernels: every datatype x op x instruction set against an
// independent reference (exact integers; float64 arithmetic with its own
// round-to-nearest-even for the half types), plus known rounding bit patterns.
#include <gtest/gtest.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define REDUCE_TEST_X86 1
#else
#define REDUCE_TEST_X86 0
#endif

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "core/types.hpp"

namespace {

using dccl::kernels::bf16_to_float;
using dccl::kernels::float_to_bf16;
using dccl::kernels::float_to_half;
using dccl::kernels::half_to_float;
namespace rd = dccl::kernels::reduce_detail;
using rd::Isa;

// ---------------------------------------------------------------------------
// Independent reference for binary16 (man 10, exp 5) and bfloat16 (man 7, exp 8):
// decode with ldexp, round a double with nearbyint (the default mode is to nearest even).

double ref_decode(uint16_t h, int man_bits, int exp_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int e = (h >> man_bits) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << man_bits) - 1);
  const double s = (h >> (man_bits + exp_bits)) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m ? std::nan("") : s * INFINITY;
  if (e == 0) return s * std::ldexp(double(m), 1 - bias - man_bits);
  return s * std::ldexp(double(m + (1 << man_bits)), e - bias - man_bits);
}

uint16_t ref_round(double v, int man_bits, int exp_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint16_t sign = std::signbit(v) ? uint16_t(1u << (man_bits + exp_bits)) : 0;
  const uint16_t exp_all = uint16_t(((1 << exp_bits) - 1) << man_bits);
  if (std::isnan(v)) return exp_all | uint16_t(1u << (man_bits - 1));
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | exp_all;
  if (a == 0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);                                  // a = f * 2^e2, f in [0.5, 1)
  int ue = std::max(e2 - 1, 1 - bias);                 // unbiased exponent, clamped for subnormals
  double r = std::nearbyint(std::ldexp(a, man_bits - ue));  // significand in ulps
  if (r >= std::ldexp(1.0, man_bits + 1)) { r /= 2; ++ue; }
  if (ue > bias) return sign | exp_all;                // overflow to inf
  const uint32_t ri = uint32_t(r);
  if (ri < (1u << man_bits)) return uint16_t(sign | ri);  // subnormal or zero
  return uint16_t(sign | ((ue + bias) << man_bits) | (ri - (1u << man_bits)));
}

double ref_f16(uint16_t h) { return ref_decode(h, 10, 5); }
double ref_b16(uint16_t h) { return ref_decode(h, 7, 8); }
uint16_t ref_to_f16(double v) { return ref_round(v, 10, 5); }
uint16_t ref_to_b16(double v) { return ref_round(v, 7, 8); }

double ref_fop(dcclRedOp_t op, double x, double y) {
  switch (op) {
    case dcclSum: case dcclAvg: return x + y;
    case dcclProd: return x * y;
    case dcclMax: return (std::isnan(x) || std::isnan(y)) ? std::nan("") : std::max(x, y);
    default: return (std::isnan(x) || std::isnan(y)) ? std::nan("") : std::min(x, y);
  }
}

template <class T>
T ref_iop(dcclRedOp_t op, T x, T y) {  // exact: modular arithmetic in 64 bits, then narrowed
  switch (op) {
    case dcclSum: case dcclAvg: return T(uint64_t(x) + uint64_t(y));
    case dcclProd: return T(uint64_t(x) * uint64_t(y));
    case dcclMax: return std::max(x, y);
    default: return std::min(x, y);
  }
}

// One element of the reference, on raw bytes.
void ref_elem(dcclDataType_t dt, dcclRedOp_t op, const uint8_t* x, const uint8_t* y, uint8_t* out) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T a, b, r;
    std::memcpy(&a, x, sizeof a);
    std::memcpy(&b, y, sizeof b);
    if constexpr (std::is_integral_v<T>) r = ref_iop<T>(op, a, b);
    else r = T(ref_fop(op, double(a), double(b)));  // float(double op) is correctly rounded
    std::memcpy(out, &r, sizeof r);
  };
  uint16_t a16, b16, r16;
  std::memcpy(&a16, x, 2);
  std::memcpy(&b16, y, 2);
  switch (dt) {
    case dcclInt8: run(int8_t{}); break;
    case dcclUint8: run(uint8_t{}); break;
    case dcclInt32: run(int32_t{}); break;
    case dcclUint32: run(uint32_t{}); break;
    case dcclInt64: run(int64_t{}); break;
    case dcclUint64: run(uint64_t{}); break;
    case dcclFloat32: run(float{}); break;
    case dcclFloat64: run(double{}); break;
    case dcclFloat16: r16 = ref_to_f16(ref_fop(op, ref_f16(a16), ref_f16(b16))); std::memcpy(out, &r16, 2); break;
    case dcclBfloat16: r16 = ref_to_b16(ref_fop(op, ref_b16(a16), ref_b16(b16))); std::memcpy(out, &r16, 2); break;
    default: FAIL();
  }
}

// Element value as double (NaN-aware comparisons), or nullopt-like flag for ints.
double as_double(dcclDataType_t dt, const uint8_t* p) {
  uint16_t h;
  float f;
  double d;
  switch (dt) {
    case dcclFloat16: std::memcpy(&h, p, 2); return ref_f16(h);
    case dcclBfloat16: std::memcpy(&h, p, 2); return ref_b16(h);
    case dcclFloat32: std::memcpy(&f, p, 4); return f;
    case dcclFloat64: std::memcpy(&d, p, 8); return d;
    default: return 0;
  }
}

bool is_float(dcclDataType_t dt) {
  return dt == dcclFloat16 || dt == dcclBfloat16 || dt == dcclFloat32 || dt == dcclFloat64;
}

// Bit-exact, except: any NaN matches any NaN; for max/min +0 and -0 match.
bool same(dcclDataType_t dt, dcclRedOp_t op, const uint8_t* got, const uint8_t* want) {
  const size_t sz = dccl::core::dtype_size(dt);
  if (std::memcmp(got, want, sz) == 0) return true;
  if (!is_float(dt)) return false;
  const double g = as_double(dt, got), w = as_double(dt, want);
  if (std::isnan(g) && std::isnan(w)) return true;
  return (op == dcclMax || op == dcclMin) && g == 0 && w == 0;
}

// Random inputs: integers over their full range plus extremes; floats mostly in a
// moderate range with specials (NaN, +-inf, +-0, subnormals, max) sprinkled in;
// half types half uniformly random bits, half near 1.
void fill(dcclDataType_t dt, uint8_t* p, size_t n, std::mt19937_64& rng) {
  const size_t sz = dccl::core::dtype_size(dt);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    const uint64_t k = rng() % 16;
    if (dt == dcclFloat32) {
      float v = std::ldexp(float(int32_t(uint32_t(bits >> 32)) >> 8) / float(1 << 23), int(k) - 8);
      const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f, FLT_MAX, -FLT_MAX};
      if (rng() % 8 == 0) v = sp[rng() % 9];
      std::memcpy(p + i * sz, &v, 4);
    } else if (dt == dcclFloat64) {
      double v = std::ldexp(double(int64_t(bits)) / 0x1p52, int(k) - 8);
      const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, DBL_MAX, -DBL_MAX, 1e300};
      if (rng() % 8 == 0) v = sp[rng() % 9];
      std::memcpy(p + i * sz, &v, 8);
    } else if (dt == dcclFloat16 || dt == dcclBfloat16) {
      uint16_t h = uint16_t(bits);
      if (k < 8) {  // exponent near the bias: exercises ordinary rounding
        const int mb = dt == dcclFloat16 ? 10 : 7, bias = dt == dcclFloat16 ? 15 : 127;
        h = uint16_t((h & 0x8000u) | (uint32_t(bias - 3 + int(k)) << mb) | (h & ((1u << mb) - 1)));
      }
      std::memcpy(p + i * sz, &h, 2);
    } else {
      if (k == 0) bits = 0;
      if (k == 1) bits = ~uint64_t{0};                       // -1 / max unsigned
      if (k == 2) bits = uint64_t{1} << (sz * 8 - 1);         // signed min
      if (k == 3) bits = (uint64_t{1} << (sz * 8 - 1)) - 1;   // signed max
      std::memcpy(p + i * sz, &bits, sz);
    }
  }
}

const dcclDataType_t kTypes[] = {dcclInt8, dcclUint8, dcclInt32, dcclUint32, dcclInt64,
                                 dcclUint64, dcclFloat16, dcclFloat32, dcclFloat64, dcclBfloat16};
const dcclRedOp_t kOps[] = {dcclSum, dcclProd, dcclMax, dcclMin, dcclAvg};
const size_t kCounts[] = {0, 1, 7, 33, 1000, 4097};
enum class Alias { None, DstIsA, DstIsB, All };

struct Param {
  dcclDataType_t dt;
  dcclRedOp_t op;
  Isa isa;
};

class ReduceAll : public ::testing::TestWithParam<Param> {};

TEST_P(ReduceAll, MatchesReference) {
  const auto [dt, op, isa] = GetParam();
  if (!rd::isa_supported(isa)) GTEST_SKIP() << rd::isa_name(isa) << " not supported here";
  const size_t sz = dccl::core::dtype_size(dt);
  std::mt19937_64 rng(1234 + 17 * dt + 131 * op);
  for (size_t n : kCounts) {
    for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB, Alias::All}) {
      // Distinct misalignments: a at +0, b at +1, dst at +2 elements; 16 guard elements.
      const size_t cap = (n + 19) * sz;
      std::vector<uint8_t> A(cap, 0x5a), B(cap, 0x5a), D(cap, 0xa5);
      uint8_t* a = A.data();
      uint8_t* b = B.data() + sz;
      fill(dt, a, n, rng);
      fill(dt, b, n, rng);
      if (alias == Alias::All) b = a;
      std::vector<uint8_t> want(n * sz + 1);
      for (size_t i = 0; i < n; ++i) ref_elem(dt, op, a + i * sz, b + i * sz, want.data() + i * sz);
      uint8_t* d = alias == Alias::None ? D.data() + 2 * sz : (alias == Alias::DstIsB ? b : a);
      const std::vector<uint8_t> before(d + n * sz, d + (n + 16) * sz);
      rd::reduce_isa(isa, d, a, b, n, dt, op);
      SCOPED_TRACE("count " + std::to_string(n) + " alias " + std::to_string(int(alias)));
      int bad = 0;
      for (size_t i = 0; i < n && bad < 5; ++i) {
        if (!same(dt, op, d + i * sz, want.data() + i * sz)) {
          ++bad;
          ADD_FAILURE() << "element " << i << " got " << as_double(dt, d + i * sz) << " want "
                        << as_double(dt, want.data() + i * sz);
        }
      }
      EXPECT_EQ(0, std::memcmp(before.data(), d + n * sz, before.size())) << "wrote past count";
    }
  }
}

std::vector<Param> all_params() {
  std::vector<Param> v;
  for (Isa isa : {Isa::Generic, Isa::Avx2})
    for (auto dt : kTypes)
      for (auto op : kOps) v.push_back({dt, op, isa});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceAll, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::string(rd::isa_name(i.param.isa) == std::string("generic") ? "generic" : "avx2") +
                                  "_" + dccl::core::dtype_name(i.param.dt) + "_" +
                                  dccl::core::op_name(i.param.op);
                         });


// ---------------------------------------------------------------------------
// Scalar conversions: known bit patterns.

float fbits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t bitsf(float f) { return std::bit_cast<uint32_t>(f); }
bool f16_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
bool b16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

TEST(Float16, KnownRounding) {
  EXPECT_EQ(0x3c00, float_to_half(1.0f));
  EXPECT_EQ(0x3c00, float_to_half(1.0f + 0x1p-11f));                // tie -> even (down)
  EXPECT_EQ(0x3c02, float_to_half(1.0f + 3 * 0x1p-11f));            // tie -> even (up)
  EXPECT_EQ(0x3c01, float_to_half(1.0f + 0x1p-11f + 0x1p-20f));     // just above the tie
  EXPECT_EQ(0x3c00, float_to_half(1.0f + 0x1p-11f - 0x1p-23f));     // just below the tie
  EXPECT_EQ(0x7bff, float_to_half(65504.0f));                       // max finite
  EXPECT_EQ(0x7bff, float_to_half(65519.99f));
  EXPECT_EQ(0x7c00, float_to_half(65520.0f));                       // tie with max -> inf
  EXPECT_EQ(0x7c00, float_to_half(1e6f));
  EXPECT_EQ(0xfc00, float_to_half(-1e6f));
  EXPECT_EQ(0x7c00, float_to_half(INFINITY));
  EXPECT_EQ(0xfc00, float_to_half(-INFINITY));
  EXPECT_EQ(0x0400, float_to_half(0x1p-14f));                       // min normal
  EXPECT_EQ(0x0001, float_to_half(0x1p-24f));                       // min subnormal
  EXPECT_EQ(0x03ff, float_to_half(1023 * 0x1p-24f));                // max subnormal
  EXPECT_EQ(0x0400, float_to_half(1023.5f * 0x1p-24f));             // tie -> even -> min normal
  EXPECT_EQ(0x0000, float_to_half(0x1p-25f));                       // tie -> 0
  EXPECT_EQ(0x0001, float_to_half(0x1p-25f * 1.0000001f));
  EXPECT_EQ(0x0002, float_to_half(3 * 0x1p-25f));                   // tie -> even 2
  EXPECT_EQ(0x8001, float_to_half(-0x1p-24f));
  EXPECT_EQ(0x0000, float_to_half(1e-30f));
  EXPECT_EQ(0x8000, float_to_half(-1e-30f));
  EXPECT_EQ(0x8000, float_to_half(-0.0f));
  EXPECT_EQ(0xc000, float_to_half(-2.0f));
  EXPECT_TRUE(f16_nan(float_to_half(NAN)));
  EXPECT_TRUE(f16_nan(float_to_half(fbits(0x7f800001))));  // payload only in low bits: still NaN
  EXPECT_TRUE(f16_nan(float_to_half(fbits(0xffc00000))));
  EXPECT_EQ(1.0f, half_to_float(0x3c00));
  EXPECT_EQ(65504.0f, half_to_float(0x7bff));
  EXPECT_EQ(0x1p-24f, half_to_float(0x0001));
  EXPECT_EQ(0x1p-14f, half_to_float(0x0400));
  EXPECT_EQ(0x80000000u, bitsf(half_to_float(0x8000)));
  EXPECT_EQ(-INFINITY, half_to_float(0xfc00));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7c01)));
}

TEST(Bfloat16, KnownRounding) {
  EXPECT_EQ(0x3f80, float_to_bf16(1.0f));
  EXPECT_EQ(0x3f80, float_to_bf16(fbits(0x3f808000)));  // tie -> even (down)
  EXPECT_EQ(0x3f82, float_to_bf16(fbits(0x3f818000)));  // tie -> even (up)
  EXPECT_EQ(0x3f81, float_to_bf16(fbits(0x3f808001)));
  EXPECT_EQ(0x7f7f, float_to_bf16(fbits(0x7f7f7fff)));  // max finite
  EXPECT_EQ(0x7f80, float_to_bf16(fbits(0x7f7f8000)));  // tie with max -> inf
  EXPECT_EQ(0x7f80, float_to_bf16(FLT_MAX));
  EXPECT_EQ(0xff80, float_to_bf16(-FLT_MAX));
  EXPECT_EQ(0x0000, float_to_bf16(fbits(0x00008000)));  // subnormal tie -> 0
  EXPECT_EQ(0x0002, float_to_bf16(fbits(0x00018000)));  // subnormal tie -> even 2
  EXPECT_EQ(0x0001, float_to_bf16(fbits(0x00010001)));
  EXPECT_EQ(0x0080, float_to_bf16(fbits(0x007fffff)));  // max float subnormal -> min normal
  EXPECT_EQ(0x8000, float_to_bf16(-0.0f));
  EXPECT_TRUE(b16_nan(float_to_bf16(fbits(0x7f800001))));  // must not round to inf
  EXPECT_TRUE(b16_nan(float_to_bf16(fbits(0xff800001))));
  EXPECT_TRUE(b16_nan(float_to_bf16(fbits(0x7fffffff))));  // must not carry into the sign
  EXPECT_EQ(0xff80, float_to_bf16(-INFINITY));
  EXPECT_EQ(1.0f, bf16_to_float(0x3f80));
  EXPECT_EQ(0x80000000u, bitsf(bf16_to_float(0x8000)));
  EXPECT_TRUE(std::isnan(bf16_to_float(0x7fc1)));
}

TEST(Float16, ExhaustiveDecodeAndRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(uint16_t(h));
    const double ref = ref_f16(uint16_t(h));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_TRUE(f16_nan(float_to_half(f))) << h;
      continue;
    }
    ASSERT_EQ(ref, double(f)) << h;
    ASSERT_EQ(std::signbit(ref), std::signbit(f)) << h;
    ASSERT_EQ(h, float_to_half(f)) << h;
    const float b = bf16_to_float(uint16_t(h));
    if (!std::isnan(b)) {
      ASSERT_EQ(h, float_to_bf16(b)) << h;
    }
  }
}

TEST(HalfConvert, RandomFloatsMatchReferenceRounding) {
  std::mt19937 rng(7);
  for (int i = 0; i < (1 << 20); ++i) {
    uint32_t u = rng();
    if (i & 1) u = (u & 0x80ffffffu) | (uint32_t(100 + rng() % 50) << 23);  // near fp16's range
    const float f = fbits(u);
    const uint16_t h = float_to_half(f), b = float_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(f16_nan(h) && b16_nan(b)) << std::hex << u;
    } else {
      ASSERT_EQ(ref_to_f16(f), h) << std::hex << u;
      ASSERT_EQ(ref_to_b16(f), b) << std::hex << u;
    }
  }
}

#if REDUCE_TEST_X86
__attribute__((target("f16c"))) uint16_t hw_to_half(float f) { return uint16_t(_cvtss_sh(f, 0)); }
__attribute__((target("f16c"))) float hw_to_float(uint16_t h) { return _cvtsh_ss(h); }

TEST(HalfConvert, SoftwareMatchesF16cBitForBit) {
  if (!rd::isa_supported(Isa::Avx2)) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 0x10000; ++h)
    ASSERT_EQ(bitsf(hw_to_float(uint16_t(h))), bitsf(half_to_float(uint16_t(h)))) << std::hex << h;
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 20); ++i) {
    uint32_t u = rng();
    if (i & 1) u = (u & 0x80ffffffu) | (uint32_t(96 + rng() % 60) << 23);
    ASSERT_EQ(hw_to_half(fbits(u)), float_to_half(fbits(u))) << std::hex << u;
  }
}
#endif  // REDUCE_TEST_X86

// ---------------------------------------------------------------------------
// Reductions on known values. Each helper runs a long enough array (vector body
// plus tail) on every supported instruction set and checks all elements agree.

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::Generic};
  if (rd::isa_supported(Isa::Avx2)) v.push_back(Isa::Avx2);
  return v;
}

template <class T>
T reduce1(dcclDataType_t dt, dcclRedOp_t op, T x, T y) {
  constexpr size_t n = 77;
  T out{};
  bool first = true;
  for (Isa isa : isas()) {
    std::vector<T> a(n, x), b(n, y), d(n);
    rd::reduce_isa(isa, d.data(), a.data(), b.data(), n, dt, op);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(0, std::memcmp(&d[i], &d[0], sizeof(T))) << rd::isa_name(isa) << " element " << i;
    }
    if (!first) {
      EXPECT_EQ(0, std::memcmp(&out, &d[0], sizeof(T))) << rd::isa_name(isa) << " differs";
    }
    out = d[0];
    first = false;
  }
  return out;
}

template <class T>
T avg1(dcclDataType_t dt, T x, int nranks) {
  constexpr size_t n = 45;
  T out{};
  for (Isa isa : isas()) {
    std::vector<T> v(n, x);
    rd::finish_avg_isa(isa, v.data(), n, dt, nranks);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(0, std::memcmp(&v[i], &v[0], sizeof(T))) << i;
    out = v[0];
  }
  return out;
}

TEST(ReduceHalf, RoundsToNearestEven) {
  EXPECT_EQ(0x3c00, reduce1<uint16_t>(dcclFloat16, dcclSum, 0x3c00, 0x1000));  // 1 + 2^-11: tie down
  EXPECT_EQ(0x3c02, reduce1<uint16_t>(dcclFloat16, dcclSum, 0x3c01, 0x1000));  // tie up to even
  EXPECT_EQ(0x7c00, reduce1<uint16_t>(dcclFloat16, dcclSum, 0x7bff, 0x7bff));  // overflow -> inf
  EXPECT_EQ(0xfc00, reduce1<uint16_t>(dcclFloat16, dcclProd, 0xfbff, 0x4000)); // -65504*2 -> -inf
  EXPECT_EQ(0x0001, reduce1<uint16_t>(dcclFloat16, dcclSum, 0x0000, 0x0001));  // subnormal kept
  EXPECT_EQ(0x0000, reduce1<uint16_t>(dcclFloat16, dcclProd, 0x0001, 0x3800)); // 2^-25: tie -> 0
  EXPECT_EQ(0x0002, reduce1<uint16_t>(dcclFloat16, dcclProd, 0x0003, 0x3800)); // 1.5 ulp -> 2
  EXPECT_EQ(0x8000, reduce1<uint16_t>(dcclFloat16, dcclSum, 0x8000, 0x8000));  // -0 + -0 = -0
  EXPECT_EQ(0x0000, reduce1<uint16_t>(dcclFloat16, dcclSum, 0x8000, 0x0000));  // -0 + 0 = +0
  EXPECT_EQ(0x3f80, reduce1<uint16_t>(dcclBfloat16, dcclSum, 0x3f80, 0x3b80)); // 1 + 2^-8: tie down
  EXPECT_EQ(0x3f82, reduce1<uint16_t>(dcclBfloat16, dcclSum, 0x3f81, 0x3b80)); // tie up to even
  EXPECT_EQ(0x7f80, reduce1<uint16_t>(dcclBfloat16, dcclSum, 0x7f7f, 0x7f7f)); // overflow -> inf
  EXPECT_EQ(0x8000, reduce1<uint16_t>(dcclBfloat16, dcclSum, 0x8000, 0x8000));
  EXPECT_EQ(0x0001, reduce1<uint16_t>(dcclBfloat16, dcclMax, 0x0001, 0x8001)); // subnormals
}

TEST(ReduceHalf, NanPropagates) {
  for (dcclRedOp_t op : {dcclSum, dcclProd, dcclMax, dcclMin, dcclAvg}) {
    EXPECT_TRUE(f16_nan(reduce1<uint16_t>(dcclFloat16, op, 0x7e00, 0x3c00))) << op;
    EXPECT_TRUE(f16_nan(reduce1<uint16_t>(dcclFloat16, op, 0x3c00, 0x7e00))) << op;
    EXPECT_TRUE(f16_nan(reduce1<uint16_t>(dcclFloat16, op, 0x7c01, 0xfc00))) << op;  // signalling
    EXPECT_TRUE(b16_nan(reduce1<uint16_t>(dcclBfloat16, op, 0x7fc0, 0x3f80))) << op;
    EXPECT_TRUE(b16_nan(reduce1<uint16_t>(dcclBfloat16, op, 0x3f80, 0xff81))) << op;
    EXPECT_TRUE(std::isnan(reduce1<float>(dcclFloat32, op, NAN, 1.0f))) << op;
    EXPECT_TRUE(std::isnan(reduce1<float>(dcclFloat32, op, -1.0f, NAN))) << op;
    EXPECT_TRUE(std::isnan(reduce1<double>(dcclFloat64, op, NAN, INFINITY))) << op;
    EXPECT_TRUE(std::isnan(reduce1<double>(dcclFloat64, op, INFINITY, NAN))) << op;
  }
  EXPECT_TRUE(f16_nan(reduce1<uint16_t>(dcclFloat16, dcclSum, 0x7c00, 0xfc00)));  // inf - inf
  EXPECT_TRUE(std::isnan(reduce1<float>(dcclFloat32, dcclProd, 0.0f, INFINITY)));
}

TEST(ReduceInt, WrapsAround) {
  EXPECT_EQ(-128, reduce1<int8_t>(dcclInt8, dcclSum, 127, 1));
  EXPECT_EQ(0, reduce1<uint8_t>(dcclUint8, dcclSum, 255, 1));
  EXPECT_EQ(-128, reduce1<int8_t>(dcclInt8, dcclProd, -128, -1));
  EXPECT_EQ(0, reduce1<int8_t>(dcclInt8, dcclProd, 16, 16));
  EXPECT_EQ(36, reduce1<uint8_t>(dcclUint8, dcclProd, 250, 250));  // 62500 mod 256
  EXPECT_EQ(INT32_MIN, reduce1<int32_t>(dcclInt32, dcclSum, INT32_MAX, 1));
  EXPECT_EQ(1, reduce1<int32_t>(dcclInt32, dcclProd, INT32_MAX, INT32_MAX));
  EXPECT_EQ(0u, reduce1<uint32_t>(dcclUint32, dcclSum, UINT32_MAX, 1u));
  EXPECT_EQ(0u, reduce1<uint32_t>(dcclUint32, dcclProd, 65536u, 65536u));
  EXPECT_EQ(INT64_MIN, reduce1<int64_t>(dcclInt64, dcclSum, INT64_MAX, 1));
  EXPECT_EQ(INT64_MIN, reduce1<int64_t>(dcclInt64, dcclProd, INT64_MIN, -1));
  EXPECT_EQ(UINT64_MAX - 1, reduce1<uint64_t>(dcclUint64, dcclProd, UINT64_MAX, uint64_t{2}));
  EXPECT_EQ(uint64_t{0x0000000200000001ULL},
            reduce1<uint64_t>(dcclUint64, dcclProd, uint64_t{0x100000001ULL}, uint64_t{0x100000001ULL}));
  EXPECT_EQ(-6, reduce1<int64_t>(dcclInt64, dcclProd, -2, 3));
}

TEST(ReduceInt, MinMaxSignedness) {
  EXPECT_EQ(127, reduce1<int8_t>(dcclInt8, dcclMax, -128, 127));
  EXPECT_EQ(-128, reduce1<int8_t>(dcclInt8, dcclMin, 127, -128));
  EXPECT_EQ(-1, reduce1<int8_t>(dcclInt8, dcclMax, -1, -7));
  EXPECT_EQ(200, reduce1<uint8_t>(dcclUint8, dcclMax, 100, 200));
  EXPECT_EQ(100, reduce1<uint8_t>(dcclUint8, dcclMin, 200, 100));
  EXPECT_EQ(-5, reduce1<int32_t>(dcclInt32, dcclMax, -5, INT32_MIN));
  EXPECT_EQ(INT32_MIN, reduce1<int32_t>(dcclInt32, dcclMin, -5, INT32_MIN));
  EXPECT_EQ(0x80000000u, reduce1<uint32_t>(dcclUint32, dcclMax, 0x80000000u, 0x7fffffffu));
  EXPECT_EQ(0x7fffffffu, reduce1<uint32_t>(dcclUint32, dcclMin, 0x80000000u, 0x7fffffffu));
  EXPECT_EQ(-1, reduce1<int64_t>(dcclInt64, dcclMax, INT64_MIN, -1));
  EXPECT_EQ(INT64_MIN, reduce1<int64_t>(dcclInt64, dcclMin, INT64_MIN, INT64_MAX));
  EXPECT_EQ(UINT64_MAX, reduce1<uint64_t>(dcclUint64, dcclMax, uint64_t{1}, UINT64_MAX));
  EXPECT_EQ(uint64_t{1} << 63, reduce1<uint64_t>(dcclUint64, dcclMin, UINT64_MAX, uint64_t{1} << 63));
  EXPECT_EQ(-2.5f, reduce1<float>(dcclFloat32, dcclMax, -2.5f, -INFINITY));
  EXPECT_EQ(-INFINITY, reduce1<double>(dcclFloat64, dcclMin, -2.5, -INFINITY));
  EXPECT_EQ(0xc000, reduce1<uint16_t>(dcclFloat16, dcclMin, 0xc000, 0xbc00));   // min(-2, -1)
  EXPECT_EQ(0xbf80, reduce1<uint16_t>(dcclBfloat16, dcclMax, 0xc000, 0xbf80));  // max(-2, -1)
}

TEST(FinishAvg, Integers) {
  EXPECT_EQ(-3, avg1<int8_t>(dcclInt8, -7, 2));  // truncates toward zero
  EXPECT_EQ(3, avg1<int8_t>(dcclInt8, 7, 2));
  EXPECT_EQ(0, avg1<int8_t>(dcclInt8, -128, 200));  // nranks wider than the type
  EXPECT_EQ(1, avg1<uint8_t>(dcclUint8, 255, 200));
  EXPECT_EQ(-715827882, avg1<int32_t>(dcclInt32, INT32_MIN, 3));
  EXPECT_EQ(0x55555555u, avg1<uint32_t>(dcclUint32, UINT32_MAX, 3));
  EXPECT_EQ(INT64_MIN / 7, avg1<int64_t>(dcclInt64, INT64_MIN, 7));
  EXPECT_EQ(UINT64_MAX / 3, avg1<uint64_t>(dcclUint64, UINT64_MAX, 3));
  EXPECT_EQ(-9, avg1<int64_t>(dcclInt64, -9, 1));
}

TEST(FinishAvg, Floats) {
  EXPECT_EQ(1.0f / 3.0f, avg1<float>(dcclFloat32, 1.0f, 3));
  EXPECT_EQ(-2.5f, avg1<float>(dcclFloat32, -10.0f, 4));
  EXPECT_EQ(1.0 / 3.0, avg1<double>(dcclFloat64, 1.0, 3));
  EXPECT_TRUE(std::isnan(avg1<float>(dcclFloat32, NAN, 3)));
  EXPECT_EQ(0x3555, avg1<uint16_t>(dcclFloat16, 0x3c00, 3));   // 1/3 in fp16
  EXPECT_EQ(0x3eab, avg1<uint16_t>(dcclBfloat16, 0x3f80, 3));  // 1/3 in bf16
  EXPECT_EQ(0x0000, avg1<uint16_t>(dcclFloat16, 0x0001, 2));   // 2^-25: tie -> 0
  EXPECT_EQ(0x0002, avg1<uint16_t>(dcclFloat16, 0x0003, 2));  // 1.5 ulp -> 2
  EXPECT_EQ(0x7bff, avg1<uint16_t>(dcclFloat16, 0x7c00 - 1, 1));
  EXPECT_EQ(0xfc00, avg1<uint16_t>(dcclFloat16, 0xfc00, 8));  // -inf stays
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {  // against the reference over random values and nranks
    const uint16_t h = uint16_t(rng());
    const int n = 1 + int(rng() % 300);
    const uint16_t got16 = avg1<uint16_t>(dcclFloat16, h, n), gotb = avg1<uint16_t>(dcclBfloat16, h, n);
    const uint16_t want16 = ref_to_f16(ref_f16(h) / n), wantb = ref_to_b16(ref_b16(h) / n);
    if (f16_nan(h)) EXPECT_TRUE(f16_nan(got16));
    else EXPECT_EQ(want16, got16) << std::hex << h << " / " << std::dec << n;
    if (b16_nan(h)) EXPECT_TRUE(b16_nan(gotb));
    else EXPECT_EQ(wantb, gotb) << std::hex << h << " / " << std::dec << n;
  }
}

// ---------------------------------------------------------------------------
// Argument checks and dispatch.

template <class F>
dcclResult_t code_of(F f) {
  try {
    f();
  } catch (const dccl::core::Error& e) {
    return e.code();
  }
  return dcclSuccess;
}

TEST(ReduceArgs, Checked) {
  float a[8] = {}, b[8] = {}, d[8] = {};
  using dccl::kernels::finish_avg;
  using dccl::kernels::reduce;
  EXPECT_EQ(dcclSuccess, code_of([&] { reduce(nullptr, nullptr, nullptr, 0, dcclFloat32, dcclSum); }));
  EXPECT_EQ(dcclInvalidArgument, code_of([&] { reduce(d, a, b, 8, dcclNumTypes, dcclSum); }));
  EXPECT_EQ(dcclInvalidArgument, code_of([&] { reduce(d, a, b, 8, dcclFloat32, dcclNumOps); }));
  EXPECT_EQ(dcclInvalidArgument, code_of([&] { reduce(d, a, b, 8, dcclFloat32, dcclRedOp_t(-1)); }));
  EXPECT_EQ(dcclInvalidArgument, code_of([&] { reduce(d, nullptr, b, 8, dcclFloat32, dcclSum); }));
  EXPECT_EQ(dcclInvalidUsage, code_of([&] { reduce(a + 1, a, b, 4, dcclFloat32, dcclSum); }));
  EXPECT_EQ(dcclInvalidUsage, code_of([&] { reduce(b, a, b + 2, 4, dcclFloat32, dcclSum); }));
  EXPECT_EQ(dcclSuccess, code_of([&] { reduce(a + 4, a, b, 4, dcclFloat32, dcclSum); }));  // adjacent
  EXPECT_EQ(dcclSuccess, code_of([&] { reduce(d, a, a + 1, 4, dcclFloat32, dcclSum); }));  // a/b overlap
  EXPECT_EQ(dcclInvalidArgument, code_of([&] { finish_avg(d, 8, dcclFloat32, 0); }));
  EXPECT_EQ(dcclInvalidArgument, code_of([&] { finish_avg(d, 8, dcclFloat32, -2); }));
  EXPECT_EQ(dcclInvalidArgument, code_of([&] { finish_avg(d, 8, dcclDataType_t(42), 2); }));
  EXPECT_EQ(dcclSuccess, code_of([&] { finish_avg(nullptr, 0, dcclInt32, 4); }));
}

TEST(ReduceArgs, PublicEntryUsesBestIsa) {
#if REDUCE_TEST_X86
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  const bool avx2 = __builtin_cpu_supports("avx2") && f16c;
#else
  const bool avx2 = false;  // off x86 only the baseline is built
#endif
  EXPECT_EQ(avx2 ? Isa::Avx2 : Isa::Generic, rd::best_isa());
  std::vector<float> a(100, 1.5f), b(100, 2.0f), d(100);
  dccl::kernels::reduce(d.data(), a.data(), b.data(), d.size(), dcclFloat32, dcclAvg);
  dccl::kernels::finish_avg(d.data(), d.size(), dcclFloat32, 2);
  for (float v : d) EXPECT_EQ(1.75f, v);
}

// The public entry adds up to 16 float32 sums directly: every count around that
// bound, in place on either source and out of place, against float64 sums rounded
// to float (exact for one add) and bit for bit against the generic kernel.
TEST(ReduceArgs, TinyFloatSumsMatchReference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1e6f, 1e6f);
  for (size_t n = 1; n <= 20; ++n) {
    for (int where = 0; where < 3; ++where) {  // 0: out of place, 1: dst == a, 2: dst == b
      std::vector<float> a(n), b(n), d(n), ref(n), gen(n);
      for (size_t i = 0; i < n; ++i) a[i] = u(rng), b[i] = u(rng);
      if (n > 2) a[0] = -0.0f, b[0] = -0.0f, a[1] = INFINITY, b[2] = NAN;
      for (size_t i = 0; i < n; ++i) ref[i] = static_cast<float>(double(a[i]) + double(b[i]));
      rd::reduce_isa(Isa::Generic, gen.data(), a.data(), b.data(), n, dcclFloat32, dcclSum);
      float* dst = where == 0 ? d.data() : where == 1 ? a.data() : b.data();
      dccl::kernels::reduce(dst, a.data(), b.data(), n, dcclFloat32, dcclSum);
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(ref[i])) {
          EXPECT_TRUE(std::isnan(dst[i])) << n << " " << i;
          continue;
        }
        EXPECT_EQ(std::bit_cast<uint32_t>(ref[i]), std::bit_cast<uint32_t>(dst[i])) << "n " << n << " i " << i << " where " << where;
        EXPECT_EQ(std::bit_cast<uint32_t>(gen[i]), std::bit_cast<uint32_t>(dst[i])) << "n " << n << " i " << i;
      }
    }
  }
}

}  // namespace
