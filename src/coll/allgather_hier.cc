// Hierarchical allgather (see hier.hpp), for ranks numbered host by host: each
// host gathers its own blocks, then the hosts' block groups cross in place.
#include "coll/hier.hpp"
#include "core/types.hpp"

namespace dccl::coll {

void allgather_hier(Hierarchy& lv, const SubOp& a) {
  expect_coll(a, SubColl::AllGather, "allgather_hier");
  const size_t es = core::dtype_size(a.dt);
  const size_t group = a.count * static_cast<size_t>(lv.local_size());  // elements per host
  char* at = static_cast<char*>(a.recv) + static_cast<size_t>(lv.host()) * group * es;
  SubOp s = a;
  s.coll = SubColl::AllGather;
  s.recv = at;
  lv.local(s);
  s.send = at;
  s.recv = a.recv;
  s.count = group;
  lv.cross(s);
}

}  // namespace dccl::coll
