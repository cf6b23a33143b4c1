// The weighted split of a striped link (net/rails.hpp WireCut::each_weighted) and the
// rates behind its weights (net/fabric/lane_meter.hpp), without a network: pieces
// tile the message, follow the weights to a page, skip a lane whose share is nothing,
// and a meter's weights follow what its lanes delivered.
#include <gtest/gtest.h>

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

TEST(LaneMeter, EqualUntilEveryLaneIsMeasured) {
  LaneMeter m(3);
  std::vector<uint16_t> w(3);
  m.weights(w.data());
  for (uint16_t x : w) EXPECT_EQ(x, LaneMeter::kMaxWeight);
  m.sample(0, 1000000, 1000000);
  m.sample(1, 500000, 1000000);
  m.weights(w.data());  // lane 2 unmeasured
  for (uint16_t x : w) EXPECT_EQ(x, LaneMeter::kMaxWeight);
}

TEST(LaneMeter, WeightsFollowTheRates) {
  LaneMeter m(3);
  // 1 byte/ns, 0.5 byte/ns, 0.01 byte/ns over 1 ms each.
  m.sample(0, 1000000, 1000000);
  m.sample(1, 500000, 1000000);
  m.sample(2, 10000, 1000000);
  std::vector<uint16_t> w(3);
  m.weights(w.data());
  EXPECT_EQ(w[0], LaneMeter::kMaxWeight);
  EXPECT_EQ(w[1], LaneMeter::kMaxWeight / 2);
  EXPECT_EQ(w[2], LaneMeter::kMinWeight);  // floored: the lane keeps being measured
  // Lane 1 speeds up to 1 byte/ns: its rate moves halfway (0.75).
  m.sample(1, 500000 + 1000000, 2000000);
  m.weights(w.data());
  EXPECT_EQ(w[1], 768);
  EXPECT_DOUBLE_EQ(m.rate(1), 0.75);
}

TEST(LaneMeter, ShortSamplesAccumulate) {
  LaneMeter m(1);
  m.sample(0, 1000, LaneMeter::kMinSampleNs / 2);  // too short: not taken yet
  EXPECT_EQ(m.rate(0), 0.0);
  m.sample(0, 3000, LaneMeter::kMinSampleNs * 3 / 2);
  EXPECT_DOUBLE_EQ(m.rate(0), 3000.0 / (LaneMeter::kMinSampleNs * 3 / 2));
  // A meter that went backwards (a new endpoint) starts over from zero.
  m.sample(0, 100, 10);
  m.sample(0, 100 + 400000, 10 + 400000);
  EXPECT_DOUBLE_EQ(m.rate(0), 0.5 * (3000.0 / (LaneMeter::kMinSampleNs * 3 / 2) + 400100.0 / 400010.0));
}

}  // namespace
}  // namespace dccl::net
