#include <cerrno>
#include <map>
#include <mutex>
#include <unistd.h>
#include <sys/syscall.h>
#include <poll.h>
// Transport: routes each peer to an endpoint (shm on the same host, tcp;ofi_rxm across
// hosts, or one forced provider), posts tagged messages and drives completions.
#include "net/transport.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "core/log.hpp"
#include "net/blob.hpp"
#include "net/endpoint.hpp"
#include "net/provider.hpp"
#include "net/rails.hpp"
#include "net/shm_rescue.hpp"
#include "net/sock_path.hpp"
#include "core/backoff.hpp"

namespace dccl::net {

namespace {

using Clock = std::chrono::steady_clock;

// wait(): core::Backoff (spin, yield, then growing naps) between polls.
// fi_cq_sread is not used: shm peers do not signal the CQ's wait fd in 1.17 (it would be
// a timed sleep), and blocking inside the domain lock would stall posting threads.

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

class FabricTransport final : public Transport {
 public:
  explicit FabricTransport(const TransportOptions& o);
  ~FabricTransport() override {
    if (connected_)
      for (const auto& line : rail_counters()) DCCL_INFO("net: rank %d %s", opts_.rank, line.c_str());
    for (auto& [a, fd] : pidfds_) close(fd);
    if (!pidfds_.empty()) reap_orphaned_shm_regions();  // a same-host peer killed: its region too
  }

  std::string local_blob() const override;
  void connect(const std::vector<std::string>& blobs) override;
  std::string provider_summary() const override;
  std::vector<std::string> topology() const override { return topology_lines(blobs_, forced_); }
  std::vector<std::string> rail_counters() const override;
  std::string hmem_missing() const override;
  std::string untrusted_routes() const override { return untrusted_; }
  void isend(int peer, const void* buf, size_t len, uint64_t tag, Request* req,
             MemRegion* mr) override {
    post(true, peer, const_cast<void*>(buf), len, tag, req, mr);
  }
  void irecv(int peer, void* buf, size_t len, uint64_t tag, Request* req,
             MemRegion* mr) override {
    post(false, peer, buf, len, tag, req, mr);
  }
  void progress() override {
    for (auto& ep : eps_) ep->progress(false);
    if (sock_) sock_->progress(false);
  }
  void nap(int64_t ns) override {
    if (sock_) return sock_->nap(ns);
    Transport::nap(ns);
  }
  void wait(Request* const* reqs, size_t n, const std::string& what) override;
  void cancel_all() override {
    for (auto& ep : eps_) ep->cancel_all();
    if (sock_) sock_->cancel_all();
  }
  MemRegion* register_memory(const void* buf, size_t len) override;
  void deregister_memory(MemRegion* mr) override;
  MemRegion* register_dmabuf(int fd, uint64_t offset, size_t len, void* base, int iface, int device) override {
    auto mr = std::make_unique<MemRegion>();
    mr->base = base;
    mr->len = len;
    mr->device = true;
    for (auto& ep : eps_) mr->regs.emplace_back(ep.get(), ep->register_dmabuf(fd, offset, len, base, iface, device));
    return mr.release();
  }
  void peers_failed() override {
    if (shm_peers_.empty()) return;
    std::vector<std::string> own;
    for (auto& ep : eps_)
      if (ep->provider() == kShmProvider) own.push_back(ep->address());
    rescue_after_peer_failure(opts_.rank, shm_peers_, own);
  }
  void abandon() override {
    bool any = false;
    for (auto& ep : eps_) any = any || ep->cancelled_any();
    if (!any) return;  // nothing in the provider's hands: close normally
    abandoned_ = true;
    for (auto& ep : eps_) {
      // The provider keeps its mapping; the name goes, so the region is freed when
      // this process exits instead of staying in /dev/shm.
      if (ep->provider() == kShmProvider) unlink_shm_region(ep->address());
      (void)ep.release();
    }
    eps_.clear();
  }

 private:
  bool open(const std::string& prov, std::string* why);
  bool open_rails(const std::string& prov, std::string* why);
  void post(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req,
            MemRegion* mr);
  void post_striped(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr);
  std::string describe_req(const Request& r) const;
  // For a receive that timed out: "; count mismatch: ..." when the peer's message
  // for it arrived with another length (the length mark kept them apart), else "".
  std::string mismatch_note(const Request& r) const override {
    if (r.is_send || r.peer < 0) return "";
    const Route& rt = routes_[static_cast<size_t>(r.peer)];
    if (r.sock) return sock_->mismatch_note(r);
    std::vector<Lane> lanes = rt.lanes.empty() ? std::vector<Lane>{rt.home} : rt.lanes;
    size_t got = 0;
    for (const Lane& l : lanes)
      if (l.ep->peek(l.addr, r.tag, kLengthMarkBits, &got, 100))
        return "; count mismatch: rank " + std::to_string(r.peer) + " sent a message of another length for it (this rank expects " +
               std::to_string(r.len) + " bytes)";
    return "";
  }
  [[noreturn]] void unavailable(const std::string& what) const;

  struct Lane {
    Endpoint* ep = nullptr;
    fi_addr_t addr = FI_ADDR_UNSPEC;
  };
  struct Route {
    Lane home;                // the pair's rail: everything not striped
    std::vector<Lane> lanes;  // striped pairs: rails [0, lanes), home among them; else empty
    WireCut cut;
    bool sock = false;  // host-memory messages up to sock_->limit(peer) take the socket path
    // The pair's provider is not trusted (provider_trusted, DCCL_TRUST_NETWORK=0):
    // no fabric lane; every message takes the socket path (device memory is staged).
    bool sock_only = false;
  };
  // Whether `prov` may carry the job's data as it is (net/provider.hpp's table).
  bool trusted(const std::string& prov) const { return opts_.trust_network || provider_trusted(prov); }
  // Untrusted tcp: the rails' names and addresses are published (for the pair plan and
  // the socket path) without opening libfabric endpoints on them.
  bool publish_rails(std::string* why);

  TransportOptions opts_;
  std::string forced_;  // "" = automatic
  std::vector<std::string> ifnames_;  // DCCL_NET_IFNAME
  Blob self_;
  std::vector<std::unique_ptr<Endpoint>> eps_;  // shm and/or the network provider's rails, in rail order
  std::vector<Route> routes_;
  std::vector<Blob> blobs_;  // every rank's, for topology()
  std::mutex stripe_mu_;     // posting a striped message
  std::map<fi_addr_t, int> pidfds_;  // same-host shm peers' processes
  std::vector<ShmPeer> shm_peers_;  // fixed after connect(): read by peers_failed()
  std::unique_ptr<SockPath> sock_;  // TCP-routed peers' small messages (DCCL_NET_SOCK_BYTES)
  std::vector<std::pair<std::string, std::string>> unopened_;  // publish_rails: (rail, sockaddr bytes)
  std::string untrusted_;  // after connect(): the ranks reached over an untrusted provider, and why
  bool abandoned_ = false;
  bool connected_ = false;
};

FabricTransport::FabricTransport(const TransportOptions& o) : opts_(o) {
  reap_orphaned_shm_regions();
  if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks)
    core::raise(dcclInvalidArgument, "transport: rank " + std::to_string(o.rank) +
                                         " out of range for " + std::to_string(o.nranks) +
                                         " ranks");
  api_version();  // throws when the runtime is too old
  forced_ = canonical_provider(o.provider);
  if (forced_.empty()) {
    // FI_PROVIDER filters libfabric's own provider list; a single plain name is a choice.
    const char* env = getenv("FI_PROVIDER");
    std::string e = env ? env : "";
    if (!e.empty() && e.find_first_of("^,") == std::string::npos) {
      forced_ = canonical_provider(e);
      DCCL_INFO("net: FI_PROVIDER=%s selects provider %s for every peer", env, forced_.c_str());
    }
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
  std::string why_not;
  if (!forced_.empty() && !trusted(forced_)) {
    provider_trusted(forced_, &why_not);
    if (forced_ != kTcpProvider)
      core::raise(dcclInvalidUsage,
                  core::describe(o.rank, "transport",
                                 "DCCL_PROVIDER " + forced_ + " is not trusted (" + why_not +
                                     "): set DCCL_TRUST_NETWORK=1 where only the job can reach the network, or "
                                     "DCCL_PROVIDER=tcp for DirectCCL's authenticated sockets"));
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
  for (auto& ep : eps_) {
    self_.endpoints.emplace_back(ep->provider(), ep->address());
    self_.rails.push_back(ep->rail());
    if (ep->provider() != kTcpProvider) continue;
    tcp_ips.push_back(sockaddr_ip(ep->address()));
    tcp_rails.push_back(ep->rail());
  }
  for (const auto& [rail, addr] : unopened_) {
    self_.endpoints.emplace_back(kTcpProvider, addr);
    self_.rails.push_back(rail);
    tcp_ips.push_back(sockaddr_ip(addr));
    tcp_rails.push_back(rail);
  }
  // Untrusted tcp: the socket path carries every size (connect() refuses
  // DCCL_NET_SOCK_BYTES=0 if a pair needs it).
  const uint64_t sock_max = unopened_.empty() ? o.sock_bytes : UINT64_MAX;
  if (sock_max > 0 && !tcp_ips.empty() &&
      std::find(tcp_ips.begin(), tcp_ips.end(), std::string()) == tcp_ips.end()) {
    sock_ = std::make_unique<SockPath>(o.rank, sock_max, o.timeout, tcp_ips, tcp_rails);
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
  try {
    eps_.push_back(std::make_unique<Endpoint>(prov, std::move(pi), opts_.rank, opts_.nranks,
                                              opts_.max_part_bytes));
  } catch (const core::Error& e) {
    *why = e.what();
    return false;
  }
  if (opts_.want_hmem)
    DCCL_INFO("net: %s opened %s FI_HMEM", prov.c_str(),
              eps_.back()->hmem() ? "with" : "without (the provider does not offer it)");
  if (eps_.back()->max_part() < (size_t(1) << 40))
    DCCL_INFO("net: %s splits messages above %zu bytes", prov.c_str(), eps_.back()->max_part());
  return true;
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
  if (std::any_of(routes_.begin(), routes_.end(), [](const Route& r) { return r.sock_only; }))
    names.push_back("tcp (DirectCCL sockets)");
  return join(names, "+");
}

std::vector<std::string> FabricTransport::rail_counters() const {
  std::vector<std::string> out;
  for (const auto& ep : eps_)
    if (!ep->rail().empty())
      out.push_back(ep->label() + ": sent " + std::to_string(ep->sent_bytes()) + " bytes, received " +
                    std::to_string(ep->recv_bytes()) + " bytes");
  if (sock_)
    for (std::string& l : sock_->counters()) out.push_back(std::move(l));
  return out;
}

std::string FabricTransport::hmem_missing() const {
  if (eps_.empty()) return "no endpoint is open";
  // "the tcp;ofi_rxm endpoints (rails eth0, eth1) were opened without FI_HMEM (...)"
  std::vector<std::string> provs, rails;
  size_t count = 0;
  for (const auto& ep : eps_) {
    if (ep->hmem()) continue;
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

void FabricTransport::connect(const std::vector<std::string>& blobs) {
  const int rank = opts_.rank;
  if (connected_) core::raise(dcclInvalidUsage, core::describe(rank, "connect", "called twice"));
  if (blobs.size() != static_cast<size_t>(opts_.nranks))
    core::raise(dcclInvalidArgument,
                core::describe(rank, "connect",
                               std::to_string(blobs.size()) + " blobs for " +
                                   std::to_string(opts_.nranks) + " ranks"));
  std::vector<Blob> all;
  for (size_t r = 0; r < blobs.size(); ++r) all.push_back(Blob::decode(blobs[r], "rank " + std::to_string(r)));
  // This rank's endpoints of one provider, in rail order (as published in self_).
  auto mine = [&](const std::string& prov) {
    std::vector<Endpoint*> v;
    for (auto& ep : eps_)
      if (ep->provider() == prov) v.push_back(ep.get());
    return v;
  };
  std::vector<Route> routes(blobs.size());
  std::map<const Endpoint*, int> users;
  std::map<std::string, int> peers_of;  // provider -> ranks routed through it
  std::map<std::string, int> home_of;   // rail label -> ranks whose home rail it is
  int striped = 0;
  std::string stripe_rails;
  std::vector<std::pair<int, std::string>> sock_peers(blobs.size(), {-1, std::string()});
  bool loop_self = false;
  std::string untrusted_ranks, untrusted_why;
  for (size_t r = 0; r < blobs.size(); ++r) {
    const Blob& b = all[r];
    PairPlan plan;
    try {
      plan = plan_pair(self_, rank, b, static_cast<int>(r), forced_);
    } catch (const core::Error& e) {
      core::raise(e.code(), core::describe(rank, "connect", e.what()));
    }
    Route& rt = routes[r];
    ++peers_of[plan.provider];
    if (!trusted(plan.provider)) {
      // No fabric lane: the socket path carries everything, this rank's own messages too.
      rt.sock_only = true;
      if (static_cast<int>(r) == rank) {
        loop_self = true;
        continue;
      }
      if (!sock_ || b.sock.empty())
        core::raise(dcclInvalidUsage,
                    core::describe(rank, "connect",
                                   "rank " + std::to_string(r) + " is reached over " + plan.provider +
                                       ", which is not trusted, but " +
                                       (sock_ ? "rank " + std::to_string(r) + " publishes" : std::string("this rank has")) +
                                       " no socket path; every rank must use the same DCCL_TRUST_NETWORK"));
      if (opts_.sock_bytes == 0)
        core::raise(dcclInvalidUsage,
                    core::describe(rank, "connect",
                                   "DCCL_NET_SOCK_BYTES=0 would send host memory to rank " + std::to_string(r) +
                                       " over " + plan.provider + ", which is not trusted (" +
                                       [&] { std::string w; provider_trusted(plan.provider, &w); return w; }() +
                                       "); leave DCCL_NET_SOCK_BYTES unset, or set DCCL_TRUST_NETWORK=1 where only "
                                       "the job can reach the network"));
      sock_peers[r] = {plan.home, b.sock};
      untrusted_ranks += (untrusted_ranks.empty() ? "" : ", ") + std::to_string(r);
      provider_trusted(plan.provider, &untrusted_why);
      untrusted_why = plan.provider + ", which is not trusted (" + untrusted_why + ")";
      continue;
    }
    const std::vector<Endpoint*> eps = mine(plan.provider);
    const std::vector<size_t> theirs = b.rails_of(plan.provider);
    auto lane = [&](int i) {
      Lane l;
      l.ep = eps[static_cast<size_t>(i)];
      l.addr = l.ep->insert(b.endpoints[theirs[static_cast<size_t>(i)]].second, static_cast<int>(r));
      ++users[l.ep];
      return l;
    };
    rt.home = lane(plan.home);
    if (plan.lanes >= 2) {
      rt.cut.part = SIZE_MAX;
      for (int i = 0; i < plan.lanes; ++i) {
        rt.lanes.push_back(i == plan.home ? rt.home : lane(i));
        rt.cut.part = std::min(rt.cut.part, rt.lanes.back().ep->max_part());
      }
      rt.cut.lanes = plan.lanes;
      rt.cut.stripe_min = plan.stripe_min;
      rt.cut.home = plan.home;
      ++striped;
      std::vector<std::string> names;
      for (const Endpoint* ep : eps) names.push_back(ep->rail());
      stripe_rails = rail_list(names, plan.lanes);
    }
    if (sock_ && plan.provider == kTcpProvider && static_cast<int>(r) != rank && !b.sock.empty())
      sock_peers[r] = {plan.home, b.sock};
    if (!rt.home.ep->rail().empty()) ++home_of[rt.home.ep->rail()];
    if (plan.provider == kShmProvider && static_cast<int>(r) != rank && b.pid > 0) {
      int fd = static_cast<int>(syscall(SYS_pidfd_open, b.pid, 0));
      if (fd >= 0) {
        pidfds_[rt.home.addr] = fd;
        const std::string* a = b.address_for(kShmProvider);
        if (a) shm_peers_.push_back(ShmPeer{fd, b.pid, *a});
      }
    }
  }
  if (sock_) {
    sock_->connect(sock_peers, loop_self);
    for (size_t r = 0; r < routes.size(); ++r) routes[r].sock = sock_->limit(static_cast<int>(r)) > 0;
    if (!sock_->any()) sock_.reset();
  }
  if (!untrusted_ranks.empty())
    untrusted_ = "rank(s) " + untrusted_ranks + " are reached over " + untrusted_why +
                 ": DirectCCL's authenticated socket path carries their messages, device memory staged "
                 "(DCCL_TRUST_NETWORK=1 trusts the network)";
  // Automatic mode opened tcp;ofi_rxm in case a peer was remote, and every rail in
  // case a pair chose it: close what nobody uses (keeping one endpoint at least).
  std::vector<std::unique_ptr<Endpoint>> keep;
  for (auto& ep : eps_)
    if (users[ep.get()] > 0) keep.push_back(std::move(ep));
  if (keep.empty() && !eps_.empty()) keep.push_back(std::move(eps_.front()));
  eps_ = std::move(keep);
  routes_ = std::move(routes);
  blobs_ = std::move(all);
  for (auto& ep : eps_)
    if (ep->provider() == kShmProvider && !pidfds_.empty())
      ep->set_liveness([this](fi_addr_t a) {
        auto it = pidfds_.find(a);
        if (it == pidfds_.end()) return true;
        pollfd p{it->second, POLLIN, 0};
        return poll(&p, 1, 0) == 0;  // readable once the process has exited
      });
  connected_ = true;
  // "shm for 3 ranks, tcp;ofi_rxm for 4 ranks (rails: eth0 for 2 ranks, eth1 for 2 ranks)"
  auto ranks = [](int k) { return std::to_string(k) + (k == 1 ? " rank" : " ranks"); };
  std::string log;
  for (const auto& [prov, k] : peers_of) log += (log.empty() ? "" : ", ") + prov + " for " + ranks(k);
  const auto sock_only = std::count_if(routes_.begin(), routes_.end(), [](const Route& x) { return x.sock_only; });
  const auto sock_limited =
      std::count_if(routes_.begin(), routes_.end(), [](const Route& x) { return x.sock && !x.sock_only; });
  if (sock_only)
    log += "; every message to " + std::to_string(sock_only) +
           " of them over DirectCCL's authenticated socket path (the network is not trusted: DCCL_TRUST_NETWORK=0)";
  if (sock_limited)
    log += "; messages up to " + std::to_string(opts_.sock_bytes) + " bytes to " + std::to_string(sock_limited) +
           " of them over DirectCCL's socket path (DCCL_NET_SOCK_BYTES)";
  if (!home_of.empty()) {
    std::string rails;
    for (const auto& [rail, k] : home_of) rails += (rails.empty() ? "" : ", ") + rail + " for " + ranks(k);
    log += " (rails: " + rails;
    if (striped) log += "; large parts striped over " + stripe_rails + " for " + ranks(striped);
    log += ")";
  }
  DCCL_INFO("net: rank %d of %d on %s uses %s", rank, opts_.nranks, self_.host.c_str(), log.c_str());
}

void FabricTransport::post(bool send, int peer, void* buf, size_t len, uint64_t tag,
                           Request* req, MemRegion* mr) {
  const char* op = send ? "isend" : "irecv";
  if (!connected_)
    core::raise(dcclInvalidUsage, core::describe(opts_.rank, op, "connect() was not called"));
  if (peer < 0 || peer >= opts_.nranks || !req || (!buf && len))
    core::raise(dcclInvalidArgument,
                core::describe(opts_.rank, op,
                               "bad arguments (peer " + std::to_string(peer) + " of " +
                                   std::to_string(opts_.nranks) + ", request " +
                                   (req ? "set" : "null") + ", " + std::to_string(len) +
                                   " bytes at " + (buf ? "a buffer" : "null") + ")"));
  req->reset();
  req->peer = peer;
  req->tag = tag;
  req->len = len;
  req->is_send = send;
  if (tag & kLengthMarkBits)
    core::raise(dcclInternalError, core::describe(opts_.rank, op, "tag uses the length mark's bits"));
  const Route& rt = routes_[static_cast<size_t>(peer)];
  if (rt.sock_only) {
    if (mr && mr->device)
      core::raise(dcclInternalError,
                  core::describe(opts_.rank, op, "device memory for rank " + std::to_string(peer) +
                                                     ", whose only route is DirectCCL's socket path (" + untrusted_ + ")"));
    req->sock = true;
    return sock_->post(send, peer, buf, len, tag, req);
  }
  const bool striped = !rt.lanes.empty() && len >= rt.cut.stripe_min;
  if (rt.sock && !striped && len <= sock_->limit(peer) && !(mr && mr->device)) {
    req->sock = true;
    return sock_->post(send, peer, buf, len, tag, req);
  }
  if (striped) return post_striped(send, peer, buf, len, tag, req, mr);
  void* desc = mr ? mr->desc_for(rt.home.ep) : nullptr;
  rt.home.ep->post(send, rt.home.addr, buf, len, tag, desc, req);
}

// The pair's wire cut: parts, and pieces of those at least stripe_min long on every
// lane; each lane gets its pieces in message order (receives match in that order).
void FabricTransport::post_striped(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req,
                                   MemRegion* mr) {
  const Route& rt = routes_[static_cast<size_t>(peer)];
  const size_t n = rt.cut.count(len);
  // One striped message at a time, so that two threads' messages cannot reach the
  // lanes in different orders (each lane must see the receiver's order).
  std::lock_guard<std::mutex> lk(stripe_mu_);
  req->pending_parts.store(static_cast<int>(n), std::memory_order_release);
  size_t posted = 0;
  std::string cause;
  rt.cut.each(len, [&](int lane, size_t off, size_t plen) {
    if (!cause.empty()) return;
    const Lane& l = rt.lanes[static_cast<size_t>(lane)];
    cause = l.ep->post_one(send, l.addr, static_cast<char*>(buf) + off, plen, tag,
                           mr ? mr->desc_for(l.ep) : nullptr, req);
    if (cause.empty()) ++posted;
    else cause += " (piece " + std::to_string(posted + 1) + "/" + std::to_string(n) + ")";
  });
  if (cause.empty()) return;
  req->fail(cause);
  req->parts_done(static_cast<int>(n - posted));  // never posted
  core::raise(dcclSystemError,
              core::describe(opts_.rank, std::string(send ? "isend to" : "irecv from") + " rank " + std::to_string(peer),
                             cause));
}

std::string FabricTransport::describe_req(const Request& r) const {
  std::string s = std::string(r.is_send ? "send to" : "recv from") + " rank " +
                  std::to_string(r.peer) + " (tag " + hex(r.tag);
  if (r.sock) {
    s += ", DirectCCL sockets";
  } else if (r.peer >= 0 && static_cast<size_t>(r.peer) < routes_.size() && routes_[static_cast<size_t>(r.peer)].home.ep) {
    const Route& rt = routes_[static_cast<size_t>(r.peer)];
    s += ", " + rt.home.ep->label() + (rt.lanes.empty() ? "" : ", striped over " + std::to_string(rt.lanes.size()) + " rails");
  }
  return s + ")";
}

void FabricTransport::wait(Request* const* reqs, size_t n, const std::string& what) {
  const auto t0 = Clock::now();
  const auto deadline = t0 + opts_.timeout;
  core::Backoff backoff(opts_.spin_us, t0);
  size_t first = 0;  // reqs[0, first) are done
  for (;;) {
    bool all = true;
    for (size_t i = first; i < n; ++i) {
      const Request* r = reqs[i];
      if (!r) continue;
      if (!r->done.load(std::memory_order_acquire)) {
        all = false;
        continue;
      }
      if (r->failed)
        core::raise(dcclRemoteError,
                    core::describe(opts_.rank, what, describe_req(*r) + " failed: " + r->error));
      if (all) first = i + 1;
    }
    if (all) return;
    progress();
    const auto now = Clock::now();
    if (now >= deadline) break;
    // Past the spin budget, first yield (the peer we wait for may need this core: 8 ranks
    // can share 2), then nap, so that oversubscribed ranks leave the CPU to those with
    // work (8 ranks on 2 cores, ring of 1 MiB: ~4x faster than yielding forever; 2-rank
    // ping-pong keeps its ~1-5 us since it never gets past the spin).
    backoff.idle(now, [this](int64_t ns) { nap(ns); });
  }
  std::string pending;
  size_t count = 0;
  for (size_t i = first; i < n; ++i) {
    if (!reqs[i] || reqs[i]->done.load(std::memory_order_acquire)) continue;
    if (count++ < 8) pending += (pending.empty() ? "" : ", ") + describe_req(*reqs[i]) + mismatch_note(*reqs[i]);
  }
  if (count > 8) pending += " and " + std::to_string(count - 8) + " more";
  core::raise(dcclTimeout,
              core::describe(opts_.rank, what,
                             "timed out after " + std::to_string(opts_.timeout.count()) +
                                 " ms waiting for " + pending));
}

MemRegion* FabricTransport::register_memory(const void* buf, size_t len) {
  if (!connected_)
    core::raise(dcclInvalidUsage,
                core::describe(opts_.rank, "register memory", "connect() was not called"));
  auto mr = std::make_unique<MemRegion>();
  mr->base = buf;
  mr->len = len;
  for (auto& ep : eps_) mr->regs.emplace_back(ep.get(), ep->register_buffer(buf, len));
  return mr.release();
}

void FabricTransport::deregister_memory(MemRegion* mr) {
  if (!mr || abandoned_) return;
  for (auto& [ep, fid] : mr->regs) const_cast<Endpoint*>(ep)->close_buffer(fid);
  delete mr;
}

}  // namespace

std::unique_ptr<Transport> Transport::create(const TransportOptions& opts) {
  return std::make_unique<FabricTransport>(opts);
}

}  // namespace dccl::net
