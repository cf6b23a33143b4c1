// The weighted split of a striped link (net/rails.hpp WireCut::each_weighted) and the
// weights that fill the least-queued lanes (net/fabric/lane_fill.hpp), without a
// network: pieces tile the message, follow the weights to a page, skip a lane whose
// share is nothing, and a pipeline's messages go to the lanes that drained; the
// window a lane keeps (LaneWindow) follows its rate measured over spans long enough,
// and a burst held by the window hands a slow lane its share.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "net/fabric/lane_fill.hpp"
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
  const auto p = cut_of(c, len, std::vector<uint16_t>(8, kLaneWeightMax));
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

TEST(LaneSplit, ZeroWeightsTakeNoPiece) {
  // Weights 0, 1024, 0, 512: lanes 1 and 3 only, 2:1; the last lane with a weight
  // takes the rest. All the part's lanes at 0: equal pieces.
  const WireCut c = flows_cut(4);
  const size_t len = (size_t{3} << 20) + 100;
  const auto p = cut_of(c, len, {0, 1024, 0, 512});
  ASSERT_EQ(p.size(), 2u);
  expect_tiles(p, len);
  EXPECT_EQ(p[0].lane, 1);
  EXPECT_EQ(p[1].lane, 3);
  EXPECT_EQ(p[0].len, size_t{2} << 20);
  const auto q = cut_of(c, len, {0, 0, 0, 0});
  ASSERT_EQ(q.size(), 4u);
  expect_tiles(q, len);
}

std::vector<uint16_t> fill(const std::vector<uint64_t>& queued, uint64_t len) {
  std::vector<uint16_t> w(queued.size());
  fill_lanes(queued, len, w.data());
  return w;
}

TEST(LaneFill, IdleLanesShareEqually) {
  EXPECT_EQ(fill({0, 0, 0, 0}, 1 << 20), (std::vector<uint16_t>(4, kLaneWeightMax)));
  EXPECT_EQ(fill({5, 5, 5}, 4096), (std::vector<uint16_t>(3, kLaneWeightMax)));
}

TEST(LaneFill, TheLeastQueuedFillFirst) {
  // Queues 0, 1 MiB, 3 MiB, 0: 1 MiB fills lanes 0 and 3 only (to 512 KiB each).
  EXPECT_EQ(fill({0, 1 << 20, 3 << 20, 0}, 1 << 20), (std::vector<uint16_t>{1024, 0, 0, 1024}));
  // 3 MiB: lanes 0, 1, 3 filled to a level of 4/3 MiB (1.33 + 0.33 + 1.33 = 3);
  // lane 2 (3 MiB queued) none. Lane 1 a quarter of lane 0's.
  const auto w = fill({0, 1 << 20, 3 << 20, 0}, 3 << 20);
  EXPECT_EQ(w[0], 1024);
  EXPECT_EQ(w[3], 1024);
  EXPECT_EQ(w[2], 0);
  EXPECT_EQ(w[1], 256);
  // Enough to lift every lane past the deepest queue: all take some.
  const auto all = fill({0, 1 << 20, 3 << 20, 0}, 16 << 20);
  for (uint16_t x : all) EXPECT_GT(x, 0);
  EXPECT_LT(all[2], all[1]);
}

TEST(LaneFill, APipelineGoesToWhatDrained) {
  // Messages of 256 KiB posted while earlier ones drain: lane 2 drains at a quarter
  // of the others' rate. Count the bytes each lane is handed over 400 messages.
  const size_t n = 4;
  const double rate[n] = {1, 1, 0.25, 1};  // bytes drained per tick
  std::vector<double> queued(n, 0), handed(n, 0);
  std::vector<uint64_t> q(n);
  std::vector<uint16_t> w(n);
  const double msg = 256 << 10;
  for (int m = 0; m < 400; ++m) {
    for (size_t k = 0; k < n; ++k) q[k] = static_cast<uint64_t>(queued[k]);
    fill_lanes(q, static_cast<uint64_t>(msg), w.data());
    double sum = 0;
    for (uint16_t x : w) sum += x;
    for (size_t k = 0; k < n; ++k) {
      queued[k] += msg * w[k] / sum;
      handed[k] += msg * w[k] / sum;
      queued[k] = std::max(0.0, queued[k] - rate[k] * msg / 3.25);  // the lanes drain a message a tick together
    }
  }
  const double slow = handed[2] / (handed[0] + handed[1] + handed[3]) * 3;
  EXPECT_NEAR(slow, 0.25, 0.05) << "the slow lane is handed in proportion to its rate";
}

using WClock = LaneWindow::Clock;
using std::chrono::microseconds;

TEST(LaneWindow, FullOnlyWhenEveryLaneHoldsItsFloor) {
  LaneWindow w(3, 256 << 10);
  EXPECT_FALSE(w.full({0, 0, 0}));
  EXPECT_FALSE(w.full({1 << 20, 1 << 20, (256 << 10) - 1}));
  EXPECT_TRUE(w.full({256 << 10, 1 << 20, 300 << 10}));
  EXPECT_EQ(w.window(1), 256u << 10);
  LaneWindow never(2, 0);  // floor 0: a send never waits
  EXPECT_FALSE(never.full({1ULL << 40, 1ULL << 40}));
}

TEST(LaneWindow, AMeasuredRateWidensTheWindow) {
  // Lane 0 drains 1 GB/s while it stays busy: 1 ms of it is 1 MB, above the floor.
  LaneWindow w(2, 64 << 10);
  const WClock::time_point t0{};
  w.handed(0, 0, t0);
  w.drained(0, 1000000, t0 + microseconds(1000));  // 1 ms: too short a span, kept
  EXPECT_EQ(w.rate(0), 0.0);
  w.drained(0, 2000000, t0 + microseconds(3000));  // 3 MB over 3 ms
  EXPECT_NEAR(w.rate(0), 1e9, 1e6);
  EXPECT_NEAR(static_cast<double>(w.window(0)), 1e6, 1e3);
  EXPECT_EQ(w.window(1), 64u << 10);  // lane 1 unmeasured: its floor
  EXPECT_FALSE(w.full({900000, 1 << 20}));
  EXPECT_TRUE(w.full({1000000, 64 << 10}));
}

TEST(LaneWindow, ABurstOfCompletionsIsNoRate) {
  // Completions seen together right after the lane was handed its bytes: the span
  // is below kSampleTime, and emptying the lane drops it.
  LaneWindow w(1, 4096);
  const WClock::time_point t0{};
  w.handed(0, 0, t0);
  w.drained(0, 8 << 20, t0 + microseconds(5));
  w.handed(0, 0, t0 + microseconds(10));  // empty again: the span starts over
  w.drained(0, 1 << 20, t0 + microseconds(10 + 4000));
  EXPECT_NEAR(w.rate(0), (1 << 20) / 4e-3, 1e3);  // only the 1 MiB over 4 ms
}

TEST(LaneWindow, AHeldBurstHandsTheSlowLaneItsShare) {
  // 64 messages of 256 KiB posted at once (an allgather's block) to 2 lanes, lane 1
  // at a quarter of lane 0's rate. Without a window every message sees equal queues
  // and is cut equally; with one, messages wait until a lane drains below it and go
  // where it drained, and the burst ends close to the two lanes' joint bound.
  auto finish = [](uint64_t floor) {
    const double rate[2] = {4096, 1024};  // bytes per tick
    LaneWindow win(2, floor);
    std::vector<uint64_t> q(2, 0);
    std::vector<uint16_t> w(2);
    int left = 64, ticks = 0;
    const uint64_t msg = 256 << 10;
    while (left > 0 || q[0] + q[1] > 0) {
      while (left > 0 && !win.full(q)) {  // post what the window lets go
        fill_lanes(q, msg, w.data());
        const double sum = w[0] + w[1];
        const uint64_t to0 = static_cast<uint64_t>(static_cast<double>(msg) * w[0] / sum);
        q[0] += to0;
        q[1] += msg - to0;
        --left;
      }
      for (int k = 0; k < 2; ++k) q[k] -= std::min<uint64_t>(q[k], static_cast<uint64_t>(rate[k]));
      ++ticks;
    }
    return ticks;
  };
  const double bound = 64.0 * (256 << 10) / (4096 + 1024);  // both lanes busy to the end
  const int equal = finish(0), held = finish(256 << 10);
  EXPECT_NEAR(equal, 64.0 * (128 << 10) / 1024, 2);  // the slow lane's half sets the end
  EXPECT_LT(held, 1.2 * bound) << "equal " << equal << " held " << held << " bound " << bound;
}

}  // namespace
}  // namespace dccl::net
