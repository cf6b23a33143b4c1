// Text for the segment algorithms' call descriptors (coll/segment_wait.hpp).
#include "coll/segment_wait.hpp"

namespace dccl::coll {

std::string chunk_call_text(uint64_t call) {
  static const char* const colls[] = {"no call", "all_reduce", "all_gather", "reduce_scatter"};
  const uint64_t coll = call >> 56;
  const int dt = static_cast<int>((call >> 48) & 0xff), op = static_cast<int>((call >> 40) & 0xff);
  std::string s = coll < 4 ? colls[coll] : "collective " + std::to_string(coll);
  s += " of " + std::to_string(call & ((uint64_t{1} << 40) - 1)) + " x ";
  s += core::dtype_valid(dt) ? core::dtype_name(static_cast<dcclDataType_t>(dt)) : "type " + std::to_string(dt);
  if (coll == static_cast<uint64_t>(ChunkColl::AllGather)) return s;
  s += " (";
  s += core::op_valid(op) ? core::op_name(static_cast<dcclRedOp_t>(op)) : "op " + std::to_string(op);
  return s + ")";
}

}  // namespace dccl::coll
