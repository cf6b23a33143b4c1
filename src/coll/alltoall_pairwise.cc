// Pairwise all-to-all: at step s send to rank+s and receive from rank-s, with a
// window of steps in flight so small messages overlap and large ones stay bounded.
#include <vector>

#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"

namespace dccl::coll {

void alltoall_pairwise(CallContext& c, const Args& a) {
  const int n = c.nranks(), r = c.rank();
  const size_t bb = a.count * c.esize();
  if (a.count == 0) return;
  const char* sb = static_cast<const char*>(a.send);
  char* rb = static_cast<char*>(a.recv);
  if (sb == rb && n > 1) {  // in place: read from a copy
    char* tmp = static_cast<char*>(c.scratch(bb * static_cast<size_t>(n)));
    c.copy(tmp, sb, bb * static_cast<size_t>(n));
    sb = tmp;
  }
  c.copy(rb + bb * static_cast<size_t>(r), sb + bb * static_cast<size_t>(r), bb);
  const int window = bb <= (64u << 10) ? n : 4;
  std::vector<Xfer> xs(2 * static_cast<size_t>(n));
  for (int lo = 1; lo < n; lo += window) {
    int hi = lo + window < n ? lo + window : n;
    for (int s = lo; s < hi; ++s) {
      int from = patterns::mod(r - s, n), to = patterns::mod(r + s, n);
      c.recv(from, rb + bb * static_cast<size_t>(from), bb, static_cast<uint32_t>(s), xs[2 * s]);
      c.send(to, sb + bb * static_cast<size_t>(to), bb, static_cast<uint32_t>(s), xs[2 * s + 1]);
    }
    c.wait_all(xs.data() + 2 * lo, 2 * static_cast<size_t>(hi - lo));
  }
}

}  // namespace dccl::coll
