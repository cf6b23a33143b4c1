// Recursive halving-doubling allreduce (Rabenseifner): reduce-scatter by recursive
// halving, then allgather by recursive doubling, among the largest power of two of
// ranks; the others fold in before and receive the result after.
#include "coll/algos.hpp"
#include "coll/fold.hpp"
#include "coll/patterns/ring.hpp"

namespace dccl::coll {

void allreduce_rhd(CallContext& c, const Args& a) {
  const size_t es = c.esize();
  if (a.count == 0) return;
  char* buf = static_cast<char*>(a.recv);
  c.copy(buf, a.send, a.count * es);
  patterns::Rhd h(c.rank(), c.nranks());
  char* tmp = static_cast<char*>(c.scratch(a.count * es));
  fold_in(c, h, buf, tmp, a.count);
  if (!h.is_extra()) {
    const int v = h.vrank();
    patterns::Blocks blk{a.count, h.p};
    auto span = [&](int lo, int hi, size_t* off, size_t* len) {
      *off = blk.offset(lo);
      *len = (hi < h.p ? blk.offset(hi) : a.count) - *off;
    };
    int lo = 0, hi = h.p;
    uint32_t step = 0;
    // Reduce-scatter by recursive halving: keep the half containing v.
    for (int mask = h.p >> 1; mask >= 1; mask >>= 1, ++step) {
      int peer = h.peer_at_distance(mask);
      int mid = lo + (hi - lo) / 2;
      bool low = (v & mask) == 0;
      size_t koff, klen, soff, slen;
      span(low ? lo : mid, low ? mid : hi, &koff, &klen);
      span(low ? mid : lo, low ? hi : mid, &soff, &slen);
      Xfer xs[2];
      c.recv(peer, tmp + koff * es, klen * es, step, xs[0]);
      c.send(peer, buf + soff * es, slen * es, step, xs[1]);
      c.wait_all(xs, 2);
      if (low)
        c.reduce(buf + koff * es, buf + koff * es, tmp + koff * es, klen);
      else
        c.reduce(buf + koff * es, tmp + koff * es, buf + koff * es, klen);
      if (low) hi = mid; else lo = mid;
    }
    {
      size_t off, len;
      span(lo, hi, &off, &len);
      c.finish_avg(buf + off * es, len);
    }
    // Allgather by recursive doubling: exchange the owned range with the sibling.
    for (int mask = 1; mask < h.p; mask <<= 1, ++step) {
      int peer = h.peer_at_distance(mask);
      int width = hi - lo;
      bool low = (v & mask) == 0;
      int plo = low ? lo + width : lo - width;
      size_t moff, mlen, poff, plen;
      span(lo, hi, &moff, &mlen);
      span(plo, plo + width, &poff, &plen);
      Xfer xs[2];
      c.recv(peer, buf + poff * es, plen * es, step, xs[0]);
      c.send(peer, buf + moff * es, mlen * es, step, xs[1]);
      c.wait_all(xs, 2);
      if (low) hi += width; else lo -= width;
    }
  }
  fold_out(c, h, buf, a.count);
}

}  // namespace dccl::coll
