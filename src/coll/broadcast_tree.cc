// Binomial-tree broadcast: ceil(log2 n) rounds, for latency-bound sizes.
#include <vector>

#include "coll/algos.hpp"
#include "coll/patterns/tree.hpp"

namespace dccl::coll {

void broadcast_tree(CallContext& c, const Args& a) {
  const size_t bytes = a.count * c.esize();
  if (a.count == 0) return;
  patterns::BinomialTree tree{c.rank(), c.nranks(), a.root};
  const void* src = a.recv;
  if (c.rank() == a.root) {
    c.copy(a.recv, a.send, bytes);
    src = a.send;
  } else {
    Xfer x;
    c.recv(tree.parent(), a.recv, bytes, 0, x);
    c.wait(x);
  }
  std::vector<int> kids = tree.children();
  std::vector<Xfer> xs(kids.size());
  for (size_t i = 0; i < kids.size(); ++i) c.send(kids[i], src, bytes, 0, xs[i]);
  c.wait_all(xs.data(), xs.size());
}

}  // namespace dccl::coll
