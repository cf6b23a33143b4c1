// Hierarchical broadcast (see hier.hpp): the root's peers of the same local rank
// take the data across hosts, then each host broadcasts from that local rank.
#include "coll/hier.hpp"

namespace dccl::coll {

void broadcast_hier(Hierarchy& lv, const SubOp& a) {
  expect_coll(a, SubColl::Broadcast, "broadcast_hier");
  const int root_host = lv.host_of(a.root), root_local = lv.local_of(a.root);
  SubOp s = a;
  s.coll = SubColl::Broadcast;
  if (lv.local_rank() == root_local) {
    s.root = root_host;
    lv.cross(s);
    s.send = a.recv;  // the data is in recv now, on every host
  }
  s.root = root_local;
  if (lv.local_rank() != root_local) s.send = a.recv;
  lv.local(s);
}

}  // namespace dccl::coll
