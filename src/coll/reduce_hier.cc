// Hierarchical reduce (see hier.hpp): each host reduces to its rank with the
// root's local rank, and those ranks reduce across hosts to the root.
#include "coll/hier.hpp"
#include "core/types.hpp"

namespace dccl::coll {

void reduce_hier(Hierarchy& lv, const SubOp& a) {
  expect_coll(a, SubColl::Reduce, "reduce_hier");
  const size_t bytes = a.count * core::dtype_size(a.dt);
  const int root_host = lv.host_of(a.root), root_local = lv.local_of(a.root);
  const bool is_root = lv.host() == root_host && lv.local_rank() == root_local;
  SubOp s = a;
  s.op = a.op == dcclAvg ? dcclSum : a.op;
  s.coll = SubColl::Reduce;
  // The host's partial result: the root's own recvbuff, scratch on the other hosts.
  void* part = is_root ? a.recv : lv.local_rank() == root_local ? lv.temp(bytes ? bytes : 1, a.send) : nullptr;
  s.root = root_local;
  s.recv = part;
  lv.local(s);
  if (lv.local_rank() == root_local) {
    s.send = part;  // in place at the root
    s.recv = is_root ? a.recv : nullptr;
    s.root = root_host;
    lv.cross(s);
  }
  if (is_root && a.op == dcclAvg) lv.divide(a.recv, a.count, a.dt, lv.local_size() * lv.hosts());
}

}  // namespace dccl::coll
