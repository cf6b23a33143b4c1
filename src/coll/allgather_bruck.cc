// Bruck allgather: ceil(log2 n) rounds of doubling block runs, for latency-bound sizes.
// Works in a scratch buffer rotated so this rank's block is first, then unrotates.
#include "coll/algos.hpp"
#include "coll/patterns/bruck.hpp"

namespace dccl::coll {

void allgather_bruck(CallContext& c, const Args& a) {
  const int n = c.nranks();
  const size_t bb = a.count * c.esize();  // bytes per block
  if (a.count == 0) return;
  char* rb = static_cast<char*>(a.recv);
  if (n == 1) {
    c.copy(rb, a.send, bb);
    return;
  }
  patterns::Bruck br{c.rank(), n};
  char* tmp = static_cast<char*>(c.scratch(bb * static_cast<size_t>(n)));
  c.copy(tmp, a.send, bb);
  for (int k = 0; k < br.steps(); ++k) {
    size_t len = bb * static_cast<size_t>(br.blocks(k));
    Xfer xs[2];
    c.recv(br.recv_from(k), tmp + bb * (static_cast<size_t>(1) << k), len, static_cast<uint32_t>(k), xs[0]);
    c.send(br.send_to(k), tmp, len, static_cast<uint32_t>(k), xs[1]);
    c.wait_all(xs, 2);
  }
  // Slot j holds rank (rank + j)'s block: two contiguous copies put them in place.
  const size_t head = static_cast<size_t>(n - c.rank());
  c.copy(rb + bb * static_cast<size_t>(c.rank()), tmp, bb * head);
  if (c.rank() > 0) c.copy(rb, tmp + bb * head, bb * static_cast<size_t>(c.rank()));
}

}  // namespace dccl::coll
