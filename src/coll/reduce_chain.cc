// Pipelined chain reduce towards the root: the rank farthest from the root sends
// its chunks, every rank adds its own and forwards, chunk by chunk.
#include <algorithm>
#include <vector>

#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"
#include "coll/ring_pipeline.hpp"

namespace dccl::coll {

namespace {
constexpr int kDepth = 8;  // chunks in flight per link
}  // namespace

void reduce_chain(CallContext& c, const Args& a) {
  const int n = c.nranks();
  const size_t es = c.esize();
  if (a.count == 0) return;
  if (n == 1) {
    c.copy(a.recv, a.send, a.count * es);
    c.finish_avg(a.recv, a.count);
    return;
  }
  const int v = patterns::mod(c.rank() - a.root, n);
  const int up = v > 0 ? patterns::mod(c.rank() - 1, n) : -1;        // towards the root
  const int down = v + 1 < n ? patterns::mod(c.rank() + 1, n) : -1;  // away from it
  const bool root = v == 0;
  const int C = chunks_for(a.count, es, c.chunk_bytes());
  auto range = [&](int ch, size_t* off, size_t* len) { chunk_range(a.count, a.count, C, ch, off, len); };
  const char* sb = static_cast<const char*>(a.send);
  // At most kDepth chunks in flight per link: scratch is kDepth chunk slots for the
  // incoming data (and as many for the partial sums passed on), whatever the size.
  const int D = std::min(C, kDepth);
  size_t slot_elems, unused;
  range(0, &unused, &slot_elems);
  if (down < 0) {  // chain end: send own data, kDepth chunks in flight
    std::vector<Xfer> sends(static_cast<size_t>(D));
    for (int ch = 0; ch < C; ++ch) {
      Xfer& x = sends[static_cast<size_t>(ch % D)];
      if (ch >= D) c.wait(x);
      size_t off, len;
      range(ch, &off, &len);
      c.send(up, sb + off * es, len * es, static_cast<uint32_t>(ch), x);
    }
    c.wait_all(sends.data(), sends.size());
    return;
  }
  char* in = static_cast<char*>(c.scratch(static_cast<size_t>(D) * slot_elems * es));
  char* acc = root ? nullptr : static_cast<char*>(c.scratch(static_cast<size_t>(D) * slot_elems * es));
  std::vector<Xfer> recvs(static_cast<size_t>(D)), sends(root ? 0 : static_cast<size_t>(D));
  auto post_recv = [&](int ch) {
    size_t off, len;
    range(ch, &off, &len);
    c.recv(down, in + static_cast<size_t>(ch % D) * slot_elems * es, len * es, static_cast<uint32_t>(ch),
           recvs[static_cast<size_t>(ch % D)]);
  };
  for (int ch = 0; ch < D; ++ch) post_recv(ch);
  for (int ch = 0; ch < C; ++ch) {  // in chunk order (see ring_pipeline)
    const size_t s = static_cast<size_t>(ch % D);
    c.wait(recvs[s]);
    size_t off, len;
    range(ch, &off, &len);
    char* slot_in = in + s * slot_elems * es;
    if (root) {
      c.reduce(static_cast<char*>(a.recv) + off * es, sb + off * es, slot_in, len);
      c.finish_avg(static_cast<char*>(a.recv) + off * es, len);
    } else {
      char* slot_acc = acc + s * slot_elems * es;
      if (ch >= D) c.wait(sends[s]);  // the partial sum sent from this slot has left
      c.reduce(slot_acc, sb + off * es, slot_in, len);
      c.send(up, slot_acc, len * es, static_cast<uint32_t>(ch), sends[s]);
    }
    if (ch + D < C) post_recv(ch + D);  // the slot's data is consumed
  }
  c.wait_all(sends.data(), sends.size());
}

}  // namespace dccl::coll
