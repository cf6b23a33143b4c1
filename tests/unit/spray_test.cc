// The socket path's rules for several flows per peer (net/sock/spray.hpp): how many
// flows a pair gets, how a message is cut, which flow takes the next chunk (a slow
// flow gets fewer), the chunk header's words.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "net/sock/spray.hpp"

namespace dccl::net::spray {
namespace {

TEST(Spray, PairFlowsTakeTheSmallerWish) {
  EXPECT_EQ(pair_flows(0, 0, true), 1);  // automatic: one flow on one host
  EXPECT_EQ(pair_flows(0, 0, false), kRemoteFlows);
  EXPECT_EQ(pair_flows(8, 0, false), kRemoteFlows);
  EXPECT_EQ(pair_flows(8, 2, false), 2);
  EXPECT_EQ(pair_flows(3, 0, true), 1);
  EXPECT_EQ(pair_flows(3, 5, true), 3);  // asked for by both: loopback too
  EXPECT_EQ(pair_flows(1, 0, false), 1);
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b)
      for (bool l : {false, true}) EXPECT_EQ(pair_flows(a, b, l), pair_flows(b, a, l));  // both ends agree
}

// Chunks tile the message exactly: every byte in one chunk, none past the end.
TEST(Spray, ChunksCoverTheMessage) {
  for (size_t len : {kSprayMinBytes, kSprayMinBytes + 1, size_t{1} << 20, (size_t{16} << 20) + 5, size_t{300} << 20})
    for (int flows : {2, 4, 7, 64}) {
      const size_t c = chunk_bytes(len, flows);
      EXPECT_EQ(c % 4096, 0u);
      EXPECT_GE(c, size_t{64} << 10);
      EXPECT_LE(c, size_t{1} << 20);
      std::vector<uint8_t> seen(len, 0);
      for (size_t off = 0; off < len; off += std::min(c, len - off))
        for (size_t i = off; i < off + std::min(c, len - off); ++i) ++seen[i];
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](uint8_t v) { return v == 1; })) << len << " " << flows;
      // A message as long as the spray bound is cut into at least as many chunks as flows
      // when the bound allows it: every flow has something to carry.
      if (len >= size_t{16} << 20) {
        EXPECT_GE((len + c - 1) / c, static_cast<size_t>(flows)) << len;
      }
    }
}

TEST(Spray, PickFlowTakesTheLeastQueued) {
  EXPECT_EQ(pick_flow({5, 3, 9}, 10), 1);
  EXPECT_EQ(pick_flow({3, 3, 9}, 10), 0);
  EXPECT_EQ(pick_flow({10, 11, 12}, 10), -1);  // every flow full
  EXPECT_EQ(pick_flow({SIZE_MAX, 4}, 10), 1);  // a dead flow is never picked
  EXPECT_EQ(pick_flow({}, 10), -1);
}

// Flows that drain at different rates (one capped at a quarter, one sharing its path
// with another flow): handing each chunk to the least queued flow gives each flow
// chunks in proportion to its rate, so the message ends about when the fastest
// schedule could end it (a static cut into equal parts ends when the slowest does).
TEST(Spray, SlowFlowsGetFewerChunks) {
  const std::vector<double> rate = {4, 4, 1, 2};  // bytes per tick, relative
  const size_t chunk = 64 << 10, window = 2 * chunk, total = size_t{64} << 20;
  std::vector<double> queued(rate.size(), 0);
  std::vector<size_t> carried(rate.size(), 0);
  size_t handed = 0, ticks = 0;
  const double scale = 16384;  // bytes per unit of rate per tick
  while (handed < total || std::any_of(queued.begin(), queued.end(), [](double q) { return q > 0; })) {
    for (;;) {  // hand chunks while a flow has room
      if (handed >= total) break;
      std::vector<size_t> q(queued.size());
      for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<size_t>(queued[i]);
      const int k = pick_flow(q, window);
      if (k < 0) break;
      queued[static_cast<size_t>(k)] += static_cast<double>(chunk);
      carried[static_cast<size_t>(k)] += chunk;
      handed += chunk;
    }
    for (size_t i = 0; i < rate.size(); ++i) queued[i] = std::max(0.0, queued[i] - rate[i] * scale);
    ++ticks;
  }
  const double sum = std::accumulate(rate.begin(), rate.end(), 0.0);
  for (size_t i = 0; i < rate.size(); ++i) {
    const double share = static_cast<double>(carried[i]) / static_cast<double>(total);
    EXPECT_NEAR(share, rate[i] / sum, 0.03) << "flow " << i;
  }
  // The ideal: total / (sum * scale) ticks; a static equal cut: total / 4 / (1 * scale).
  const double ideal = static_cast<double>(total) / (sum * scale);
  EXPECT_LT(static_cast<double>(ticks), ideal * 1.1 + 4);
}

TEST(Spray, ChunkWordsRoundTrip) {
  for (uint32_t seq : {0u, 1u, kSeqMask, 12345u})
    for (uint32_t len : {1u, 65536u, 1u << 20}) {
      const uint64_t w = chunk_word(seq, len);
      EXPECT_TRUE(w & kChunk);
      EXPECT_FALSE(w & kAnnounce);
      EXPECT_EQ(chunk_seq(w), seq & kSeqMask);
      EXPECT_EQ(chunk_len(w), len);
    }
  EXPECT_TRUE(seq_ahead(5, 5));    // the next one to be announced
  EXPECT_TRUE(seq_ahead(9, 5));
  EXPECT_FALSE(seq_ahead(4, 5));   // announced (and finished) already
  EXPECT_TRUE(seq_ahead(1, kSeqMask));  // across the wrap
  EXPECT_FALSE(seq_ahead(kSeqMask, 1));
}

}  // namespace
}  // namespace dccl::net::spray
