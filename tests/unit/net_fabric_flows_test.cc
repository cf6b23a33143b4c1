// Flows on libfabric without a network (net/rails.hpp): how many endpoints a rank
// opens per rail, the pair's number from both ends' blobs (the smaller, never more
// than either opened), the lanes and cut of a pair with flows, the blob's flow
// fields, and the topology text.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "net/blob.hpp"
#include "net/fabric/provider.hpp"
#include "net/rails.hpp"

namespace dccl::net {
namespace {

// A rank on `host` with `rails` tcp rails of `opened` flows each, wishing `wish`.
Blob peer(const std::string& host, int wish, int opened, int rails = 1, int local_size = 2) {
  Blob b;
  b.host = host;
  b.boot_id = "boot";
  b.local_size = local_size;
  b.stripe_bytes = 128 << 10;
  b.flows = wish;
  b.endpoints.emplace_back(kShmProvider, "shm-" + host);
  b.rails.emplace_back();
  b.flow_addrs.emplace_back();
  for (int i = 0; i < rails; ++i) {
    b.endpoints.emplace_back(kTcpProvider, host + ":" + std::to_string(i));
    b.rails.push_back("eth" + std::to_string(i));
    b.flow_addrs.emplace_back();
    for (int f = 1; f < opened; ++f) b.flow_addrs.back().push_back(host + ":" + std::to_string(i) + "/" + std::to_string(f));
  }
  return b;
}

TEST(FabricFlows, OpenedPerProvider) {
  // Automatic: tcp across hosts several, on one host 1; shm always 1; efa and others 1.
  EXPECT_EQ(flows_to_open(0, kTcpProvider, false), kFabricRemoteFlows);
  EXPECT_GT(kFabricRemoteFlows, 1);
  EXPECT_EQ(flows_to_open(0, kTcpProvider, true), 1);
  EXPECT_EQ(flows_to_open(0, kShmProvider, false), 1);
  EXPECT_EQ(flows_to_open(0, "efa", false), 1);
  EXPECT_EQ(flows_to_open(0, "verbs;ofi_rxm", false), 1);
  // Set: as set (up to the ceiling), on every provider but shm, on one host too.
  EXPECT_EQ(flows_to_open(3, kTcpProvider, true), 3);
  EXPECT_EQ(flows_to_open(4, "efa", false), 4);
  EXPECT_EQ(flows_to_open(5, kShmProvider, false), 1);
  EXPECT_EQ(flows_to_open(64, kTcpProvider, false), kMaxFabricFlows);
  EXPECT_EQ(flows_to_open(1, kTcpProvider, false), 1);
}

TEST(FabricFlows, PairTakesTheSmallerAtBothEnds) {
  struct Case {
    int wish_a, open_a, wish_b, open_b;
    bool same_host;
    int want;
  };
  const Case cases[] = {
      {0, 8, 0, 8, false, 8},  // automatic across hosts
      {0, 8, 3, 3, false, 3},  // the smaller wish
      {2, 2, 0, 8, false, 2},
      {6, 6, 6, 4, false, 4},  // one end opened fewer (a flow failed to open)
      {0, 8, 0, 8, true, 1},   // automatic on one host
      {3, 3, 3, 3, true, 3},   // set: loopback too
      {3, 3, 1, 1, true, 1},
      {0, 1, 0, 1, false, 1},  // an older peer: no flows published
  };
  for (const Case& c : cases) {
    const int ab = pair_flows(c.wish_a, c.wish_b, kTcpProvider, c.same_host, c.open_a, c.open_b);
    const int ba = pair_flows(c.wish_b, c.wish_a, kTcpProvider, c.same_host, c.open_b, c.open_a);
    EXPECT_EQ(ab, c.want) << c.wish_a << "/" << c.open_a << " vs " << c.wish_b << "/" << c.open_b;
    EXPECT_EQ(ab, ba);
  }
  EXPECT_EQ(pair_flows(4, 4, kShmProvider, true, 1, 1), 1);
  EXPECT_EQ(pair_flows(0, 0, "efa", false, 1, 1), 1);
}

TEST(FabricFlows, PlanFromBlobs) {
  // Two hosts: automatic at both ends, 8 opened each: 8 flows; one wishes 3: 3.
  const Blob a = peer("h0", 0, 8), b = peer("h1", 0, 8), c = peer("h1", 3, 3);
  EXPECT_EQ(plan_pair(a, 0, b, 1, "").flows, 8);
  EXPECT_EQ(plan_pair(b, 1, a, 0, "").flows, 8);
  EXPECT_EQ(plan_pair(a, 0, c, 2, "").flows, 3);
  // One host: shm, one flow whatever was opened.
  const Blob d = peer("h0", 4, 4);
  EXPECT_EQ(plan_pair(d, 0, peer("h0", 4, 4), 1, "").provider, kShmProvider);
  EXPECT_EQ(plan_pair(d, 0, peer("h0", 4, 4), 1, "").flows, 1);
  // Forced tcp on one host: the set number.
  EXPECT_EQ(plan_pair(d, 0, peer("h0", 4, 4), 1, kTcpProvider).flows, 4);
  // Striped (one rank per host, 2 rails): the fewest opened on either rail counts.
  Blob s0 = peer("h0", 0, 8, 2, 1), s1 = peer("h1", 0, 8, 2, 1);
  s1.flow_addrs[2].resize(4);  // rail eth1 of h1 opened 5
  const PairPlan p = plan_pair(s0, 0, s1, 1, "");
  EXPECT_EQ(p.lanes, 2);
  EXPECT_EQ(p.flows, 5);
  // Not striped (two ranks per host): only the home rail counts.
  Blob u0 = peer("h0", 0, 8, 2), u1 = peer("h1", 0, 8, 2);
  u1.flow_addrs[2].resize(1);  // eth1 of h1 opened 2; the pair's home is eth0
  EXPECT_EQ(plan_pair(u0, 0, u1, 1, "").home, 0);
  EXPECT_EQ(plan_pair(u0, 0, u1, 1, "").flows, 8);
}

TEST(FabricFlows, LanesAndCut) {
  PairPlan p;
  p.provider = kTcpProvider;
  EXPECT_TRUE(spread_lanes(p).empty());  // one rail, one flow: nothing cut
  EXPECT_EQ(spread_cut(p, 1 << 20).lanes, 1);
  // Flows on the home rail: one lane per flow, flow 0 the home lane.
  p.home = 1;
  p.flows = 4;
  EXPECT_EQ(spread_lanes(p), (std::vector<std::pair<int, int>>{{1, 0}, {1, 1}, {1, 2}, {1, 3}}));
  WireCut c = spread_cut(p, SIZE_MAX);
  EXPECT_EQ(c.lanes, 4);
  EXPECT_EQ(c.home, 0);
  EXPECT_EQ(c.stripe_min, kFlowsMinBytes);
  // Below the minimum: whole on flow 0; at it: one piece per flow, every byte once.
  std::vector<std::tuple<int, size_t, size_t>> got;
  auto collect = [&](size_t len) {
    got.clear();
    c.each(len, [&](int lane, size_t off, size_t n) { got.emplace_back(lane, off, n); });
  };
  collect(kFlowsMinBytes - 4096);
  EXPECT_EQ(got, (std::vector<std::tuple<int, size_t, size_t>>{{0, 0, kFlowsMinBytes - 4096}}));
  const size_t len = (size_t{16} << 20) + 12345;
  collect(len);
  ASSERT_EQ(got.size(), 4u);
  size_t next = 0;
  std::set<int> lanes;
  for (const auto& [lane, off, n] : got) {
    EXPECT_EQ(off, next);
    next += n;
    lanes.insert(lane);
  }
  EXPECT_EQ(next, len);
  EXPECT_EQ(lanes.size(), 4u);
  // Rails x flows: flow-major, lane `home` is (home rail, flow 0); the larger minimum.
  PairPlan s;
  s.provider = kTcpProvider;
  s.home = 1;
  s.lanes = 2;
  s.stripe_min = 128 << 10;
  s.flows = 3;
  EXPECT_EQ(spread_lanes(s), (std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}}));
  const WireCut sc = spread_cut(s, 1 << 30);
  EXPECT_EQ(sc.lanes, 6);
  EXPECT_EQ(sc.home, 1);
  // Rails from the stripe size (each rail's flow 0: lanes 0 and 1), every flow from
  // kFlowsMinBytes: a part between the two is still striped over the rails.
  EXPECT_EQ(sc.stripe_min, 128u << 10);
  EXPECT_EQ(sc.near, 2);
  EXPECT_EQ(sc.all_min, kFlowsMinBytes);
  EXPECT_EQ(sc.part, size_t{1} << 30);
  auto cut_of = [&](size_t n) {
    std::vector<std::tuple<int, size_t, size_t>> v;
    sc.each(n, [&](int lane, size_t off, size_t k) { v.emplace_back(lane, off, k); });
    return v;
  };
  EXPECT_EQ(cut_of(64 << 10), (std::vector<std::tuple<int, size_t, size_t>>{{1, 0, 64 << 10}}));
  EXPECT_EQ(cut_of(192 << 10), (std::vector<std::tuple<int, size_t, size_t>>{{0, 0, 96 << 10}, {1, 96 << 10, 96 << 10}}));
  const auto big = cut_of(6 * kFlowsMinBytes);
  ASSERT_EQ(big.size(), 6u);
  for (size_t k = 0; k < big.size(); ++k)
    EXPECT_EQ(big[k], std::make_tuple(static_cast<int>(k), k * kFlowsMinBytes, kFlowsMinBytes));
  // A stripe size at or above kFlowsMinBytes: one tier, every lane from it.
  s.stripe_min = 512 << 10;
  EXPECT_EQ(spread_cut(s, 1 << 30).stripe_min, 512u << 10);
  EXPECT_EQ(spread_cut(s, 1 << 30).all_min, 0u);
  s.stripe_min = 128 << 10;
  // Rails alone: as before (the stripe size).
  s.flows = 1;
  EXPECT_EQ(spread_cut(s, 1 << 30).stripe_min, 128u << 10);
  EXPECT_EQ(spread_cut(s, 1 << 30).lanes, 2);
}

TEST(FabricFlows, BlobCarriesFlows) {
  Blob b = peer("host-a", 5, 3, 2);
  b.sock = "198.18.0.1:4000";
  const Blob d = Blob::decode(b.encode(), "test");
  EXPECT_EQ(d.flows, 5);
  EXPECT_EQ(d.flow_addrs, b.flow_addrs);
  EXPECT_EQ(d.sock, b.sock);
  EXPECT_EQ(d.flows_on(0), 1);  // shm
  EXPECT_EQ(d.flows_on(1), 3);
  EXPECT_EQ(d.flow_address(2, 0), "host-a:1");
  EXPECT_EQ(d.flow_address(2, 2), "host-a:1/2");
  // No socket path and no flows: still every field, and every truncation refused.
  Blob e = peer("host-b", 0, 1);
  const std::string enc = e.encode();
  EXPECT_EQ(Blob::decode(enc, "test").flows_on(1), 1);
  for (size_t n = 0; n < enc.size(); ++n) EXPECT_THROW(Blob::decode(enc.substr(0, n), "test"), core::Error) << n;
  // A blob of the format before flows ("DNB3": no flow fields) decodes with one flow.
  std::string v3 = enc.substr(0, enc.size() - 1 - 2 * 1 - 2);  // less the flow fields and the empty sock
  v3[3] = '3';
  const Blob o = Blob::decode(v3, "old");
  EXPECT_EQ(o.flows, 0);
  EXPECT_EQ(o.flows_on(1), 1);
  EXPECT_EQ(o.rails, e.rails);
  // The flow addresses must match the endpoints.
  Blob bad = peer("x", 0, 2);
  bad.flow_addrs.pop_back();
  EXPECT_THROW(bad.encode(), core::Error);
}

TEST(FabricFlows, TopologyText) {
  std::vector<Blob> blobs{peer("h0", 0, 8), peer("h1", 0, 8), peer("h1", 1, 1)};
  const auto lines = topology_lines(blobs, "");
  auto has = [&](const std::string& s) {
    for (const auto& l : lines)
      if (l == s) return;
    ADD_FAILURE() << "missing line '" << s << "' in:\n" << testing::PrintToString(lines);
  };
  has("rank 0 -> 1: tcp;ofi_rxm on rail eth0, 8 flows per rail (parts >= 256K cut over them)");
  has("rank 0 -> 2: tcp;ofi_rxm on rail eth0");
  has("rank 1 -> 2: shm");
}

}  // namespace
}  // namespace dccl::net
