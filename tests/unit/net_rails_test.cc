// Rails without a network: DCCL_NET_IFNAME parsing and validation against an
// interface list, the pair's rail and striping (symmetric), the wire cut, the
// blob's rail fields, and the topology text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/launcher.hpp"
#include "net/blob.hpp"
#include "net/fabric/provider.hpp"
#include "net/rails.hpp"

namespace dccl::net {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const core::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Rails, ParseIfnames) {
  EXPECT_TRUE(parse_ifnames("").empty());
  EXPECT_TRUE(parse_ifnames("  ").empty());
  EXPECT_EQ(parse_ifnames("eth0"), (std::vector<std::string>{"eth0"}));
  EXPECT_EQ(parse_ifnames(" eth1 , eth0 "), (std::vector<std::string>{"eth1", "eth0"}));
  for (const char* bad : {"eth0,", ",eth0", "a,,b", "a, ,b"})
    EXPECT_NE(error_of([&] { parse_ifnames(bad); }).find("empty interface name"), std::string::npos) << bad;
  EXPECT_NE(error_of([] { parse_ifnames("a,b,a"); }).find("named twice"), std::string::npos);
  std::string many;
  for (int i = 0; i <= kMaxRails; ++i) {
    if (i) many += ',';
    many += 'e';
    many += std::to_string(i);
  }
  EXPECT_NE(error_of([&] { parse_ifnames(many); }).find("at most 16 rails"), std::string::npos);
}

std::vector<OfferedRail> offered() {
  // The way tcp lists them: per interface and address family, loopback too.
  return {{"eth0", false, "fd00::2"}, {"eth0", true, "198.18.0.1"}, {"lo", true, "127.0.0.1"},
          {"eth1", true, "198.18.1.1"}, {"docker0", true, "172.17.0.1"}, {"eth2", false, "fe80::1"},
          {"eth1", true, "198.18.1.1"}};
}

std::vector<std::string> names_of(const std::vector<OfferedRail>& o, const std::vector<size_t>& idx) {
  std::vector<std::string> v;
  for (size_t i : idx) v.push_back(o[i].name + "/" + o[i].address);
  return v;
}

TEST(Rails, DefaultRailsAreNonLoopbackIpv4) {
  auto o = offered();
  EXPECT_EQ(names_of(o, choose_rails(o, {}, kTcpProvider)),
            (std::vector<std::string>{"eth0/198.18.0.1", "eth1/198.18.1.1"}));
  std::reverse(o.begin(), o.end());  // listed eth1 first: still rail 0 = eth0
  EXPECT_EQ(names_of(o, choose_rails(o, {}, kTcpProvider)),
            (std::vector<std::string>{"eth0/198.18.0.1", "eth1/198.18.1.1"}));
  EXPECT_TRUE(excluded_by_default("lo"));
  EXPECT_TRUE(excluded_by_default("docker0"));
  EXPECT_TRUE(excluded_by_default("virbr0"));
  EXPECT_FALSE(excluded_by_default("eth0"));
  // Only loopback (a fresh network namespace): the one the provider would use alone.
  std::vector<OfferedRail> lo_only{{"lo", false, "::1"}, {"lo", true, "127.0.0.1"}};
  EXPECT_EQ(names_of(lo_only, choose_rails(lo_only, {}, kTcpProvider)), (std::vector<std::string>{"lo/127.0.0.1"}));
  EXPECT_TRUE(choose_rails({}, {}, kTcpProvider).empty());
  // Natural name order, whatever order the provider lists them in.
  std::vector<OfferedRail> shuffled{{"eth10", true, ""}, {"eth2", true, ""}, {"eth1", true, ""}, {"ens5", true, ""}};
  EXPECT_EQ(names_of(shuffled, choose_rails(shuffled, {}, kTcpProvider)),
            (std::vector<std::string>{"ens5/", "eth1/", "eth2/", "eth10/"}));
  EXPECT_TRUE(natural_less("eth2", "eth10"));
  EXPECT_TRUE(natural_less("eth1", "eth01a"));
  EXPECT_FALSE(natural_less("eth1", "eth1"));
  EXPECT_TRUE(natural_less("eth", "eth0"));
  EXPECT_TRUE(natural_less("a9b", "a10a"));
  // At most kMaxRails.
  std::vector<OfferedRail> many;
  for (int i = 0; i < 20; ++i) many.push_back({"eth" + std::to_string(i), true, ""});
  EXPECT_EQ(choose_rails(many, {}, kTcpProvider).size(), static_cast<size_t>(kMaxRails));
}

TEST(Rails, IfnamePicksByNameInItsOrder) {
  auto o = offered();
  EXPECT_EQ(names_of(o, choose_rails(o, {"eth1", "eth0"}, kTcpProvider)),
            (std::vector<std::string>{"eth1/198.18.1.1", "eth0/198.18.0.1"}));
  // Named, loopback and bridges are allowed; an IPv6-only interface gets its IPv6 offer.
  EXPECT_EQ(names_of(o, choose_rails(o, {"lo", "docker0", "eth2"}, kTcpProvider)),
            (std::vector<std::string>{"lo/127.0.0.1", "docker0/172.17.0.1", "eth2/fe80::1"}));
  const std::string e = error_of([&] { choose_rails(o, {"eth0", "ib0"}, kTcpProvider); });
  EXPECT_NE(e.find("DCCL_NET_IFNAME"), std::string::npos) << e;
  EXPECT_NE(e.find("no interface 'ib0'"), std::string::npos) << e;
  EXPECT_NE(e.find("offered: eth0 (fd00::2), lo (127.0.0.1), eth1 (198.18.1.1), docker0 (172.17.0.1), eth2 (fe80::1)"),
            std::string::npos)
      << e;
}

Blob peer(const std::string& host, int local_rank, int local_size, int rails, uint64_t stripe = 128 << 10,
          bool shm = true) {
  Blob b;
  b.host = host;
  b.boot_id = "boot";
  b.local_rank = local_rank;
  b.local_size = local_size;
  b.stripe_bytes = stripe;
  if (shm) {
    b.endpoints.emplace_back(kShmProvider, "shm-" + host);
    b.rails.emplace_back();
  }
  for (int i = 0; i < rails; ++i) {
    b.endpoints.emplace_back(kTcpProvider, host + ":" + std::to_string(i));
    b.rails.push_back("eth" + std::to_string(i));
  }
  return b;
}

void expect_same(const PairPlan& x, const PairPlan& y) {
  EXPECT_EQ(x.provider, y.provider);
  EXPECT_EQ(x.home, y.home);
  EXPECT_EQ(x.lanes, y.lanes);
  EXPECT_EQ(x.stripe_min, y.stripe_min);
}

TEST(Rails, PairRailIsSymmetric) {
  std::vector<Blob> blobs;
  for (int h = 0; h < 3; ++h)
    for (int l = 0; l < 4; ++l) blobs.push_back(peer("h" + std::to_string(h), l, 4, 1 + (h + l) % 4));
  for (int a = 0; a < static_cast<int>(blobs.size()); ++a)
    for (int b = 0; b < static_cast<int>(blobs.size()); ++b) {
      for (const std::string forced : {"", "tcp;ofi_rxm"}) {
        const PairPlan p = plan_pair(blobs[a], a, blobs[b], b, forced);
        expect_same(p, plan_pair(blobs[b], b, blobs[a], a, forced));
        const int ra = static_cast<int>(blobs[a].rails_of(p.provider).size());
        const int rb = static_cast<int>(blobs[b].rails_of(p.provider).size());
        EXPECT_LT(p.home, std::min(ra, rb));
        EXPECT_EQ(p.lanes, 1);  // several ranks per host: never striped
      }
    }
}

TEST(Rails, RailChoice) {
  // Same host: shm; across hosts: tcp on the rail of the lower rank's local rank.
  Blob a0 = peer("a", 0, 2, 2), a1 = peer("a", 1, 2, 2), b0 = peer("b", 0, 2, 2), b1 = peer("b", 1, 2, 2);
  EXPECT_EQ(plan_pair(a0, 0, a1, 1, "").provider, "shm");
  PairPlan p = plan_pair(a1, 1, b1, 3, "");
  EXPECT_EQ(p.provider, "tcp;ofi_rxm");
  EXPECT_EQ(p.home, 1);  // same local rank: its own rail at both ends
  EXPECT_EQ(plan_pair(a0, 0, b0, 2, "").home, 0);
  EXPECT_EQ(plan_pair(a1, 1, b0, 2, "").home, 1);  // the lower rank (1) has local rank 1
  EXPECT_EQ(plan_pair(a0, 0, b1, 3, "").home, 0);
  // Forced tcp on one host: rails too.
  EXPECT_EQ(plan_pair(a0, 0, a1, 1, "tcp;ofi_rxm").provider, "tcp;ofi_rxm");
  // Different rail counts: modulo the smaller.
  Blob c5 = peer("c", 5, 8, 4), d7 = peer("d", 7, 8, 3);
  EXPECT_EQ(plan_pair(c5, 5, d7, 7, "").home, 5 % 3);
  EXPECT_EQ(plan_pair(d7, 7, c5, 5, "").home, 5 % 3);
  // A peer without rail names or fields (an old blob): one rail, local rank 0.
  Blob old = peer("e", 0, 0, 1, 0);
  old.rails.clear();
  EXPECT_EQ(plan_pair(c5, 5, old, 9, "").home, 0);
  // No common provider.
  Blob shm_only = peer("f", 0, 1, 0);
  const std::string e = error_of([&] { plan_pair(a0, 0, shm_only, 4, ""); });
  EXPECT_NE(e.find("no common provider between rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 4 (host f, offers shm)"), std::string::npos) << e;
}

TEST(Rails, StripingNeedsOneRankPerHostAndTwoRailsAtBothEnds) {
  Blob a = peer("a", 0, 1, 2, 128 << 10), b = peer("b", 0, 1, 3, 1 << 20);
  PairPlan p = plan_pair(a, 0, b, 1, "");
  EXPECT_EQ(p.lanes, 2);
  EXPECT_EQ(p.stripe_min, 1u << 20);  // the larger of the two
  expect_same(p, plan_pair(b, 1, a, 0, ""));
  EXPECT_EQ(plan_pair(a, 0, peer("b", 0, 2, 2), 1, "").lanes, 1);   // two ranks on b
  EXPECT_EQ(plan_pair(a, 0, peer("b", 0, 1, 1), 1, "").lanes, 1);   // one rail on b
  EXPECT_EQ(plan_pair(a, 0, peer("b", 0, 1, 2, 0), 1, "").lanes, 1);  // b turned striping off
  EXPECT_EQ(plan_pair(a, 0, peer("b", 0, 0, 2), 1, "").lanes, 1);   // b's local size unknown
}

struct Piece {
  int lane;
  size_t off, len;
  bool operator==(const Piece& o) const { return lane == o.lane && off == o.off && len == o.len; }
};

std::vector<Piece> pieces(const WireCut& c, size_t len, size_t base = 0) {
  std::vector<Piece> v;
  c.each(len, [&](int lane, size_t off, size_t l) { v.push_back({lane, base + off, l}); });
  EXPECT_EQ(v.size(), c.count(len));
  return v;
}

TEST(Rails, StripeCut) {
  WireCut c;
  c.part = 1 << 20;
  c.lanes = 2;
  c.stripe_min = 128 << 10;
  c.home = 1;
  EXPECT_EQ(pieces(c, 0), (std::vector<Piece>{{1, 0, 0}}));
  EXPECT_EQ(pieces(c, 1000), (std::vector<Piece>{{1, 0, 1000}}));
  EXPECT_EQ(pieces(c, 128 << 10), (std::vector<Piece>{{0, 0, 64 << 10}, {1, 64 << 10, 64 << 10}}));
  // 2.5 MiB: two full parts striped, the 512 KiB tail striped too.
  EXPECT_EQ(pieces(c, 5 << 19), (std::vector<Piece>{{0, 0, 512 << 10},
                                                     {1, 512 << 10, 512 << 10},
                                                     {0, 1 << 20, 512 << 10},
                                                     {1, 3 << 19, 512 << 10},
                                                     {0, 2 << 20, 256 << 10},
                                                     {1, (2 << 20) + (256 << 10), 256 << 10}}));
  // A tail below the stripe size goes whole on the home rail.
  EXPECT_EQ(pieces(c, (1 << 20) + 100).back(), (Piece{1, 1 << 20, 100}));
  // Pieces start page-aligned; uneven lengths leave the last piece short.
  c.lanes = 3;
  auto v = pieces(c, (128 << 10) + 1);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].len, 45056u);  // ceil(131073 / 3) = 43691 -> 11 pages
  EXPECT_EQ(v[2].off + v[2].len, (128u << 10) + 1);
  // Fewer pieces than lanes when the alignment swallows them.
  c.stripe_min = 1;
  EXPECT_EQ(pieces(c, 5000), (std::vector<Piece>{{0, 0, 4096}, {1, 4096, 904}}));
  // Off: one lane, or no stripe size.
  c.lanes = 1;
  EXPECT_EQ(pieces(c, 3 << 20).size(), 3u);
  c.lanes = 2;
  c.stripe_min = 0;
  EXPECT_EQ(pieces(c, 3 << 20).size(), 3u);
}

TEST(Rails, StripeCutCoversEveryByteOnceAndMatchesAStagedSender) {
  for (size_t part : {size_t{4096}, size_t{65536}, size_t{1} << 20})
    for (int lanes : {2, 3, 4, 7})
      for (uint64_t smin : {uint64_t{1}, uint64_t{4096}, uint64_t{100000}, uint64_t{1} << 20})
        for (size_t len : {size_t{1}, size_t{4095}, size_t{4096}, size_t{99999}, size_t{100000}, size_t{262145},
                           size_t{3} << 20, (size_t{5} << 20) + 17}) {
          WireCut c;
          c.part = part;
          c.lanes = lanes;
          c.stripe_min = smin;
          c.home = lanes - 1;
          const auto whole = pieces(c, len);
          size_t at = 0;
          for (const auto& p : whole) {
            EXPECT_EQ(p.off, at);
            EXPECT_GT(p.len, 0u);
            EXPECT_LT(p.lane, lanes);
            at += p.len;
          }
          EXPECT_EQ(at, len);
          // A staged sender posts one part at a time (each at most `part` long): the
          // receiver's cut of the whole message must yield the same pieces.
          std::vector<Piece> staged;
          for (size_t off = 0; off < len; off += part)
            for (const auto& p : pieces(c, std::min(part, len - off), off)) staged.push_back(p);
          EXPECT_EQ(staged, whole) << "part " << part << " lanes " << lanes << " min " << smin << " len " << len;
        }
}

TEST(Rails, BlobCarriesRails) {
  Blob b = peer("host-a", 3, 1, 2, 1 << 20);
  b.pid = 77;
  Blob d = Blob::decode(b.encode(), "test");
  EXPECT_EQ(d.local_rank, 3);
  EXPECT_EQ(d.local_size, 1);
  EXPECT_EQ(d.stripe_bytes, 1u << 20);
  EXPECT_EQ(d.rails, b.rails);
  EXPECT_EQ(d.rails_of(kTcpProvider), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(d.rail_name(2), "eth1");
  EXPECT_EQ(*d.address_for(kTcpProvider), "host-a:0");
  // Every truncation is refused.
  const std::string enc = b.encode();
  for (size_t n = 0; n < enc.size(); ++n) EXPECT_THROW(Blob::decode(enc.substr(0, n), "test"), core::Error) << n;
  // The blob before rails ("DNB2": addresses only) still decodes.
  std::string v2("DNB2", 4);
  auto put = [&](const std::string& s) {
    v2.push_back(static_cast<char>(s.size() & 0xff));
    v2.push_back(static_cast<char>(s.size() >> 8));
    v2 += s;
  };
  put("old");
  put("boot");
  put("12");
  v2.push_back(2);
  put("shm");
  put("s");
  put("tcp;ofi_rxm");
  put("t");
  Blob o = Blob::decode(v2, "old");
  EXPECT_EQ(o.host, "old");
  EXPECT_EQ(o.pid, 12);
  EXPECT_EQ(o.rails_of(kTcpProvider).size(), 1u);
  EXPECT_EQ(o.rail_name(1), "");
  EXPECT_EQ(o.local_size, 0);
  EXPECT_EQ(o.stripe_bytes, 0u);
  // Bounded: too many endpoints, or too long, is refused at both ends.
  Blob big = peer("x", 0, 1, 0);
  for (int i = 0; i < 64; ++i) {
    big.endpoints.emplace_back(kTcpProvider, "a");
    big.rails.emplace_back("e");
  }
  EXPECT_THROW(big.encode(), core::Error);
  EXPECT_THROW(Blob::decode(std::string("DNB3") + std::string(kMaxBlobBytes, 'x'), "test"), core::Error);
}

TEST(Rails, LauncherLocalRank) {
  for (const char* v : {"DCCL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    unsetenv(v);
  std::string src;
  EXPECT_EQ(core::launcher_local_rank(&src), -1);
  setenv("SLURM_LOCALID", "2", 1);
  setenv("LOCAL_RANK", "x", 1);  // not a number: skipped
  EXPECT_EQ(core::launcher_local_rank(&src), 2);
  EXPECT_EQ(src, "SLURM_LOCALID=2");
  setenv("DCCL_LOCAL_RANK", "5", 1);
  EXPECT_EQ(core::launcher_local_rank(&src), 5);
  EXPECT_EQ(src, "DCCL_LOCAL_RANK=5");
  for (const char* v : {"DCCL_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID"}) unsetenv(v);
}

TEST(Rails, TopologyText) {
  // 2 hosts x 1 rank, 2 rails each: striped; a third host with 2 ranks and 1 rail.
  std::vector<Blob> blobs{peer("h0", 0, 1, 2), peer("h1", 0, 1, 2), peer("h2", 0, 2, 1), peer("h2", 1, 2, 1)};
  auto lines = topology_lines(blobs, "");
  auto has = [&](const std::string& s) {
    for (const auto& l : lines)
      if (l == s) return true;
    ADD_FAILURE() << "missing line '" << s << "' in:\n" << testing::PrintToString(lines);
    return false;
  };
  has("rank 0 on h0 (local rank 0 of 1): 2 rails eth0+eth1 (tcp;ofi_rxm), shm, stripes parts >= 128K");
  has("rank 3 on h2 (local rank 1 of 2): 1 rail eth0 (tcp;ofi_rxm), shm");
  has("rank 0 -> 1: tcp;ofi_rxm striped over rails eth0+eth1 (parts >= 128K; smaller on eth0)");
  has("rank 1 -> 3: tcp;ofi_rxm on rail eth0");
  has("rank 2 -> 3: shm");
  // Many ranks: counts instead of pairs.
  auto agg = topology_lines(blobs, "", 2);
  EXPECT_EQ(agg.back(), "1 pair: tcp;ofi_rxm striped over rails eth0+eth1 (parts >= 128K; smaller on eth0)");
  // An untrusted network: its pairs take the socket path, and say so (shm stays).
  lines = topology_lines(blobs, "", 16, [](const std::string& p) { return p == "shm"; });
  has("rank 1 -> 3: DirectCCL's authenticated socket path (tcp;ofi_rxm is not trusted: DCCL_TRUST_NETWORK=0) on "
      "rail eth0");
  has("rank 2 -> 3: shm");
}

}  // namespace
}  // namespace dccl::net
