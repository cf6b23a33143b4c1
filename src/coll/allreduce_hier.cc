// Hierarchical allreduce (see hier.hpp). Averages are summed at every level and
// divided once at the end, so integer averages truncate as the flat ones do.
#include "coll/hier.hpp"
#include "core/types.hpp"

namespace dccl::coll {

void allreduce_hier(Levels& lv, const SubOp& a) {
  const size_t es = core::dtype_size(a.dt);
  const int L = lv.local_size();
  SubOp s = a;
  s.op = a.op == dcclAvg ? dcclSum : a.op;
  const size_t shard = a.count / static_cast<size_t>(L);
  if (a.count * es <= kHierShardBytes || shard == 0) {
    s.coll = SubColl::AllReduce;
    lv.local(s);  // recv = this host's sum
    s.send = a.recv;
    lv.cross(s);  // in place: every local rank, its own cross-host communicator
  } else {
    // Local rank l owns elements [l*shard, (l+1)*shard); the tail (count % L) goes
    // the small way afterwards.
    char* mine = static_cast<char*>(a.recv) + static_cast<size_t>(lv.local_rank()) * shard * es;
    s.coll = SubColl::ReduceScatter;
    s.count = shard;
    s.recv = mine;  // in place when send == recv (recv = send + l*shard)
    lv.local(s);
    s.coll = SubColl::AllReduce;
    s.send = mine;
    lv.cross(s);
    s.coll = SubColl::AllGather;
    s.recv = a.recv;  // in place: send = recv + l*shard
    lv.local(s);
    const size_t done = shard * static_cast<size_t>(L);
    if (done < a.count) {
      s.coll = SubColl::AllReduce;
      s.count = a.count - done;
      s.send = static_cast<const char*>(a.send) + done * es;
      s.recv = static_cast<char*>(a.recv) + done * es;
      lv.local(s);
      s.send = s.recv;
      lv.cross(s);
    }
  }
  if (a.op == dcclAvg) lv.divide(a.recv, a.count, a.dt, L * lv.hosts());
}

}  // namespace dccl::coll
