// The transport's paths opened (net/fabric_transport.hpp): libfabric endpoints of the
// providers a rank may need (shm, each rail of tcp;ofi_rxm, or the one DCCL_PROVIDER
// forces), the socket path on the TCP rails, and the registration of buffers with
// the endpoints.
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "net/fabric_transport.hpp"

namespace dccl::net {

FabricTransport::FabricTransport(const TransportOptions& o) : LinkTransport(o) {
  reap_orphaned_shm_regions();
  if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks)
    core::raise(dcclInvalidArgument, "transport: rank " + std::to_string(o.rank) +
                                         " out of range for " + std::to_string(o.nranks) +
                                         " ranks");
  api_version();  // throws when the runtime is too old
  forced_ = canonical_provider(o.provider);
  if (forced_.empty()) {
    // None given: the user's choice, under the settings' rule (core::provider_choice).
    forced_ = canonical_provider(core::provider_choice());
    if (!forced_.empty()) DCCL_INFO("net: the environment selects provider %s for every peer", forced_.c_str());
  }
  self_.host = o.host.empty() ? local_hostname() : o.host;
  self_.boot_id = local_boot_id();
  self_.pid = getpid();
  self_.local_rank = std::max(o.local_rank, 0);
  self_.local_size = std::max(o.local_size, 0);
  self_.stripe_bytes = o.stripe_bytes;
  try {
    ifnames_ = parse_ifnames(o.ifnames);
  } catch (const core::Error& e) {
    core::raise(e.code(), core::describe(o.rank, "transport", e.what()));
  }

  std::string why;
  if (!forced_.empty() && !trusted(forced_)) {
    if (forced_ != kTcpProvider) {
      bool missing = false;
      const std::string refusal = forced_provider_refusal("DCCL_PROVIDER", forced_, false, &missing);
      if (missing) unavailable(refusal);
      core::raise(dcclInvalidUsage, core::describe(o.rank, "transport", refusal));
    }
    // Forced tcp on an untrusted network: every pair, this rank with itself included,
    // over the socket path; no libfabric endpoint at all.
    if (!publish_rails(&why)) unavailable("provider '" + forced_ + "' is unavailable: " + why);
  } else if (!forced_.empty()) {
    const bool ok = forced_ == kTcpProvider ? open_rails(forced_, &why) : open(forced_, &why);
    if (!ok) unavailable("provider '" + forced_ + "' is unavailable: " + why);
    if (forced_ != kTcpProvider && !ifnames_.empty())
      DCCL_INFO("net: DCCL_NET_IFNAME ignored: provider %s is opened once, without rails", forced_.c_str());
  } else {
    std::string why_tcp;
    bool shm = open(kShmProvider, &why);
    bool tcp = trusted(kTcpProvider) ? open_rails(kTcpProvider, &why_tcp) : publish_rails(&why_tcp);
    if (!shm && !tcp)
      unavailable("neither shm (" + why + ") nor tcp;ofi_rxm (" + why_tcp + ") can be opened");
    if (!shm)
      DCCL_WARN("net: shm unavailable (%s); same-host peers will use tcp;ofi_rxm", why.c_str());
    if (!tcp)  // connect() fails with the reason if a peer turns out to be remote
      DCCL_INFO("net: tcp;ofi_rxm unavailable (%s); only same-host peers are reachable",
                why_tcp.c_str());
  }
  std::vector<std::string> tcp_ips, tcp_rails;
  self_.flows = std::clamp(o.flows, 0, 255);
  for (auto& ep : eps_) {
    if (ep->flow() > 0) {  // a further flow of the endpoint before it
      self_.flow_addrs.back().push_back(ep->address());
      continue;
    }
    self_.endpoints.emplace_back(ep->provider(), ep->address());
    self_.rails.push_back(ep->rail());
    self_.flow_addrs.emplace_back();
    if (ep->provider() != kTcpProvider) continue;
    tcp_ips.push_back(sockaddr_ip(ep->address()));
    tcp_rails.push_back(ep->rail());
  }
  for (const auto& [rail, addr] : unopened_) {
    self_.endpoints.emplace_back(kTcpProvider, addr);
    self_.rails.push_back(rail);
    self_.flow_addrs.emplace_back();
    tcp_ips.push_back(sockaddr_ip(addr));
    tcp_rails.push_back(rail);
  }
  // Untrusted tcp: the socket path carries every size (connect() refuses
  // DCCL_NET_SOCK_BYTES=0 if a pair needs it).
  const uint64_t sock_max = unopened_.empty() ? o.sock_bytes : UINT64_MAX;
  if (sock_max > 0 && !tcp_ips.empty() &&
      std::find(tcp_ips.begin(), tcp_ips.end(), std::string()) == tcp_ips.end()) {
    sock_ = std::make_unique<SockPath>(o.rank, sock_max, o.timeout, tcp_ips, tcp_rails, o.secret, o.tcp_congestion);
    sock_->set_flows(o.flows);
    sock_->set_flow_window(o.flow_window);
    self_.sock = sock_->address();
  }
}

bool FabricTransport::publish_rails(std::string* why) {
  std::vector<Rail> rails;
  try {
    rails = find_rails(kTcpProvider, ifnames_, why, false);
  } catch (const core::Error& e) {
    core::raise(e.code(), core::describe(opts_.rank, "transport", e.what()));
  }
  std::string names;
  for (auto& r : rails) {
    const fi_info* i = r.info.info.get();
    if (!i->src_addr || i->src_addrlen == 0) continue;
    unopened_.emplace_back(r.name, std::string(static_cast<const char*>(i->src_addr), i->src_addrlen));
    names += (names.empty() ? "" : ", ") + r.name + " (" + r.address + ")";
  }
  if (unopened_.empty()) {
    if (why->empty()) *why = "no interface with an address";
    return false;
  }
  DCCL_INFO("net: rank %d: the network is not trusted (DCCL_TRUST_NETWORK=0): tcp;ofi_rxm is not opened; rails %s "
            "carry DirectCCL's authenticated socket path", opts_.rank, names.c_str());
  return true;
}

// One endpoint per rail (net/rails.hpp): the interfaces DCCL_NET_IFNAME names, or
// every non-loopback one the provider offers. A named rail must open; of the
// default ones, those that fail are left out (with a warning).
bool FabricTransport::open_rails(const std::string& prov, std::string* why) {
  std::vector<Rail> rails;
  try {
    rails = find_rails(prov, ifnames_, why, opts_.want_hmem);
  } catch (const core::Error& e) {
    core::raise(e.code(), core::describe(opts_.rank, "transport", e.what()));
  }
  std::string names;
  for (auto& r : rails) {
    const bool hmem = r.info.hmem;
    const ProviderInfo spare = flows_wanted(prov) > 1 ? duplicate(r.info) : ProviderInfo{};
    try {
      eps_.push_back(std::make_unique<Endpoint>(prov, std::move(r.info), opts_.rank, opts_.nranks,
                                                opts_.max_part_bytes, r.name));
    } catch (const core::Error& e) {
      if (!ifnames_.empty())
        core::raise(dcclUnavailable, core::describe(opts_.rank, "transport",
                                                    "rail " + r.name + " (DCCL_NET_IFNAME) cannot be opened: " +
                                                        e.what()));
      DCCL_WARN("net: %s rail %s (%s) left out: %s", prov.c_str(), r.name.c_str(), r.address.c_str(), e.what());
      *why = e.what();
      continue;
    }
    names += (names.empty() ? "" : ", ") + r.name + " (" + r.address + ")";
    if (opts_.want_hmem)
      DCCL_INFO("net: %s opened %s FI_HMEM", eps_.back()->label().c_str(),
                hmem ? "with" : "without (the provider does not offer it)");
    open_flows(prov, spare, r.name);
  }
  if (names.empty()) return false;
  DCCL_INFO("net: %s rails of rank %d (local rank %d): %s%s", prov.c_str(), opts_.rank, self_.local_rank,
            names.c_str(), ifnames_.empty() ? "" : " (DCCL_NET_IFNAME)");
  if (eps_.back()->max_part() < (size_t(1) << 40))
    DCCL_INFO("net: %s splits messages above %zu bytes", prov.c_str(), eps_.back()->max_part());
  return true;
}

bool FabricTransport::open(const std::string& prov, std::string* why) {
  ProviderInfo pi = find_provider(prov, why, opts_.want_hmem);
  if (!pi.info) return false;
  const ProviderInfo spare = flows_wanted(prov) > 1 ? duplicate(pi) : ProviderInfo{};
  try {
    eps_.push_back(std::make_unique<Endpoint>(prov, std::move(pi), opts_.rank, opts_.nranks,
                                              opts_.max_part_bytes));
  } catch (const core::Error& e) {
    *why = e.what();
    return false;
  }
  open_flows(prov, spare, "");
  if (opts_.want_hmem)
    DCCL_INFO("net: %s opened %s FI_HMEM", prov.c_str(),
              eps_.back()->hmem() ? "with" : "without (the provider does not offer it)");
  if (eps_.back()->max_part() < (size_t(1) << 40))
    DCCL_INFO("net: %s splits messages above %zu bytes", prov.c_str(), eps_.back()->max_part());
  return true;
}

int FabricTransport::flows_wanted(const std::string& prov) const {
  // Automatic flows only where some peer is known to be on another host: each further
  // endpoint costs its opening (a fabric and domain of its own) and closing.
  const bool all_local = opts_.local_size <= 0 || opts_.local_size >= opts_.nranks;
  return flows_to_open(opts_.flows, prov, all_local);
}

// The rail's further flows, after its first endpoint (eps_.back()): endpoints opened
// alike, each with its own address (for tcp, its own port). One that cannot be
// opened ends the rail's flows there, with a warning: the pair takes the fewer.
void FabricTransport::open_flows(const std::string& prov, const ProviderInfo& spare, const std::string& rail) {
  const int want = flows_wanted(prov);
  if (want < 2 || !spare.info) return;
  Endpoint* lead = eps_.back().get();
  int opened = 1;
  for (; opened < want; ++opened) {
    try {
      eps_.push_back(std::make_unique<Endpoint>(prov, duplicate(spare), opts_.rank, opts_.nranks,
                                                opts_.max_part_bytes, rail));
    } catch (const core::Error& e) {
      DCCL_WARN("net: %s: %d of %d flows opened, the next one cannot be: %s", lead->rail_label().c_str(), opened,
                want, e.what());
      break;
    }
  }
  const size_t first = eps_.size() - static_cast<size_t>(opened);
  for (int f = 0; f < opened; ++f) eps_[first + static_cast<size_t>(f)]->set_flow(f, opened);
}

std::vector<Endpoint*> FabricTransport::flows_of(const Endpoint* lead) const {
  std::vector<Endpoint*> out;
  for (size_t i = 0; i < eps_.size(); ++i) {
    if (eps_[i].get() != lead) continue;
    out.push_back(eps_[i].get());
    for (size_t j = i + 1; j < eps_.size() && eps_[j]->flow() > 0; ++j) out.push_back(eps_[j].get());
  }
  return out;
}

void FabricTransport::unavailable(const std::string& what) const {
  std::vector<std::string> avail = available_providers();
  core::raise(dcclUnavailable,
              core::describe(opts_.rank, "transport",
                             what + "; available RDM providers: " +
                                 (avail.empty() ? std::string("none") : join(avail, ", "))));
}

std::string FabricTransport::local_blob() const { return self_.encode(); }

std::string FabricTransport::provider_summary() const {
  std::vector<std::string> names;
  for (const auto& ep : eps_)
    if (std::find(names.begin(), names.end(), ep->provider()) == names.end()) names.push_back(ep->provider());
  if (std::any_of(routes_.begin(), routes_.end(), [](const Route& r) { return r.host_only; }))
    names.push_back("tcp (DirectCCL sockets)");
  return join(names, "+");
}

std::string FabricTransport::hmem_missing() const {
  if (eps_.empty()) return "no endpoint is open";
  // "the tcp;ofi_rxm endpoints (rails eth0, eth1) were opened without FI_HMEM (...)"
  std::vector<std::string> provs, rails;
  size_t count = 0;
  for (const auto& ep : eps_) {
    if (ep->hmem() || ep->flow() > 0) continue;
    ++count;
    if (std::find(provs.begin(), provs.end(), ep->provider()) == provs.end()) provs.push_back(ep->provider());
    if (!ep->rail().empty()) rails.push_back(ep->rail());
  }
  if (count == 0) return "";
  return "the " + join(provs, ", ") + (count == 1 ? " endpoint" : " endpoints") +
         (rails.empty() ? std::string() : (rails.size() == 1 ? " (rail " : " (rails ") + join(rails, ", ") + ")") +
         (count == 1 ? " was" : " were") +
         " opened without FI_HMEM (" +
         (opts_.want_hmem ? "the provider does not offer it"
                          : "not requested: no device backend in this process") +
         ")";
}

MemRegion* FabricTransport::register_memory(const void* buf, size_t len) {
  if (!connected_)
    core::raise(dcclInvalidUsage,
                core::describe(opts_.rank, "register memory", "connect() was not called"));
  return register_host(eps_, buf, len);
}

void FabricTransport::deregister_memory(MemRegion* mr) {
  if (!mr || abandoned_) return;
  deregister(mr);
}

std::unique_ptr<Transport> Transport::create(const TransportOptions& opts) {
  return std::make_unique<FabricTransport>(opts);
}

}  // namespace dccl::net
