// Dtype storage: IEEE binary16/bfloat16 encoding and the load/store of every
// dccl datatype through a double; see expect.hpp.
#include "expect.hpp"

#include <cmath>
#include <cstring>

namespace dcclperf {

uint64_t to_u64(double v) {
  if (v < 0) return static_cast<uint64_t>(static_cast<int64_t>(v));
  if (v >= 18446744073709551615.0) return ~uint64_t{0};
  return static_cast<uint64_t>(v);
}

uint32_t encode_float(double v, int mant, int exp) {
  const uint32_t sign = std::signbit(v) ? (1u << (mant + exp)) : 0u;
  const uint32_t exp_all = ((1u << exp) - 1u) << mant;
  if (std::isnan(v)) return sign | exp_all | (1u << (mant - 1));
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | exp_all;
  if (a == 0) return sign;
  const int bias = (1 << (exp - 1)) - 1;
  const int emin = 1 - bias;
  int e;
  std::frexp(a, &e);
  int x = e - 1;  // a = 1.f * 2^x
  if (x < emin) {  // subnormal; rounding up to 2^mant yields the smallest normal
    return sign | static_cast<uint32_t>(std::nearbyint(std::ldexp(a, mant - emin)));
  }
  double r = std::nearbyint(std::ldexp(a, mant - x));  // in [2^mant, 2^(mant+1)]
  if (r == std::ldexp(1.0, mant + 1)) {
    r = std::ldexp(1.0, mant);
    ++x;
  }
  if (x > bias) return sign | exp_all;  // overflow: infinity
  return sign | (static_cast<uint32_t>(x + bias) << mant) |
         (static_cast<uint32_t>(r) - (1u << mant));
}

double decode_float(uint32_t bits, int mant, int exp) {
  const uint32_t ef = (bits >> mant) & ((1u << exp) - 1u);
  const uint32_t frac = bits & ((1u << mant) - 1u);
  const int bias = (1 << (exp - 1)) - 1;
  double v;
  if (ef == (1u << exp) - 1u) {
    v = frac ? NAN : INFINITY;
  } else if (ef == 0) {
    v = std::ldexp(static_cast<double>(frac), 1 - bias - mant);
  } else {
    v = std::ldexp(static_cast<double>(frac + (1u << mant)), static_cast<int>(ef) - bias - mant);
  }
  return ((bits >> (mant + exp)) & 1u) ? -v : v;
}

void store(dcclDataType_t t, void* base, size_t i, double v) {
  char* p = static_cast<char*>(base) + i * dtype_bytes(t);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (t) {
    case dcclInt8: put(static_cast<int8_t>(to_u64(v))); break;
    case dcclUint8: put(static_cast<uint8_t>(to_u64(v))); break;
    case dcclInt32: put(static_cast<int32_t>(to_u64(v))); break;
    case dcclUint32: put(static_cast<uint32_t>(to_u64(v))); break;
    case dcclInt64: put(static_cast<int64_t>(to_u64(v))); break;
    case dcclUint64: put(to_u64(v)); break;
    case dcclFloat16: put(static_cast<uint16_t>(encode_float(v, 10, 5))); break;
    case dcclBfloat16: put(static_cast<uint16_t>(encode_float(v, 7, 8))); break;
    case dcclFloat32: put(static_cast<float>(v)); break;
    case dcclFloat64: put(v); break;
    default: break;
  }
}

double load(dcclDataType_t t, const void* base, size_t i) {
  const char* p = static_cast<const char*>(base) + i * dtype_bytes(t);
  auto get = [p](auto x) { std::memcpy(&x, p, sizeof(x)); return x; };
  switch (t) {
    case dcclInt8: return get(int8_t{});
    case dcclUint8: return get(uint8_t{});
    case dcclInt32: return get(int32_t{});
    case dcclUint32: return get(uint32_t{});
    case dcclInt64: return static_cast<double>(get(int64_t{}));
    case dcclUint64: return static_cast<double>(get(uint64_t{}));
    case dcclFloat16: return decode_float(get(uint16_t{}), 10, 5);
    case dcclBfloat16: return decode_float(get(uint16_t{}), 7, 8);
    case dcclFloat32: return get(float{});
    case dcclFloat64: return get(double{});
    default: return NAN;
  }
}

double round_to(dcclDataType_t t, double v) {
  unsigned char buf[8];
  store(t, buf, 0, v);
  return load(t, buf, 0);
}

}  // namespace dcclperf
