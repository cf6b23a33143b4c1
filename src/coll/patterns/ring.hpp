// Ring pattern: pure rank arithmetic for ring reduce-scatter / allgather.
#pragma once
#include <cstddef>

namespace dccl::coll::patterns {

inline int mod(int a, int n) { return ((a % n) + n) % n; }

struct Ring {
  int rank, n;
  int next() const { return mod(rank + 1, n); }
  int prev() const { return mod(rank - 1, n); }
  // Reduce-scatter step s in [0, n-1): send block rs_send(s), receive and reduce rs_recv(s).
  // After n-1 steps this rank owns block owned() fully reduced.
  int rs_send(int s) const { return mod(rank - s, n); }
  int rs_recv(int s) const { return mod(rank - s - 1, n); }
  int owned() const { return mod(rank + 1, n); }
  // Allgather step s in [0, n-1) that starts from owned(): send ag_send(s), receive ag_recv(s).
  int ag_send(int s) const { return mod(rank + 1 - s, n); }
  int ag_recv(int s) const { return mod(rank - s, n); }
};

// Balanced split of `count` elements into `parts` blocks: the first count%parts get one more.
struct Blocks {
  size_t count;
  int parts;
  size_t size(int b) const {
    size_t q = count / static_cast<size_t>(parts), r = count % static_cast<size_t>(parts);
    return q + (static_cast<size_t>(b) < r ? 1 : 0);
  }
  size_t offset(int b) const {
    size_t q = count / static_cast<size_t>(parts), r = count % static_cast<size_t>(parts);
    size_t bb = static_cast<size_t>(b);
    return bb * q + (bb < r ? bb : r);
  }
};

}  // namespace dccl::coll::patterns
