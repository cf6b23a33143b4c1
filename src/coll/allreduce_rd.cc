// Recursive-doubling allreduce: log2(p) full-vector exchanges, for latency-bound sizes.
#include "coll/algos.hpp"
#include "coll/fold.hpp"

namespace dccl::coll {

void allreduce_rd(CallContext& c, const Args& a) {
  const size_t bytes = a.count * c.esize();
  if (a.count == 0) return;
  char* buf = static_cast<char*>(a.recv);
  c.copy(buf, a.send, bytes);
  patterns::Rhd h(c.rank(), c.nranks());
  char* tmp = static_cast<char*>(c.scratch(bytes));
  fold_in(c, h, buf, tmp, a.count);
  if (!h.is_extra()) {
    int v = h.vrank();
    uint32_t step = 0;
    for (int dist = 1; dist < h.p; dist <<= 1, ++step) {
      int peer = h.peer_at_distance(dist);
      Xfer xs[2];
      c.recv(peer, tmp, bytes, step, xs[0]);
      c.send(peer, buf, bytes, step, xs[1]);
      c.wait_all(xs, 2);
      // Same operand order on both sides: the lower virtual rank's data first.
      if ((v & dist) == 0)
        c.reduce(buf, buf, tmp, a.count);
      else
        c.reduce(buf, tmp, buf, a.count);
    }
    c.finish_avg(buf, a.count);
  }
  fold_out(c, h, buf, a.count);
}

}  // namespace dccl::coll
