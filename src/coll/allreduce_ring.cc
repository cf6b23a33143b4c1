// Ring allreduce: reduce-scatter then allgather around the ring, pipelined in chunks.
// Bandwidth-optimal: each rank sends 2(n-1)/n of the message.
#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"
#include "coll/ring_pipeline.hpp"

namespace dccl::coll {

void allreduce_ring(CallContext& c, const Args& a) {
  const int n = c.nranks();
  const size_t es = c.esize();
  const char* sb = static_cast<const char*>(a.send);
  char* rb = static_cast<char*>(a.recv);
  if (a.count == 0) return;
  if (n == 1) {
    c.copy(rb, sb, a.count * es);
    c.finish_avg(rb, a.count);
    return;
  }
  patterns::Ring ring{c.rank(), n};
  patterns::Blocks blk{a.count, n};
  const size_t maxb = blk.size(0);
  const int C = chunks_for(maxb, es, c.chunk_bytes());
  size_t slot_elems = (maxb + C - 1) / C;
  char* slots = static_cast<char*>(c.scratch(slot_elems * es * C));
  const int rs_steps = n - 1;

  auto block_of = [&](int t, bool send) {
    if (t < rs_steps) return send ? ring.rs_send(t) : ring.rs_recv(t);
    int s = t - rs_steps;
    return send ? ring.ag_send(s) : ring.ag_recv(s);
  };
  auto range = [&](int b, int ch, size_t* off, size_t* len) {
    size_t o, l;
    chunk_range(maxb, blk.size(b), C, ch, &o, &l);
    *off = blk.offset(b) + o;
    *len = l;
  };

  RingPipeline p;
  p.steps = 2 * (n - 1);
  p.chunks = C;
  p.align = maxb * es >= RingPipeline::kAlignBlockBytes;
  p.bytes = [&](int t, int ch) {
    size_t off, len;
    range(block_of(t, true), ch, &off, &len);
    return len * es;
  };
  p.recv_bytes = [&](int t, int ch) {
    size_t off, len;
    range(block_of(t, false), ch, &off, &len);
    return len * es;
  };
  p.send_ptr = [&](int t, int ch) -> const void* {
    size_t off, len;
    range(block_of(t, true), ch, &off, &len);
    return (t == 0 ? sb : rb) + off * es;
  };
  p.recv_ptr = [&](int t, int ch) -> void* {
    if (t < rs_steps) return slots + static_cast<size_t>(ch) * slot_elems * es;
    size_t off, len;
    range(block_of(t, false), ch, &off, &len);
    return rb + off * es;
  };
  p.on_recv = [&](int t, int ch) {
    if (t >= rs_steps) return;
    size_t off, len;
    range(block_of(t, false), ch, &off, &len);
    c.reduce(rb + off * es, sb + off * es, slots + static_cast<size_t>(ch) * slot_elems * es, len);
    if (t == rs_steps - 1) c.finish_avg(rb + off * es, len);
  };
  // Allgather step s overwrites the block that reduce-scatter step s sent.
  p.recv_after_send_of = [&](int t) { return t >= rs_steps ? t - rs_steps : -1; };
  p.run(c, ring.next(), ring.prev());
}

}  // namespace dccl::coll
