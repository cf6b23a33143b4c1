// Dissemination barrier: ceil(log2 n) rounds of empty messages at distance 2^k.
#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"

namespace dccl::coll {

void barrier_dissemination(CallContext& c, const Args&) {
  const int n = c.nranks(), r = c.rank();
  static char dummy[8];
  uint32_t step = 0;
  for (int d = 1; d < n; d <<= 1, ++step) {
    Xfer xs[2];
    c.recv(patterns::mod(r - d, n), dummy, 0, step, xs[0]);
    c.send(patterns::mod(r + d, n), dummy, 0, step, xs[1]);
    c.wait_all(xs, 2);
  }
}

}  // namespace dccl::coll
