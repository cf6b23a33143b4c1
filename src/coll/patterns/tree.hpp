// Binomial tree rooted at `root`: relative rank v = (rank - root) mod n.
// Children of v are v + 2^k for 2^k > lowest set bit range; parent clears the lowest set bit.
#pragma once
#include <vector>

#include "coll/patterns/ring.hpp"

namespace dccl::coll::patterns {

struct BinomialTree {
  int rank, n, root;
  int vrank() const { return mod(rank - root, n); }
  int real(int v) const { return mod(v + root, n); }
  int parent() const {
    int v = vrank();
    if (v == 0) return -1;
    return real(v & (v - 1));
  }
  // Children in the order a broadcast should send to them (largest subtree first).
  std::vector<int> children() const {
    std::vector<int> out;
    int v = vrank();
    int lim = v == 0 ? n : (v & -v);  // children are v + 2^k with 2^k < lowest set bit of v
    int top = 1;
    while (top < lim && top < n) top <<= 1;
    for (int m = top >> 1; m >= 1; m >>= 1)
      if (m < lim && v + m < n) out.push_back(real(v + m));
    return out;
  }
};

}  // namespace dccl::coll::patterns
