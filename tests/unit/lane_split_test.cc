// The weighted split of a striped link (net/rails.hpp WireCut::each_weighted) and the
// shares behind its weights (net/fabric/lane_meter.hpp), without a network: pieces
// tile the message, follow the weights to a page, skip a lane whose share is nothing,
// and a meter's weights move until its lanes finish together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "net/fabric/lane_meter.hpp"
#include "net/rails.hpp"

namespace dccl::net {
namespace {

struct Piece {
  int lane;
  size_t off, len;
};

std::vector<Piece> cut_of(const WireCut& c, size_t len, const std::vector<uint16_t>& w) {
  std::vector<Piece> out;
  c.each_weighted(len, w.data(), [&](int lane, size_t off, size_t plen) { out.push_back({lane, off, plen}); });
  return out;
}

// The pieces tile [0, len) in order; per part, lanes in increasing order.
void expect_tiles(const std::vector<Piece>& p, size_t len) {
  size_t at = 0;
  for (const Piece& x : p) {
    EXPECT_EQ(x.off, at);
    EXPECT_GT(x.len, 0u);
    at += x.len;
  }
  EXPECT_EQ(at, len);
}

WireCut flows_cut(int lanes, size_t part = size_t{64} << 20) {
  WireCut c;
  c.part = part;
  c.lanes = lanes;
  c.stripe_min = kFlowsMinBytes;
  return c;
}

TEST(LaneSplit, EqualWeightsGiveEveryLaneAShare) {
  const WireCut c = flows_cut(8);
  const size_t len = size_t{16} << 20;
  const auto p = cut_of(c, len, std::vector<uint16_t>(8, LaneMeter::kMaxWeight));
  ASSERT_EQ(p.size(), 8u);
  expect_tiles(p, len);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(p[static_cast<size_t>(k)].lane, k);
    EXPECT_EQ(p[static_cast<size_t>(k)].len, len / 8);
  }
}

TEST(LaneSplit, PiecesFollowTheWeightsToAPage) {
  const WireCut c = flows_cut(4);
  const size_t len = (size_t{10} << 20) + 13;  // not a whole number of pages
  const std::vector<uint16_t> w{1024, 512, 256, 256};
  const auto p = cut_of(c, len, w);
  ASSERT_EQ(p.size(), 4u);
  expect_tiles(p, len);
  const double sum = 1024 + 512 + 256 + 256;
  for (size_t k = 0; k < 4; ++k) {
    const double want = static_cast<double>(len) * w[k] / sum;
    EXPECT_NEAR(static_cast<double>(p[k].len), want, 2.0 * kStripeAlign) << "lane " << k;
    if (k < 3) {
      EXPECT_EQ(p[k].len % kStripeAlign, 0u);
    }
  }
}

TEST(LaneSplit, ALaneWithNoShareGetsNoPiece) {
  // 64 KiB (16 pages) over 2 lanes weighted 1:1024: the first lane's share is under a
  // page, so the message goes whole on the second.
  WireCut c = flows_cut(2);
  c.stripe_min = 4096;
  const auto p = cut_of(c, size_t{64} << 10, {1, 1024});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].lane, 1);
  EXPECT_EQ(p[0].len, size_t{64} << 10);
  // The last lane takes the rest of the rounding, however small its weight.
  const auto q = cut_of(c, size_t{64} << 10, {1024, 1});
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].len, 15 * kStripeAlign);
  EXPECT_EQ(q[1].len, kStripeAlign);
}

TEST(LaneSplit, PartsAndNearLanesAsTheEvenCut) {
  // Parts of 1 MiB; parts under all_min over the 2 near lanes only; a short last part
  // under the stripe minimum whole on the home lane.
  WireCut c = flows_cut(4, size_t{1} << 20);
  c.near = 2;
  c.all_min = size_t{1} << 20;
  c.stripe_min = size_t{256} << 10;
  const size_t len = (size_t{2} << 20) + (size_t{512} << 10) + (size_t{100} << 10);
  const std::vector<uint16_t> w{1024, 1024, 1024, 1024};
  const auto p = cut_of(c, len, w);
  expect_tiles(p, len);
  // 2 whole parts over 4 lanes, the 612 KiB part over the 2 near lanes, nothing else.
  ASSERT_EQ(p.size(), 4u + 4u + 2u);
  EXPECT_EQ(p[8].lane, 0);
  EXPECT_EQ(p[9].lane, 1);
  EXPECT_EQ(c.count(len), p.size());  // equal weights: as many pieces as the even cut
}

TEST(LaneMeter, EqualUntilLanesFinishApart) {
  LaneMeter m(3);
  std::vector<uint16_t> w(3);
  m.weights(w.data());
  for (uint16_t x : w) EXPECT_EQ(x, LaneMeter::kMaxWeight);
  // Every lane finished together: nothing moves.
  const uint64_t bytes[3] = {1 << 20, 1 << 20, 1 << 20};
  const int64_t same[3] = {5'000'000, 5'000'000, 5'000'000};
  m.finished(bytes, same);
  m.weights(w.data());
  for (uint16_t x : w) EXPECT_EQ(x, LaneMeter::kMaxWeight);
}

TEST(LaneMeter, ALateLaneGetsLessUntilTheLanesFinishNearlyTogether) {
  // Lane 1 runs at half the others' rate. Simulate: each lane's time is a common
  // delay (a late receiver) plus its bytes over its rate; a message takes its
  // slowest lane's time.
  LaneMeter m(3);
  const double rate[3] = {1.0, 0.5, 1.0};  // bytes per ns
  auto message = [&](const std::vector<uint16_t>& w, uint64_t* bytes, int64_t* ns) {
    const double sum = w[0] + w[1] + w[2];
    int64_t slowest = 0;
    for (int k = 0; k < 3; ++k) {
      bytes[k] = static_cast<uint64_t>(8e6 * w[k] / sum);
      ns[k] = static_cast<int64_t>(2e6 + static_cast<double>(bytes[k]) / rate[k]);
      slowest = std::max(slowest, ns[k]);
    }
    return slowest;
  };
  std::vector<uint16_t> w(3);
  uint64_t bytes[3];
  int64_t ns[3];
  const int64_t even = message({1, 1, 1}, bytes, ns);
  for (int round = 0; round < 80; ++round) {
    m.weights(w.data());
    message(w, bytes, ns);
    m.finished(bytes, ns);
  }
  m.weights(w.data());
  const int64_t moved = message(w, bytes, ns);
  const int64_t ideal = static_cast<int64_t>(2e6 + 8e6 / 2.5);  // every lane done together
  EXPECT_LT(w[1], 0.75 * std::min(w[0], w[2]));
  EXPECT_LT(moved, 0.9 * static_cast<double>(even));
  EXPECT_LT(moved, 1.2 * static_cast<double>(ideal));  // the dead band leaves the rest
}

TEST(LaneMeter, NoiseAroundEqualTimesMovesNothingMuch) {
  // Lanes alike, each message's times scattered +-20% (a fixed pseudo-random walk).
  LaneMeter m(8);
  uint32_t x = 12345;
  std::vector<uint16_t> w(8);
  for (int round = 0; round < 200; ++round) {
    m.weights(w.data());
    double sum = 0;
    for (uint16_t v : w) sum += v;
    uint64_t bytes[8];
    int64_t ns[8];
    for (int k = 0; k < 8; ++k) {
      x = x * 1664525u + 1013904223u;
      const double noise = 0.8 + 0.4 * (x >> 8) / static_cast<double>(1u << 24);
      bytes[k] = static_cast<uint64_t>(4e6 * w[k] / sum);
      ns[k] = static_cast<int64_t>(static_cast<double>(bytes[k]) * noise);
    }
    m.finished(bytes, ns);
  }
  m.weights(w.data());
  for (uint16_t v : w) EXPECT_GE(v, LaneMeter::kMaxWeight * 0.6) << "a share wandered off";
}

TEST(LaneMeter, AShareHasAFloorAndMovesByAQuarterAtMost) {
  LaneMeter m(2);
  const uint64_t bytes[2] = {1 << 20, 1 << 20};
  const int64_t ns[2] = {1'000'000, 100'000'000};  // lane 1 a hundred times later
  m.finished(bytes, ns);
  // sqrt(mean/ns): lane 0 x7.1, lane 1 x0.71, clamped to 1.25 and 0.8: 1 and 0.64
  // after scaling.
  EXPECT_DOUBLE_EQ(m.share(0), 1.0);
  EXPECT_NEAR(m.share(1), 0.8 / 1.25, 1e-12);
  for (int i = 0; i < 10; ++i) m.finished(bytes, ns);
  std::vector<uint16_t> w(2);
  m.weights(w.data());
  EXPECT_EQ(w[1], LaneMeter::kMinWeight);  // never below: the lane stays measured
  // A lane without a piece keeps its share; a time that cannot be teaches nothing.
  const uint64_t one[2] = {1 << 20, 0};
  const int64_t t[2] = {1'000'000, 0};
  m.finished(one, t);
  EXPECT_EQ(m.share(1), static_cast<double>(LaneMeter::kMinWeight) / LaneMeter::kMaxWeight);
  const int64_t bad[2] = {-5, 1'000'000};
  m.finished(bytes, bad);
  EXPECT_DOUBLE_EQ(m.share(0), 1.0);
}

}  // namespace
}  // namespace dccl::net
