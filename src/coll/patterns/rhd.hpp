// Recursive halving-doubling pattern with the standard fix-up for non-powers of two:
// with p the largest power of two <= n and r = n - p, ranks below 2r pair up
// (even rank folds into its odd neighbour before, and gets the result after);
// the p remaining ranks run the power-of-two exchange on virtual ranks.
#pragma once

namespace dccl::coll::patterns {

struct Rhd {
  int rank, n, p, r;
  Rhd(int rank_, int n_) : rank(rank_), n(n_) {
    p = 1;
    while (p * 2 <= n) p *= 2;
    r = n - p;
  }
  int steps() const {
    int s = 0;
    while ((1 << s) < p) ++s;
    return s;
  }
  // Ranks that only fold in and receive the result (even ranks below 2r).
  bool is_extra() const { return rank < 2 * r && rank % 2 == 0; }
  // Partner for the fold/unfold: extra <-> its odd neighbour; -1 when none.
  int fold_partner() const {
    if (rank >= 2 * r) return -1;
    return rank % 2 == 0 ? rank + 1 : rank - 1;
  }
  // Virtual rank in [0, p) for participating ranks, -1 for extras.
  int vrank() const {
    if (is_extra()) return -1;
    return rank < 2 * r ? rank / 2 : rank - r;
  }
  static int real_rank(int v, int r) { return v < r ? 2 * v + 1 : v + r; }
  int real(int v) const { return real_rank(v, r); }
  // Exchange partner at step k (distance 2^k for doubling, halving uses steps()-1-k).
  int peer_at_distance(int dist) const { return real(vrank() ^ dist); }
};

}  // namespace dccl::coll::patterns
