// Ring allgather, pipelined in chunks: blocks travel n-1 hops straight into recvbuff.
#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"
#include "coll/ring_pipeline.hpp"

namespace dccl::coll {

void allgather_ring(CallContext& c, const Args& a) {
  const int n = c.nranks(), r = c.rank();
  const size_t es = c.esize();
  const size_t bcount = a.count;
  const char* sb = static_cast<const char*>(a.send);
  char* rb = static_cast<char*>(a.recv);
  if (bcount == 0) return;
  char* mine = rb + static_cast<size_t>(r) * bcount * es;
  if (mine != sb) c.copy(mine, sb, bcount * es);
  if (n == 1) return;
  // Ring whose allgather phase starts from this rank's own block.
  patterns::Ring ring{patterns::mod(r - 1, n), n};
  const int C = chunks_for(bcount, es, c.chunk_bytes());
  auto at = [&](int b, int ch, size_t* len) {
    size_t off;
    chunk_range(bcount, bcount, C, ch, &off, len);
    return rb + (static_cast<size_t>(b) * bcount + off) * es;
  };
  RingPipeline p;
  p.steps = n - 1;
  p.chunks = C;
  p.align = bcount * es >= RingPipeline::kAlignBlockBytes;
  p.bytes = [&](int, int ch) {
    size_t len;
    at(0, ch, &len);
    return len * es;
  };
  p.send_ptr = [&](int t, int ch) -> const void* {
    size_t len;
    return at(ring.ag_send(t), ch, &len);
  };
  p.recv_ptr = [&](int t, int ch) -> void* {
    size_t len;
    return at(ring.ag_recv(t), ch, &len);
  };
  p.run(c, patterns::mod(r + 1, n), patterns::mod(r - 1, n));
}

}  // namespace dccl::coll
