// Pipelined chain broadcast: root -> root+1 -> ... ; each chunk is forwarded as soon
// as it arrives, so every link carries the message once (bandwidth-bound sizes).
#include <vector>

#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"
#include "coll/ring_pipeline.hpp"

namespace dccl::coll {

void broadcast_chain(CallContext& c, const Args& a) {
  const int n = c.nranks();
  const size_t es = c.esize();
  if (a.count == 0) return;
  const int v = patterns::mod(c.rank() - a.root, n);
  const int next = v + 1 < n ? patterns::mod(c.rank() + 1, n) : -1;
  const int prev = v > 0 ? patterns::mod(c.rank() - 1, n) : -1;
  const int C = chunks_for(a.count, es, c.chunk_bytes());
  auto at = [&](const void* base, int ch, size_t* len) {
    size_t off;
    chunk_range(a.count, a.count, C, ch, &off, len);
    return static_cast<const char*>(base) + off * es;
  };
  std::vector<Xfer> sends(next >= 0 ? C : 0), recvs(prev >= 0 ? C : 0);
  if (prev < 0) {
    c.copy(a.recv, a.send, a.count * es);
    for (int ch = 0; ch < C && next >= 0; ++ch) {
      size_t len;
      const char* p = at(a.send, ch, &len);
      c.send(next, p, len * es, static_cast<uint32_t>(ch), sends[ch]);
    }
  } else {
    for (int ch = 0; ch < C; ++ch) {
      size_t len;
      char* p = const_cast<char*>(at(a.recv, ch, &len));
      c.recv(prev, p, len * es, static_cast<uint32_t>(ch), recvs[ch]);
    }
    // In chunk order, so every link carries its messages in one order (see ring_pipeline).
    for (int ch = 0; ch < C; ++ch) {
      c.wait(recvs[ch]);
      if (next < 0) continue;
      size_t len;
      const char* p = at(a.recv, ch, &len);
      c.send(next, p, len * es, static_cast<uint32_t>(ch), sends[ch]);
    }
  }
  c.wait_all(sends.data(), sends.size());
}

}  // namespace dccl::coll
