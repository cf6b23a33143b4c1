// Which providers carry data (net/fabric/provider.hpp's trust table, DCCL_TRUST_NETWORK):
// on an untrusted network peers on other hosts are reached only over DirectCCL's
// authenticated socket path, at every size, tcp;ofi_rxm is not opened, device memory
// cannot take the direct path to them, and settings that would route data over an
// untrusted provider are refused by name. Also the socket path's bound on what a
// peer can make it buffer (SockPath::kMaxUnexpectedBytes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "net/fabric/provider.hpp"
#include "net/sock/sock_path.hpp"
#include "net_ranks.hpp"

namespace dccl::net {
namespace {

using namespace dccl::net::nettest;

std::string two_hosts(int r) { return r < 2 ? "hostA" : "hostB"; }

TransportOptions untrusted_auto() {
  TransportOptions o = opts("");
  o.trust_network = false;
  o.sock_bytes = uint64_t(64) << 20;  // the setting's default: every size goes over sockets anyway
  return o;
}

TEST(TransportTrust, TableSaysWhichProvidersAreTrusted) {
  EXPECT_TRUE(provider_trusted("shm"));
  EXPECT_TRUE(provider_trusted("efa"));
  EXPECT_TRUE(provider_trusted("verbs;ofi_rxm"));
  std::string why;
  EXPECT_FALSE(provider_trusted("tcp;ofi_rxm", &why));
  EXPECT_NE(why.find("source address"), std::string::npos) << why;
  EXPECT_FALSE(provider_trusted("udp;ofi_rxd"));
  EXPECT_FALSE(provider_trusted("sockets"));
  EXPECT_FALSE(provider_trusted("somethingnew", &why));
  EXPECT_FALSE(why.empty());
}

// Two emulated hosts, network not trusted: shm inside each, the socket path between
// them for every size (above DCCL_NET_SOCK_BYTES too), no libfabric tcp endpoint, and
// the transport says why device memory must be staged.
TEST(TransportTrust, UntrustedNetworkCarriesEverythingOnSockets) {
  TransportOptions o = untrusted_auto();
  o.sock_bytes = 4096;  // smaller than the messages below: they still take sockets
  run_ranks(4, o, [](Ctx& c) {
    CHILD_CHECK(c.t->provider_summary() == "shm+tcp (DirectCCL sockets)");
    const std::string why = c.t->untrusted_routes();
    CHILD_CHECK(why.find("tcp;ofi_rxm, which is not trusted") != std::string::npos);
    for (const std::string& l : c.t->rail_counters()) CHILD_CHECK(l.find("tcp;ofi_rxm") == std::string::npos);
    const int peer = c.rank ^ 2;  // the same place on the other host
    size_t sent_before = 0;
    for (size_t len : {size_t(8), size_t(3) << 20}) {
      std::vector<uint8_t> out(len), in(len);
      fill(out, c.rank, 4);
      Request rs, rr;
      send_recv(c, peer, out.data(), peer, in.data(), len, 9, "exchange", rs, rr);
      CHILD_CHECK(verify(in, len, peer, 4));
      sent_before += len;
    }
    bool counted = false;  // "socket path...: sent N bytes, ..." with every byte sent
    for (const std::string& l : c.t->rail_counters())
      if (l.rfind("socket path", 0) == 0 && l.find(": sent " + std::to_string(sent_before) + " bytes") != std::string::npos)
        counted = true;
    CHILD_CHECK(counted);
  }, false, two_hosts);
}

// The same with the network trusted: tcp;ofi_rxm as before.
TEST(TransportTrust, TrustedNetworkOpensTcp) {
  TransportOptions o = untrusted_auto();
  o.trust_network = true;
  run_ranks(4, o, [](Ctx& c) {
    CHILD_CHECK(c.t->provider_summary() == "shm+tcp;ofi_rxm");
    CHILD_CHECK(c.t->untrusted_routes().empty());
  }, false, two_hosts);
}

// DCCL_NET_SOCK_BYTES=0 asks for host memory over tcp;ofi_rxm: refused on an
// untrusted network, naming both settings, instead of routing data over rxm.
TEST(TransportTrust, SockBytesZeroErrorNamesTheSettings) {
  TransportOptions o = untrusted_auto();
  o.sock_bytes = 0;
  o.nranks = 2;
  o.rank = 0;
  o.host = "hostA";
  auto a = Transport::create(o);
  o.rank = 1;
  o.host = "hostB";
  auto b = Transport::create(o);
  try {
    a->connect({a->local_blob(), b->local_blob()});
    ADD_FAILURE() << "connected with DCCL_NET_SOCK_BYTES=0 over an untrusted network";
  } catch (const core::Error& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.code(), dcclInvalidUsage);
    EXPECT_NE(w.find("rank 0"), std::string::npos) << w;
    EXPECT_NE(w.find("DCCL_NET_SOCK_BYTES=0"), std::string::npos) << w;
    EXPECT_NE(w.find("DCCL_TRUST_NETWORK=1"), std::string::npos) << w;
  }
}

// Another untrusted provider forced for every peer is refused, naming the opt-in.
TEST(TransportTrust, UntrustedForcedProviderRefused) {
  TransportOptions o = opts("sockets");
  o.trust_network = false;
  try {
    Transport::create(o);
    ADD_FAILURE() << "opened DCCL_PROVIDER=sockets on an untrusted network";
  } catch (const core::Error& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.code(), dcclInvalidUsage);
    EXPECT_NE(w.find("not trusted"), std::string::npos) << w;
    EXPECT_NE(w.find("DCCL_TRUST_NETWORK=1"), std::string::npos) << w;
  }
}

// Messages nobody asked for yet: past kMaxUnexpectedBytes from one peer the path
// stops reading it (TCP holds the sender) until a receive is posted; then every
// message still reaches the receive with its tag, in whatever order they are posted.
TEST(TransportTrust, UnexpectedBeyondTheBoundWaitsForReceives) {
  const size_t len = SockPath::kMaxUnexpectedBytes / 2 + 4096;  // the second one crosses the bound
  run_ranks(2, opts("tcpsock", 60000), [len](Ctx& c) {
    constexpr int kMsgs = 3;
    if (c.rank == 0) {
      std::vector<std::vector<uint8_t>> out(kMsgs, std::vector<uint8_t>(len));
      std::vector<Request> rs(kMsgs);
      std::vector<Request*> all;
      for (int k = 0; k < kMsgs; ++k) {
        fill(out[k], 0, k);
        c.t->isend(1, out[k].data(), len, 100 + k, &rs[k]);
        all.push_back(&rs[k]);
      }
      c.barrier("posted");
      c.t->wait(all.data(), all.size(), "sends");
      return;
    }
    c.barrier("posted");
    std::vector<std::vector<uint8_t>> in(kMsgs, std::vector<uint8_t>(len));
    std::vector<Request> rr(kMsgs);
    std::vector<Request*> all;
    for (int k = kMsgs; k-- > 0;) {  // the last message first: the others are taken as unexpected
      c.t->irecv(0, in[k].data(), len, 100 + k, &rr[k]);
      all.push_back(&rr[k]);
    }
    c.t->wait(all.data(), all.size(), "receives");
    for (int k = 0; k < kMsgs; ++k) CHILD_CHECK(verify(in[k], len, 0, k));
  });
}

}  // namespace
}  // namespace dccl::net
