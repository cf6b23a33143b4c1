// Hierarchical reduce-scatter (see hier.hpp), for ranks numbered host by host:
// across hosts each local rank reduces its host's group of blocks with its peers
// (the same local rank on every host), then the host reduce-scatters that group.
#include "coll/hier.hpp"
#include "core/types.hpp"

namespace dccl::coll {

void reduce_scatter_hier(Hierarchy& lv, const SubOp& a) {
  expect_coll(a, SubColl::ReduceScatter, "reduce_scatter_hier");
  const size_t es = core::dtype_size(a.dt);
  const size_t group = a.count * static_cast<size_t>(lv.local_size());  // elements per host
  const size_t bytes = group * es;
  void* tmp = lv.temp(bytes > 0 ? bytes : 1, a.recv);
  SubOp s = a;
  s.op = a.op == dcclAvg ? dcclSum : a.op;
  s.coll = SubColl::ReduceScatter;
  s.count = group;
  s.recv = tmp;  // this host's group, summed over hosts for this local rank's peers
  lv.cross(s);
  s.send = tmp;
  s.recv = a.recv;
  s.count = a.count;
  lv.local(s);
  if (a.op == dcclAvg) lv.divide(a.recv, a.count, a.dt, lv.local_size() * lv.hosts());
}

}  // namespace dccl::coll
