// The transport over two rails on one machine: the first non-loopback interface
// and loopback (DCCL_NET_IFNAME-style list), forked ranks on emulated hosts.
// Striped and unstriped messages arrive intact and in order; both rails carry
// bytes when striping, only the pair's rail otherwise; an unknown interface fails
// creation naming what exists.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "net/fabric/provider.hpp"
#include "net/rails.hpp"
#include "net/transport.hpp"
#include "net_ranks.hpp"

namespace dccl::net {
namespace {

using namespace dccl::net::nettest;

// The first non-loopback IPv4 interface tcp offers, or "" (then the tests skip).
std::string other_interface() {
  std::string why;
  for (const auto& o : offered_rails(kTcpProvider, &why))
    if (o.ipv4 && !excluded_by_default(o.name)) return o.name;
  return "";
}

TransportOptions rail_opts(const std::string& ifnames, int local_rank, int local_size, uint64_t stripe) {
  TransportOptions o;
  o.provider = "tcp";
  o.timeout = std::chrono::milliseconds(30000);
  o.ifnames = ifnames;
  o.local_rank = local_rank;
  o.local_size = local_size;
  o.stripe_bytes = stripe;
  o.max_part_bytes = 256 << 10;
  o.nranks = 2;
  o.trust_network = true;  // tcp;ofi_rxm's rails as libfabric opens them
  return o;
}

// Two forked ranks on hosts "h0" and "h1" run body(rank, transport).
void run_pair(TransportOptions base, const std::function<void(int, Transport&)>& body) {
  run_ranks(2, base, [&](Ctx& c) { body(c.rank, *c.t); }, false, [](int r) {
    std::string h(1, 'h');
    return h.append(std::to_string(r));
  });
}

// Each rank sends `lens` (one tag, in order) to the other and receives the same.
// `staged`: the sender posts each message part by part (256 KiB each), as the
// staged path does, while the receiver posts whole messages.
void exchange_messages(int rank, Transport& t, const std::vector<size_t>& lens, bool staged = false) {
  const int peer = 1 - rank;
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<std::unique_ptr<Request>> reqs;
  std::vector<Request*> ptrs;
  for (size_t k = 0; k < lens.size(); ++k) {
    in.emplace_back(lens[k] + 1, 0xee);
    reqs.push_back(std::make_unique<Request>());
    t.irecv(peer, in.back().data(), lens[k], 7, reqs.back().get());
    ptrs.push_back(reqs.back().get());
  }
  for (size_t k = 0; k < lens.size(); ++k) {
    out.emplace_back(lens[k]);
    for (size_t i = 0; i < lens[k]; ++i) out.back()[i] = pattern(rank, i, static_cast<int>(k));
    const size_t part = staged ? 256 << 10 : lens[k] + 1;
    for (size_t off = 0; off == 0 || off < lens[k]; off += part) {
      reqs.push_back(std::make_unique<Request>());
      t.isend(peer, out.back().data() + off, std::min(part, lens[k] - off), 7, reqs.back().get());
      ptrs.push_back(reqs.back().get());
    }
  }
  t.wait(ptrs.data(), ptrs.size(), "rails exchange");
  for (size_t k = 0; k < lens.size(); ++k) {
    CHILD_CHECK(reqs[k]->bytes == lens[k]);
    for (size_t i = 0; i < lens[k]; ++i) CHILD_CHECK(in[k][i] == pattern(peer, i, static_cast<int>(k)));
    CHILD_CHECK(in[k][lens[k]] == 0xee);
  }
}

// "tcp;ofi_rxm on lo: sent N bytes, ..." (or "tcp;ofi_rxm on lo, flow F of M: sent N
// bytes, ...", one line per flow) -> N for the rail, summed over its flows; -1 when
// not listed.
long long sent_on(const Transport& t, const std::string& rail) {
  long long sum = -1;
  for (const auto& line : t.rail_counters()) {
    const std::string head = std::string(kTcpProvider) + " on " + rail;
    if (line.rfind(head + ":", 0) != 0 && line.rfind(head + ", flow ", 0) != 0) continue;
    const size_t at = line.find(": sent ");
    if (at == std::string::npos) continue;
    sum = std::max(sum, 0LL) + std::stoll(line.substr(at + 7));
  }
  return sum;
}

TEST(TransportRails, UnknownInterfaceFailsNamingWhatExists) {
  for (const char* prov : {"tcp", ""}) {
    TransportOptions o = rail_opts("lo,nosuch0", 0, 1, 0);
    o.provider = prov;
    o.nranks = 1;
    try {
      Transport::create(o);
      ADD_FAILURE() << "created with DCCL_NET_IFNAME=lo,nosuch0";
    } catch (const core::Error& e) {
      const std::string w = e.what();
      EXPECT_EQ(e.code(), dcclInvalidArgument);
      EXPECT_NE(w.find("rank 0"), std::string::npos) << w;
      EXPECT_NE(w.find("no interface 'nosuch0'"), std::string::npos) << w;
      EXPECT_NE(w.find("offered: "), std::string::npos) << w;
      EXPECT_NE(w.find("lo (127.0.0.1)"), std::string::npos) << w;
    }
  }
}

TEST(TransportRails, StripedOverBothRails) {
  const std::string other = other_interface();
  if (other.empty()) GTEST_SKIP() << "tcp offers no non-loopback interface here";
  run_pair(rail_opts(other + ",lo", 0, 1, 64 << 10), [&](int rank, Transport& t) {
    // Below, at and above the stripe size, several parts, a short tail; in order.
    exchange_messages(rank, t, {0, 1, (64 << 10) - 1, 64 << 10, (1 << 20) + 7, 3 << 20, 100});
    // A sender posting part by part meets a receiver posting the whole.
    exchange_messages(rank, t, {(1 << 20) + 4096, 5 << 18}, true);
    CHILD_CHECK(sent_on(t, other) > (2 << 20));
    CHILD_CHECK(sent_on(t, "lo") > (2 << 20));
    CHILD_CHECK(t.topology().size() == 3);
    CHILD_CHECK(t.topology()[2].find("rank 0 -> 1: tcp;ofi_rxm striped over rails " + other + "+lo") == 0);
  });
}

TEST(TransportRails, OneRailPerPairWithoutStriping) {
  const std::string other = other_interface();
  if (other.empty()) GTEST_SKIP() << "tcp offers no non-loopback interface here";
  // Two ranks per host (local size 2): never striped. Both local rank 1: rail 1 (lo);
  // the other rail, unused, is closed.
  run_pair(rail_opts(other + ",lo", 1, 2, 64 << 10), [&](int rank, Transport& t) {
    exchange_messages(rank, t, {1, 3 << 20});
    CHILD_CHECK(sent_on(t, "lo") >= (3 << 20));
    CHILD_CHECK(sent_on(t, other) == -1);
  });
  // Striping off (0) with one rank per host: the lower rank's local rank (0) picks.
  run_pair(rail_opts(other + ",lo", 0, 1, 0), [&](int rank, Transport& t) {
    exchange_messages(rank, t, {3 << 20});
    CHILD_CHECK(sent_on(t, other) >= (3 << 20));
    CHILD_CHECK(sent_on(t, "lo") == -1);
  });
}

}  // namespace
}  // namespace dccl::net
