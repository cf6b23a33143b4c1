#include "coll/ring_pipeline.hpp"

#include <vector>

#include "coll/algos.hpp"

namespace dccl::coll {

int chunks_for(size_t block_elems, size_t esize, size_t chunk_bytes) {
  size_t per = chunk_bytes / esize;
  if (per == 0) per = 1;
  size_t c = (block_elems + per - 1) / per;
  if (c < 1) c = 1;
  if (c > (1u << 14)) c = 1u << 14;  // keeps step*chunks inside the 24-bit tag step field
  return static_cast<int>(c);
}

void chunk_range(size_t max_block_elems, size_t block_elems, int chunks, int ch, size_t* off,
                 size_t* len) {
  size_t per = (max_block_elems + static_cast<size_t>(chunks) - 1) / static_cast<size_t>(chunks);
  size_t lo = per * static_cast<size_t>(ch);
  size_t hi = lo + per;
  if (lo > block_elems) lo = block_elems;
  if (hi > block_elems) hi = block_elems;
  *off = lo;
  *len = hi - lo;
}

void RingPipeline::run(CallContext& c, int next, int prev) const {
  const int T = steps, C = chunks;
  if (T <= 0) return;
  uint32_t base = 0;  // the ring's first tag: after the barrier's rounds
  if (align) {
    barrier_dissemination(c, Args{});
    for (int d = 1; d < c.nranks(); d <<= 1) ++base;
  }
  std::vector<Xfer> sends(static_cast<size_t>(T) * C);
  std::vector<Xfer> recvs(static_cast<size_t>(C));
  auto sx = [&](int t, int ch) -> Xfer& { return sends[static_cast<size_t>(t) * C + ch]; };
  auto tag = [&](int t, int ch) { return base + static_cast<uint32_t>(t * C + ch); };
  auto rbytes = [&](int t, int ch) { return recv_bytes ? recv_bytes(t, ch) : bytes(t, ch); };
  auto guard = [&](const std::function<int(int)>& f, int t, int ch) {
    if (!f) return;
    int ts = f(t);
    if (ts >= 0) c.wait(sx(ts, ch));
  };

  for (int ch = 0; ch < C; ++ch) {
    guard(recv_after_send_of, 0, ch);
    c.recv(prev, recv_ptr(0, ch), rbytes(0, ch), tag(0, ch), recvs[ch]);
  }
  for (int ch = 0; ch < C; ++ch) c.send(next, send_ptr(0, ch), bytes(0, ch), tag(0, ch), sx(0, ch));

  // Chunks are handled in (step, chunk) order on every rank, so each link sees its
  // sends and receives in the same order: a staged data path with a few staging slots
  // per peer then behaves as a FIFO pipe and cannot deadlock.
  for (int t = 0; t < T; ++t) {
    for (int ch = 0; ch < C; ++ch) {
      c.wait(recvs[ch]);
      if (on_recv) {
        guard(on_recv_after_send_of, t, ch);
        on_recv(t, ch);
      }
      if (t + 1 < T) {
        c.send(next, send_ptr(t + 1, ch), bytes(t + 1, ch), tag(t + 1, ch), sx(t + 1, ch));
        guard(recv_after_send_of, t + 1, ch);
        c.recv(prev, recv_ptr(t + 1, ch), rbytes(t + 1, ch), tag(t + 1, ch), recvs[ch]);
      }
    }
  }
  c.wait_all(sends.data(), sends.size());
}

}  // namespace dccl::coll
