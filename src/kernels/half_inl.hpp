// Inline, branch-free float16 / bfloat16 <-> float32 conversions (round to
// nearest even). The baseline reduction loops use these directly so the
// compiler can inline and vectorise them; half.cc exports them.
#pragma once
#include <bit>
#include <cstdint>

namespace dccl::kernels::half_detail {

// ---- IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits ----

// Both conversions are written without branches so that the baseline loops
// vectorise; they give the same bits as F16C's VCVTPH2PS and VCVTPS2PH with
// round-to-nearest-even (the tests check all of that).

// c ? a : b with masks: GCC keeps a plain ?: next to float arithmetic as a
// branch (-ftrapping-math), which stops vectorisation.
inline uint32_t select(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - uint32_t(c);
  return (a & m) | (b & ~m);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = h & 0x7c00u;
  const uint32_t body = uint32_t(h & 0x7fffu) << 13;  // exponent and mantissa in float position
  const uint32_t normal = body + 0x38000000u;          // rebias 15 -> 127
  // Inf/NaN: exponent 31 -> 255; a NaN is quietened, its payload kept.
  const uint32_t special = (body + 0x70000000u) | select((h & 0x3ffu) != 0, 0x00400000u, 0u);
  // Zero/subnormal: 2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24, exact in float32.
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(body + 0x38800000u) - 0x1p-14f);
  const uint32_t mag = select(exp == 0, sub, select(exp == 0x7c00u, special, normal));
  return std::bit_cast<float>(sign | mag);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  // Normal result: rebias 127 -> 15 and round the 13 dropped bits to nearest
  // even (add 0xfff + lsb; a carry into the exponent is the right answer).
  // Wraps for small ax, where it is not selected.
  const uint32_t normal = (ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13;
  // Subnormal result (|f| < 2^-14): in |f| + 0.5 the unit in the last place is
  // 2^-24, so the FPU rounds |f| to the nearest even multiple of 2^-24 for us
  // (in the default rounding mode, which every float op here assumes).
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(ax) + 0.5f) - 0x3f000000u;
  const uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);  // quiet, payload's top bits
  uint32_t r = select(ax < 0x38800000u, sub, normal);
  r = select(ax >= 0x477ff000u, 0x7c00u, r);  // >= 65520 rounds past 65504: inf
  r = select(ax > 0x7f800000u, nan, r);
  return uint16_t(sign | r);
}

// ---- bfloat16: the top 16 bits of a float32 ----

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  // NaN: truncate and force the quiet bit so the payload cannot round to inf.
  const uint32_t nan = (u >> 16) | 0x40u;
  // Round to nearest even: add 0x7fff plus the lsb of the kept part. Overflow
  // carries into the exponent, giving inf; subnormals need nothing special.
  const uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}

}  // namespace dccl::kernels::half_detail
