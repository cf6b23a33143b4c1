// Text for the segment algorithms' call descriptors (coll/segment_wait.hpp).
#include "coll/segment_wait.hpp"

namespace dccl::coll {

std::string chunk_call_text(uint64_t call) {
  static const char* const colls[] = {"no call", "all_reduce", "all_gather", "reduce_scatter"};
  const uint64_t coll = call >> 62;
  const int dt = static_cast<int>((call >> 58) & 0xf), op = static_cast<int>((call >> 55) & 0x7);
  const unsigned step = static_cast<unsigned>((call >> 39) & 0xffff);
  std::string s = colls[coll];
  s += " of " + std::to_string(call & ((uint64_t{1} << 39) - 1)) + " x ";
  s += core::dtype_valid(dt) ? core::dtype_name(static_cast<dcclDataType_t>(dt)) : "type " + std::to_string(dt);
  if (coll != static_cast<uint64_t>(ChunkColl::AllGather)) {
    s += " (";
    s += core::op_valid(op) || op == core::kPreMulOp ? core::wire_op_name(op) : "op " + std::to_string(op);
    s += ")";
  }
  // A hierarchical call's step: the call it belongs to, as a mark (another call, or
  // a call that differs between ranks, has another one).
  if (step) s += " as a step of the parent communicator's call marked " + std::to_string(step);
  return s;
}

}  // namespace dccl::coll
