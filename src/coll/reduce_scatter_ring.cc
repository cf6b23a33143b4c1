// Ring reduce-scatter, pipelined in chunks: rank r ends with block r reduced.
// Partial sums alternate between two scratch accumulators per chunk.
#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"
#include "coll/ring_pipeline.hpp"

namespace dccl::coll {

void reduce_scatter_ring(CallContext& c, const Args& a) {
  const int n = c.nranks(), r = c.rank();
  const size_t es = c.esize();
  const size_t bcount = a.count;  // elements per block
  const char* sb = static_cast<const char*>(a.send);
  char* rb = static_cast<char*>(a.recv);
  if (bcount == 0) return;
  if (n == 1) {
    c.copy(rb, sb, bcount * es);
    c.finish_avg(rb, bcount);
    return;
  }
  // Shifted ring so that the block finished last is block r.
  patterns::Ring ring{patterns::mod(r - 1, n), n};
  const int C = chunks_for(bcount, es, c.chunk_bytes());
  const size_t slot = (bcount + C - 1) / C * es;
  char* in = static_cast<char*>(c.scratch(slot * C));
  char* acc[2] = {static_cast<char*>(c.scratch(slot * C)), static_cast<char*>(c.scratch(slot * C))};
  const int T = n - 1;
  auto range = [&](int ch, size_t* off, size_t* len) { chunk_range(bcount, bcount, C, ch, off, len); };

  RingPipeline p;
  p.steps = T;
  p.chunks = C;
  p.align = bcount * es >= RingPipeline::kAlignBlockBytes;
  p.bytes = [&](int, int ch) {
    size_t off, len;
    range(ch, &off, &len);
    return len * es;
  };
  p.send_ptr = [&](int t, int ch) -> const void* {
    size_t off, len;
    range(ch, &off, &len);
    if (t == 0) return sb + (static_cast<size_t>(ring.rs_send(0)) * bcount + off) * es;
    return acc[(t - 1) & 1] + static_cast<size_t>(ch) * slot;
  };
  p.recv_ptr = [&](int, int ch) -> void* { return in + static_cast<size_t>(ch) * slot; };
  p.on_recv = [&](int t, int ch) {
    size_t off, len;
    range(ch, &off, &len);
    const char* mine = sb + (static_cast<size_t>(ring.rs_recv(t)) * bcount + off) * es;
    char* dst = t == T - 1 ? rb + off * es : acc[t & 1] + static_cast<size_t>(ch) * slot;
    c.reduce(dst, mine, in + static_cast<size_t>(ch) * slot, len);
    if (t == T - 1) c.finish_avg(dst, len);
  };
  // Accumulator (t & 1) was last sent at step t - 1.
  p.on_recv_after_send_of = [&](int t) { return t >= 1 ? t - 1 : -1; };
  p.run(c, patterns::mod(r + 1, n), patterns::mod(r - 1, n));
}

}  // namespace dccl::coll
