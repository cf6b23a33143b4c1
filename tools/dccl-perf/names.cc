// dccl-perf's names: collectives, datatypes and reduction operators as
// nccl-tests spells them on its command line and in its table; see expect.hpp.
#include "expect.hpp"

#include <algorithm>
#include <string>

namespace dcclperf {
namespace {

struct TypeInfo {
  const char* label;
  dcclDataType_t type;
};
constexpr TypeInfo kTypes[] = {
    {"int8", dcclInt8},       {"uint8", dcclUint8},        {"int32", dcclInt32},
    {"uint32", dcclUint32},   {"int64", dcclInt64},        {"uint64", dcclUint64},
    {"half", dcclFloat16},    {"float", dcclFloat32},      {"double", dcclFloat64},
    {"bfloat16", dcclBfloat16}};

}  // namespace

bool parse_coll(const std::string& in, Coll* out) {
  std::string s = in;
  if (s.size() > 5 && s.compare(s.size() - 5, 5, "_perf") == 0) s.resize(s.size() - 5);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  static const struct { const char* name; Coll c; } names[] = {
      {"allreduce", Coll::AllReduce}, {"allgather", Coll::AllGather},
      {"reducescatter", Coll::ReduceScatter}, {"broadcast", Coll::Broadcast},
      {"reduce", Coll::Reduce}, {"alltoall", Coll::AllToAll}, {"sendrecv", Coll::SendRecv}};
  for (const auto& n : names) {
    if (s == n.name) { *out = n.c; return true; }
  }
  return false;
}

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllToAll: return "alltoall";
    case Coll::SendRecv: return "sendrecv";
  }
  return "?";
}

bool coll_has_op(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce;
}
bool coll_has_root(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }
bool in_place_checked(Coll c) { return c != Coll::SendRecv && c != Coll::AllToAll; }

bool parse_dtype(const std::string& s, dcclDataType_t* out) {
  static const struct { const char* name; dcclDataType_t t; } aliases[] = {
      {"char", dcclInt8}, {"int", dcclInt32}, {"float16", dcclFloat16}, {"fp16", dcclFloat16},
      {"float32", dcclFloat32}, {"fp32", dcclFloat32}, {"float64", dcclFloat64},
      {"fp64", dcclFloat64}, {"bf16", dcclBfloat16}};
  for (const auto& t : kTypes) {
    if (s == t.label) { *out = t.type; return true; }
  }
  for (const auto& a : aliases) {
    if (s == a.name) { *out = a.t; return true; }
  }
  return false;
}

const char* dtype_label(dcclDataType_t t) {
  for (const auto& x : kTypes) {
    if (x.type == t) return x.label;
  }
  return "?";
}

size_t dtype_bytes(dcclDataType_t t) {
  switch (t) {
    case dcclInt8: case dcclUint8: return 1;
    case dcclFloat16: case dcclBfloat16: return 2;
    case dcclInt32: case dcclUint32: case dcclFloat32: return 4;
    case dcclInt64: case dcclUint64: case dcclFloat64: return 8;
    default: return 0;
  }
}

bool dtype_is_float(dcclDataType_t t) {
  return t == dcclFloat16 || t == dcclBfloat16 || t == dcclFloat32 || t == dcclFloat64;
}

bool parse_op(const std::string& s, dcclRedOp_t* out) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  for (int o = 0; o < dcclNumOps; ++o) {
    if (s == names[o]) { *out = static_cast<dcclRedOp_t>(o); return true; }
  }
  return false;
}

const char* op_label(dcclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < dcclNumOps ? names[op] : "?";
}

}  // namespace dcclperf
