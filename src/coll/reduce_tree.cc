// Binomial-tree reduce: children's partial results are folded in bottom-up.
#include <vector>

#include "coll/algos.hpp"
#include "coll/patterns/tree.hpp"

namespace dccl::coll {

void reduce_tree(CallContext& c, const Args& a) {
  const size_t bytes = a.count * c.esize();
  if (a.count == 0) return;
  patterns::BinomialTree tree{c.rank(), c.nranks(), a.root};
  const bool root = c.rank() == a.root;
  std::vector<int> kids = tree.children();
  char* acc = root ? static_cast<char*>(a.recv) : static_cast<char*>(c.scratch(bytes));
  char* tmp = kids.empty() ? nullptr : static_cast<char*>(c.scratch(bytes));
  const void* cur = a.send;  // current partial result
  // Smallest subtrees finish first: fold children in reverse broadcast order.
  for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
    Xfer x;
    c.recv(*it, tmp, bytes, 0, x);
    c.wait(x);
    c.reduce(acc, cur, tmp, a.count);
    cur = acc;
  }
  if (root) {
    c.copy(acc, cur, bytes);
    c.finish_avg(acc, a.count);
  } else {
    Xfer x;
    c.send(tree.parent(), cur, bytes, 0, x);
    c.wait(x);
  }
}

}  // namespace dccl::coll
