// Pure rank arithmetic of the collective patterns, checked by simulating the data
// movement of every rank for many world sizes, without any network.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "coll/patterns/bruck.hpp"
#include "coll/patterns/rhd.hpp"
#include "coll/patterns/ring.hpp"
#include "coll/patterns/tree.hpp"

using namespace dccl::coll::patterns;

TEST(Patterns, BlocksCoverEveryElementOnce) {
  for (size_t count : {0, 1, 7, 8, 1001}) {
    for (int parts = 1; parts <= 9; ++parts) {
      Blocks b{count, parts};
      size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        EXPECT_EQ(b.offset(i), next);
        next += b.size(i);
        EXPECT_LE(b.size(i), b.size(0));
        EXPECT_GE(b.size(i) + 1, b.size(0));
      }
      EXPECT_EQ(next, count);
    }
  }
}

// Ring reduce-scatter then allgather: simulate which ranks' contributions each block holds.
TEST(Patterns, RingReduceScatterAllgather) {
  for (int n = 1; n <= 9; ++n) {
    // have[r][b] = set of ranks whose contribution block b on rank r contains.
    std::vector<std::vector<std::set<int>>> have(n, std::vector<std::set<int>>(n));
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < n; ++b) have[r][b] = {r};
    for (int s = 0; s < n - 1; ++s) {
      auto next = have;
      for (int r = 0; r < n; ++r) {
        Ring ring{r, n};
        int from = ring.prev();
        Ring sender{from, n};
        EXPECT_EQ(sender.rs_send(s), ring.rs_recv(s)) << "n=" << n << " s=" << s;
        for (int x : have[from][sender.rs_send(s)]) next[r][ring.rs_recv(s)].insert(x);
      }
      have = next;
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(have[r][(Ring{r, n}.owned())].size(), static_cast<size_t>(n));
    // Allgather from owned blocks: every rank ends with every block complete.
    std::vector<std::vector<bool>> full(n, std::vector<bool>(n, false));
    for (int r = 0; r < n; ++r) full[r][Ring{r, n}.owned()] = true;
    for (int s = 0; s < n - 1; ++s) {
      auto next = full;
      for (int r = 0; r < n; ++r) {
        Ring ring{r, n};
        Ring sender{ring.prev(), n};
        EXPECT_EQ(sender.ag_send(s), ring.ag_recv(s));
        EXPECT_TRUE(full[ring.prev()][sender.ag_send(s)]) << "sending a block not yet complete";
        next[r][ring.ag_recv(s)] = true;
      }
      full = next;
    }
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < n; ++b) EXPECT_TRUE(full[r][b]) << "n=" << n << " r=" << r << " b=" << b;
  }
}

TEST(Patterns, RecursiveHalvingDoublingFold) {
  for (int n = 1; n <= 17; ++n) {
    std::set<int> vranks;
    int extras = 0;
    for (int r = 0; r < n; ++r) {
      Rhd h(r, n);
      EXPECT_EQ(h.p + h.r, n);
      EXPECT_LE(h.p, n);
      EXPECT_GT(2 * h.p, n);
      if (h.is_extra()) {
        ++extras;
        int partner = h.fold_partner();
        ASSERT_GE(partner, 0);
        EXPECT_FALSE(Rhd(partner, n).is_extra());
        EXPECT_EQ(Rhd(partner, n).fold_partner(), r);
        EXPECT_EQ(h.vrank(), -1);
      } else {
        EXPECT_TRUE(vranks.insert(h.vrank()).second);
        EXPECT_EQ(h.real(h.vrank()), r);
        for (int d = 1; d < h.p; d <<= 1) {
          int peer = h.peer_at_distance(d);
          EXPECT_EQ(Rhd(peer, n).peer_at_distance(d), r) << "exchange must be symmetric";
        }
      }
    }
    EXPECT_EQ(extras, Rhd(0, n).r);
    EXPECT_EQ(vranks.size(), static_cast<size_t>(Rhd(0, n).p));
  }
}

TEST(Patterns, BinomialTreeReachesEveryRankOnce) {
  for (int n = 1; n <= 13; ++n) {
    for (int root = 0; root < n; ++root) {
      std::vector<int> parent_count(n, 0);
      for (int r = 0; r < n; ++r) {
        BinomialTree t{r, n, root};
        if (r == root) {
          EXPECT_EQ(t.parent(), -1);
        }
        for (int c : t.children()) {
          ++parent_count[c];
          EXPECT_EQ((BinomialTree{c, n, root}.parent()), r);
        }
      }
      for (int r = 0; r < n; ++r) EXPECT_EQ(parent_count[r], r == root ? 0 : 1) << "n=" << n << " root=" << root;
    }
  }
}

TEST(Patterns, BruckGathersEveryBlock) {
  for (int n = 1; n <= 11; ++n) {
    // slots[r] = owners of the blocks rank r holds, in slot order.
    std::vector<std::vector<int>> slots(n);
    for (int r = 0; r < n; ++r) slots[r] = {r};
    Bruck b0{0, n};
    for (int k = 0; k < b0.steps(); ++k) {
      auto next = slots;
      for (int r = 0; r < n; ++r) {
        Bruck b{r, n};
        int from = b.recv_from(k);
        EXPECT_EQ((Bruck{from, n}.send_to(k)), r);
        for (int j = 0; j < b.blocks(k); ++j) next[r].push_back(slots[from][j]);
      }
      slots = next;
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(slots[r].size(), static_cast<size_t>(n));
      for (int j = 0; j < n; ++j) EXPECT_EQ(slots[r][j], (Bruck{r, n}.slot_owner(j)));
    }
  }
}
