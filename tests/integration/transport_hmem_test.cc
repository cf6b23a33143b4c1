// Endpoints ask for FI_HMEM only when told to (TransportOptions::want_hmem), record
// whether they got it, and the cuda viability layer "provider FI_HMEM" is decided from
// the endpoints a transport actually opened, not from what providers offer.
#include <gtest/gtest.h>
#include <rdma/fabric.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mem/viability.hpp"
#include "net/fabric/fid.hpp"
#include "net/transport.hpp"

namespace dccl {
namespace {

using net::Transport;
using net::TransportOptions;

// Does `prov` offer RDM tagged endpoints with FI_HMEM (what `fi_info -c FI_HMEM` lists)?
bool offers_hmem(const std::string& prov) {
  net::InfoPtr hints(fi_allocinfo());
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG | FI_HMEM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_HMEM | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(prov.c_str());
  fi_info* list = nullptr;
  if (fi_getinfo(fi_version(), nullptr, nullptr, 0, hints.get(), &list) != 0) return false;
  net::InfoPtr owner(list);
  return list != nullptr;
}

TransportOptions opts(const std::string& prov, bool want_hmem, int rank = 0, int nranks = 1) {
  TransportOptions o;
  o.provider = prov;
  o.want_hmem = want_hmem;
  o.rank = rank;
  o.nranks = nranks;
  o.timeout = std::chrono::milliseconds(10000);
  o.trust_network = true;  // the endpoints libfabric opens, tcp;ofi_rxm's too
  return o;
}

// One rank, connected to itself.
std::unique_ptr<Transport> open_one(const std::string& prov, bool want_hmem) {
  auto t = Transport::create(opts(prov, want_hmem));
  t->connect({t->local_blob()});
  return t;
}

const mem::Layer* layer(const std::vector<mem::Layer>& layers, const std::string& name) {
  for (const auto& l : layers)
    if (l.name == name) return &l;
  return nullptr;
}

// Messages to self through the endpoint, host memory: inline, medium and large
// (shm's copy protocols differ by size).
void self_exchange(Transport& t) {
  for (size_t len : {size_t(64), size_t(100000), size_t(4) << 20}) {
    std::vector<char> out(len), in(len, 0);
    for (size_t i = 0; i < len; ++i) out[i] = static_cast<char>(i * 7 + len);
    net::Request rs, rr;
    t.irecv(0, in.data(), in.size(), 7, &rr);
    t.isend(0, out.data(), out.size(), 7, &rs);
    net::Request* both[] = {&rr, &rs};
    t.wait(both, 2, "self exchange");
    EXPECT_EQ(in, out) << len << " bytes";
  }
}

TEST(TransportHmem, ShmAskedForHmemHasIt) {
  if (!offers_hmem("shm")) GTEST_SKIP() << "this libfabric's shm does not offer FI_HMEM";
  auto t = open_one("shm", true);
  EXPECT_EQ(t->hmem_missing(), "");
  self_exchange(*t);  // host memory still moves over an FI_HMEM endpoint
  auto layers = mem::check_viability("cuda", "shm", t.get());
  const mem::Layer* l = layer(layers, "provider FI_HMEM");
  ASSERT_NE(l, nullptr);
  EXPECT_TRUE(l->pass) << l->detail;
  EXPECT_NE(l->detail.find("shm"), std::string::npos) << l->detail;
}

TEST(TransportHmem, NotAskedMeansWithout) {
  auto t = open_one("shm", false);
  const std::string m = t->hmem_missing();
  EXPECT_NE(m.find("shm"), std::string::npos) << m;
  EXPECT_NE(m.find("FI_HMEM"), std::string::npos) << m;
  EXPECT_NE(m.find("not requested"), std::string::npos) << m;
  self_exchange(*t);
}

// The layer follows the transport even where the provider offers FI_HMEM.
TEST(TransportHmem, CudaViabilityFailsOnTransportWithoutHmem) {
  auto t = open_one("shm", false);
  auto layers = mem::check_viability("cuda", "shm", t.get());
  const mem::Layer* l = layer(layers, "provider FI_HMEM");
  ASSERT_NE(l, nullptr);
  EXPECT_FALSE(l->pass);
  EXPECT_NE(l->detail.find("shm"), std::string::npos) << l->detail;
  EXPECT_NE(l->detail.find("without FI_HMEM"), std::string::npos) << l->detail;
  EXPECT_NE(mem::first_failure(layers), nullptr);
}

// A provider without FI_HMEM still opens when asked (without it), and says so.
TEST(TransportHmem, ProviderWithoutHmemOpensWithout) {
  auto t = open_one("tcp", true);
  const std::string m = t->hmem_missing();
  if (offers_hmem("tcp;ofi_rxm")) {
    EXPECT_EQ(m, "");
  } else {
    EXPECT_NE(m.find("tcp;ofi_rxm"), std::string::npos) << m;
    EXPECT_NE(m.find("does not offer"), std::string::npos) << m;
  }
  self_exchange(*t);
}

// Two (emulated) hosts: shm for self, tcp;ofi_rxm for the other rank. Only the endpoints
// in use count, and the one lacking FI_HMEM is named.
TEST(TransportHmem, MixedProvidersNameTheOneLacking) {
  if (!offers_hmem("shm") || offers_hmem("tcp;ofi_rxm")) GTEST_SKIP() << "needs shm with FI_HMEM, tcp without";
  std::vector<std::unique_ptr<Transport>> ts;
  std::vector<std::string> blobs;
  for (int r = 0; r < 2; ++r) {
    TransportOptions o = opts("", true, r, 2);
    o.host = r == 0 ? "hostA" : "hostB";
    ts.push_back(Transport::create(o));
    blobs.push_back(ts.back()->local_blob());
  }
  for (auto& t : ts) t->connect(blobs);
  EXPECT_EQ(ts[0]->provider_summary(), "shm+tcp;ofi_rxm");
  const std::string m = ts[0]->hmem_missing();
  EXPECT_NE(m.find("tcp;ofi_rxm endpoint"), std::string::npos) << m;
  EXPECT_EQ(m.find("shm"), std::string::npos) << m;
}

// sim memory is mapped and registered as host memory: no FI_HMEM layer.
TEST(TransportHmem, SimViabilityDoesNotNeedHmem) {
  auto t = open_one("shm", false);
  auto layers = mem::check_viability("sim", "shm", t.get());
  EXPECT_EQ(layer(layers, "provider FI_HMEM"), nullptr);
}

// Without a transport (dccl-info) the layer reports what providers offer.
TEST(TransportHmem, WithoutTransportReportsOffer) {
  auto layers = mem::check_viability("cuda", "shm");
  const mem::Layer* l = layer(layers, "provider FI_HMEM");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->detail.rfind("offered by", 0), 0u) << l->detail;
  EXPECT_EQ(l->pass, offers_hmem("shm")) << l->detail;
}

}  // namespace
}  // namespace dccl
