// Test data for the multi-process checks: deterministic inputs any rank can
// regenerate for any other rank, an independent decoder of every datatype into
// float64, and per-dtype tolerances. Shares no code with the library.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dccl/dccl.h"

namespace check {

inline size_t esize(dcclDataType_t t) {
  static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return s[t];
}
inline bool is_float(dcclDataType_t t) {
  return t == dcclFloat16 || t == dcclBfloat16 || t == dcclFloat32 || t == dcclFloat64;
}
inline bool is_unsigned(dcclDataType_t t) { return t == dcclUint8 || t == dcclUint32 || t == dcclUint64; }

// IEEE binary16 decode, written from the format definition.
inline double decode_f16(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) v = std::ldexp(m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
inline double decode_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
// Exact encodings for values that are representable (test inputs only).
inline uint16_t encode_f16_exact(double v) {
  if (v == 0) return 0;
  uint16_t s = v < 0 ? 0x8000 : 0;
  double a = std::fabs(v);
  int e;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int be = e - 1 + 15;
  if (be <= 0) return static_cast<uint16_t>(s | static_cast<uint16_t>(std::ldexp(a, 24)));
  return static_cast<uint16_t>(s | (be << 10) | (static_cast<int>(std::ldexp(m, 11)) & 0x3ff));
}
inline uint16_t encode_bf16_exact(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

inline double get(const void* buf, size_t i, dcclDataType_t t) {
  const char* p = static_cast<const char*>(buf) + i * esize(t);
  switch (t) {
    case dcclInt8: return *reinterpret_cast<const int8_t*>(p);
    case dcclUint8: return *reinterpret_cast<const uint8_t*>(p);
    case dcclInt32: { int32_t v; memcpy(&v, p, 4); return v; }
    case dcclUint32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case dcclInt64: { int64_t v; memcpy(&v, p, 8); return static_cast<double>(v); }
    case dcclUint64: { uint64_t v; memcpy(&v, p, 8); return static_cast<double>(v); }
    case dcclFloat16: { uint16_t v; memcpy(&v, p, 2); return decode_f16(v); }
    case dcclBfloat16: { uint16_t v; memcpy(&v, p, 2); return decode_bf16(v); }
    case dcclFloat32: { float v; memcpy(&v, p, 4); return v; }
    case dcclFloat64: { double v; memcpy(&v, p, 8); return v; }
    default: return NAN;
  }
}

inline void put(void* buf, size_t i, dcclDataType_t t, double v) {
  char* p = static_cast<char*>(buf) + i * esize(t);
  switch (t) {
    case dcclInt8: { int8_t x = static_cast<int8_t>(v); memcpy(p, &x, 1); break; }
    case dcclUint8: { uint8_t x = static_cast<uint8_t>(v); memcpy(p, &x, 1); break; }
    case dcclInt32: { int32_t x = static_cast<int32_t>(v); memcpy(p, &x, 4); break; }
    case dcclUint32: { uint32_t x = static_cast<uint32_t>(v); memcpy(p, &x, 4); break; }
    case dcclInt64: { int64_t x = static_cast<int64_t>(v); memcpy(p, &x, 8); break; }
    case dcclUint64: { uint64_t x = static_cast<uint64_t>(v); memcpy(p, &x, 8); break; }
    case dcclFloat16: { uint16_t x = encode_f16_exact(v); memcpy(p, &x, 2); break; }
    case dcclBfloat16: { uint16_t x = encode_bf16_exact(v); memcpy(p, &x, 2); break; }
    case dcclFloat32: { float x = static_cast<float>(v); memcpy(p, &x, 4); break; }
    case dcclFloat64: memcpy(p, &v, 8); break;
    default: break;
  }
}

// Input of `rank` at element i for a reduction op. Small values keep sums and
// products exact in every type for up to 8 ranks; floats get fractions k/64 with
// `frac`, which are exact inputs but make bf16 sums round.
inline double input(int rank, size_t i, dcclDataType_t t, dcclRedOp_t op, bool frac) {
  uint64_t h = (static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ULL) ^ (i * 0xC2B2AE3D27D4EB4FULL);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 32;
  if (op == dcclProd) {
    int k = static_cast<int>(h % 4);
    if (is_unsigned(t)) return k == 0 ? 2 : 1;
    return k == 0 ? 2 : k == 1 ? -1 : 1;
  }
  if (frac && is_float(t)) return (static_cast<int>(h % 129) - 64) / 64.0;
  if (is_unsigned(t)) return static_cast<double>(h % 11);
  return static_cast<double>(static_cast<int>(h % 11) - 5);
}

// Element value for data-movement collectives: a function of (rank, i) that is
// exact in every type and different between neighbours.
inline double tag_value(int rank, size_t i, dcclDataType_t t) {
  double v = static_cast<double>((rank * 37 + i * 11) % 97);
  if (t == dcclInt8) v -= 48;
  return v;
}

// Wrap an exact integer result into the type, like two's complement hardware.
inline double wrap(double v, dcclDataType_t t) {
  switch (t) {
    case dcclInt8: return static_cast<int8_t>(static_cast<int64_t>(v));
    case dcclUint8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case dcclInt32: return static_cast<int32_t>(static_cast<int64_t>(v));
    case dcclUint32: return static_cast<uint32_t>(static_cast<int64_t>(v));
    default: return v;
  }
}

inline double eps(dcclDataType_t t) {
  switch (t) {
    case dcclFloat16: return std::ldexp(1.0, -11);
    case dcclBfloat16: return std::ldexp(1.0, -8);
    case dcclFloat32: return std::ldexp(1.0, -24);
    case dcclFloat64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

// Reference reduction of every rank's input at element i, in float64 / exact integers.
struct Ref {
  double value;
  double tol;
};
inline Ref reference(int nranks, size_t i, dcclDataType_t t, dcclRedOp_t op, bool frac) {
  double acc = input(0, i, t, op, frac), mag = std::fabs(acc);
  for (int r = 1; r < nranks; ++r) {
    double x = input(r, i, t, op, frac);
    mag += std::fabs(x);
    switch (op) {
      case dcclSum: case dcclAvg: acc += x; break;
      case dcclProd: acc *= x; break;
      case dcclMax: acc = x > acc ? x : acc; break;
      case dcclMin: acc = x < acc ? x : acc; break;
      default: break;
    }
  }
  if (!is_float(t)) {
    acc = wrap(acc, t);
    if (op == dcclAvg) acc = std::trunc(acc / nranks);
    return {acc, 0};
  }
  double tol = eps(t) * (nranks * mag + std::fabs(acc));
  if (op == dcclAvg) {
    acc /= nranks;
    tol = tol / nranks + 2 * eps(t) * std::fabs(acc);
  }
  return {acc, tol};
}

}  // namespace check
