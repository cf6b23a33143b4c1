// Pipelined chain reduce towards the root: the rank farthest from the root sends
// its chunks, every rank adds its own and forwards, chunk by chunk.
#include <vector>

#include "coll/algos.hpp"
#include "coll/patterns/ring.hpp"
#include "coll/ring_pipeline.hpp"

namespace dccl::coll {

void reduce_chain(Ctx& c, const Args& a) {
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
  if (down < 0) {  // chain end: send own data
    std::vector<Xfer> sends(C);
    for (int ch = 0; ch < C; ++ch) {
      size_t off, len;
      range(ch, &off, &len);
      c.send(up, sb + off * es, len * es, static_cast<uint32_t>(ch), sends[ch]);
    }
    c.wait_all(sends.data(), sends.size());
    return;
  }
  char* in = static_cast<char*>(c.scratch(a.count * es));
  char* acc = root ? static_cast<char*>(a.recv) : static_cast<char*>(c.scratch(a.count * es));
  std::vector<Xfer> recvs(C), sends(root ? 0 : C);
  for (int ch = 0; ch < C; ++ch) {
    size_t off, len;
    range(ch, &off, &len);
    c.recv(down, in + off * es, len * es, static_cast<uint32_t>(ch), recvs[ch]);
  }
  for (int ch = 0; ch < C; ++ch) {  // in chunk order (see ring_pipeline)
    c.wait(recvs[ch]);
    size_t off, len;
    range(ch, &off, &len);
    c.reduce(acc + off * es, sb + off * es, in + off * es, len);
    if (root)
      c.finish_avg(acc + off * es, len);
    else
      c.send(up, acc + off * es, len * es, static_cast<uint32_t>(ch), sends[ch]);
  }
  c.wait_all(sends.data(), sends.size());
}

}  // namespace dccl::coll
