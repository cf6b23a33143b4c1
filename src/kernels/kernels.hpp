// Internal: the reduction kernels per datatype family and per instruction set.
// reduce.cc validates arguments and picks the instruction set once; tests call
// the *_isa entry points to check every path the CPU can run against a reference.
#pragma once
#include <cstddef>

#include "dccl/dccl.h"

namespace dccl::kernels::reduce_detail {

enum class Isa {
  Generic,  // the -march baseline (x86-64-v2): plain loops the compiler vectorises with SSE
  Avx2,     // AVX2 + F16C, chosen at run time where the CPU (and OS) support them
};

// The best instruction set this CPU runs; decided once.
Isa best_isa();
bool isa_supported(Isa isa);
const char* isa_name(Isa isa);

// Same contract as coll::reduce / coll::finish_avg, on an explicit instruction
// set (which must be supported). Arguments are validated.
void reduce_isa(Isa isa, void* dst, const void* a, const void* b, size_t count,
                dcclDataType_t dt, dcclRedOp_t op);
void finish_avg_isa(Isa isa, void* buf, size_t count, dcclDataType_t dt, int nranks);
// dst may equal a source but must not overlap it partially (refused otherwise).
bool overlaps_partially(const void* dst, const void* src, size_t bytes);

// Per-family kernels: arguments already validated, count > 0, op != dcclAvg
// (callers map avg to sum). Defined in reduce_int.cc, reduce_float.cc, reduce_half.cc.
void reduce_int(Isa isa, void* dst, const void* a, const void* b, size_t n, dcclDataType_t dt,
                dcclRedOp_t op);
void reduce_float(Isa isa, void* dst, const void* a, const void* b, size_t n, dcclDataType_t dt,
                  dcclRedOp_t op);
void reduce_half(Isa isa, void* dst, const void* a, const void* b, size_t n, dcclDataType_t dt,
                 dcclRedOp_t op);
void avg_int(void* buf, size_t n, dcclDataType_t dt, int nranks);
void avg_float(Isa isa, void* buf, size_t n, dcclDataType_t dt, int nranks);
void avg_half(Isa isa, void* buf, size_t n, dcclDataType_t dt, int nranks);

}  // namespace dccl::kernels::reduce_detail
