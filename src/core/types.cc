#include "core/types.hpp"

namespace dccl::core {

const char* dtype_name(dcclDataType_t t) {
  static const char* n[] = {"int8", "uint8", "int32", "uint32", "int64",
                            "uint64", "float16", "float32", "float64", "bfloat16"};
  return dtype_valid(t) ? n[t] : "invalid";
}

const char* op_name(dcclRedOp_t o) {
  static const char* n[] = {"sum", "prod", "max", "min", "avg"};
  return op_valid(o) ? n[o] : "invalid";
}

const char* wire_op_name(int o) {
  if (o == kPreMulOp) return "premulsum";
  return op_name(static_cast<dcclRedOp_t>(o));
}

}  // namespace dccl::core
