// Host reduction entry points: argument checks, instruction-set choice (once
// per process) and dispatch to the per-family kernels.
#include "kernels/reduce.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "kernels/kernels.hpp"
#include "core/error.hpp"
#include "core/types.hpp"

namespace dccl::kernels {
namespace {
constexpr size_t kTinySum = 16;  // elements
}  // namespace
namespace reduce_detail {
namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports("avx2") also checks that the OS saves AVX state;
  // F16C is read from CPUID directly (older compilers lack the "f16c" name).
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  return __builtin_cpu_supports("avx2") && f16c;
#else
  return false;
#endif
}

enum class Family { Int, Float, Half };

Family family(dcclDataType_t dt) {
  switch (dt) {
    case dcclFloat32: case dcclFloat64: return Family::Float;
    case dcclFloat16: case dcclBfloat16: return Family::Half;
    default: return Family::Int;
  }
}

void check_type(dcclDataType_t dt, const char* what) {
  if (!core::dtype_valid(dt))
    core::raise(dcclInvalidArgument, std::string(what) + ": invalid datatype " + std::to_string(int(dt)));
}

void check_isa(Isa isa, const char* what) {
  if (!isa_supported(isa))
    core::raise(dcclInvalidUsage, std::string(what) + ": instruction set " + isa_name(isa) +
                                      " is not supported by this CPU");
}

}  // namespace

// dst may equal a or b, but must not overlap either partially.
bool overlaps_partially(const void* dst, const void* src, size_t bytes) {
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  return d != s && d < s + bytes && s < d + bytes;
}

Isa best_isa() {
  static const Isa isa = cpu_has_avx2() ? Isa::Avx2 : Isa::Generic;
  return isa;
}

bool isa_supported(Isa isa) {
  return isa == Isa::Generic || (isa == Isa::Avx2 && best_isa() == Isa::Avx2);
}

const char* isa_name(Isa isa) { return isa == Isa::Avx2 ? "avx2+f16c" : "generic"; }

void reduce_isa(Isa isa, void* dst, const void* a, const void* b, size_t count,
                dcclDataType_t dt, dcclRedOp_t op) {
  check_type(dt, "reduce");
  if (!core::op_valid(op))
    core::raise(dcclInvalidArgument, "reduce: invalid reduction op " + std::to_string(int(op)));
  check_isa(isa, "reduce");
  if (count == 0) return;
  if (!dst || !a || !b) core::raise(dcclInvalidArgument, "reduce: null buffer");
  const size_t bytes = count * core::dtype_size(dt);
  if (overlaps_partially(dst, a, bytes) || overlaps_partially(dst, b, bytes))
    core::raise(dcclInvalidUsage, "reduce: destination partially overlaps a source");
  switch (family(dt)) {
    case Family::Int: reduce_int(isa, dst, a, b, count, dt, op); break;
    case Family::Float: reduce_float(isa, dst, a, b, count, dt, op); break;
    case Family::Half: reduce_half(isa, dst, a, b, count, dt, op); break;
  }
}

void finish_avg_isa(Isa isa, void* buf, size_t count, dcclDataType_t dt, int nranks) {
  check_type(dt, "finish_avg");
  if (nranks <= 0)
    core::raise(dcclInvalidArgument, "finish_avg: nranks must be positive, got " + std::to_string(nranks));
  check_isa(isa, "finish_avg");
  if (count == 0 || nranks == 1) return;
  if (!buf) core::raise(dcclInvalidArgument, "finish_avg: null buffer");
  switch (family(dt)) {
    case Family::Int: avg_int(buf, count, dt, nranks); break;
    case Family::Float: avg_float(isa, buf, count, dt, nranks); break;
    case Family::Half: avg_half(isa, buf, count, dt, nranks); break;
  }
}

}  // namespace reduce_detail

void reduce(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
            dcclRedOp_t op) {
  // A few float32 sums (a loss, a norm, a flag: the small allreduces of a training
  // step) are added here directly: the checks and the vector kernel's set-up cost
  // more than the adds. Same results: each element is a[i] + b[i] either way.
  if (dt == dcclFloat32 && op == dcclSum && count <= kTinySum && dst && a && b) {
    const size_t bytes = count * sizeof(float);
    if (!reduce_detail::overlaps_partially(dst, a, bytes) && !reduce_detail::overlaps_partially(dst, b, bytes)) {
      // Element by element (fixed-size copies: no alignment assumed, no library
      // call); dst may be a or b, each element is read before it is written.
      const char* pa = static_cast<const char*>(a);
      const char* pb = static_cast<const char*>(b);
      char* pd = static_cast<char*>(dst);
      for (size_t i = 0; i < bytes; i += sizeof(float)) {
        float x, y;
        memcpy(&x, pa + i, sizeof x);
        memcpy(&y, pb + i, sizeof y);
        x += y;
        memcpy(pd + i, &x, sizeof x);
      }
      return;
    }
  }
  reduce_detail::reduce_isa(reduce_detail::best_isa(), dst, a, b, count, dt, op);
}

void finish_avg(void* buf, size_t count, dcclDataType_t dt, int nranks) {
  reduce_detail::finish_avg_isa(reduce_detail::best_isa(), buf, count, dt, nranks);
}

}  // namespace dccl::kernels
