// Datatypes and reduction ops shared by every layer.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dccl/dccl.h"

namespace dccl::core {

inline size_t dtype_size(dcclDataType_t t) {
  switch (t) {
    case dcclInt8: case dcclUint8: return 1;
    case dcclFloat16: case dcclBfloat16: return 2;
    case dcclInt32: case dcclUint32: case dcclFloat32: return 4;
    case dcclInt64: case dcclUint64: case dcclFloat64: return 8;
    default: return 0;
  }
}
inline bool dtype_valid(int t) { return t >= 0 && t < dcclNumTypes; }
inline bool op_valid(int o) { return o >= 0 && o < dcclNumOps; }
const char* dtype_name(dcclDataType_t t);  // "float32", ...
const char* op_name(dcclRedOp_t o);        // "sum", ...
// The op as ranks must agree on it (call marks, the shared segment's call words,
// DCCL_CHECK signatures): a PreMulSum, run as dcclSum, is an op of its own, kPreMulOp
// (its scalar may differ between ranks; a plain sum may not pair with it).
constexpr int kPreMulOp = dcclNumOps;
inline int wire_op(dcclRedOp_t op, bool premul) { return premul ? kPreMulOp : static_cast<int>(op); }
// op_name of a wire op, "premulsum" for kPreMulOp ("invalid" for anything else).
const char* wire_op_name(int o);

}  // namespace dccl::core
