// FabricTransport::connect(): every peer's route planned from the blobs (shm, a
// trusted provider's rails and stripes, or the socket path for untrusted ones) and
// given its links (net/link.hpp), the socket path's connections made, the endpoints
// nobody uses closed, and the plan logged (net/fabric_transport.hpp).
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "net/fabric/fabric_link.hpp"
#include "net/fabric/striped_link.hpp"
#include "net/fabric_transport.hpp"
#include "net/sock/flows_link.hpp"
#include "net/sock/sock_link.hpp"

namespace dccl::net {

void FabricTransport::connect(const std::vector<std::string>& blobs, std::chrono::steady_clock::time_point until) {
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
      if (ep->provider() == prov && ep->flow() == 0) v.push_back(ep.get());
    return v;
  };
  // A peer's plan: its rails (the home one carries what is not striped), the pair's
  // wire cut, and whether the socket path takes some (sock) or all (sock_only) of it.
  struct Lane {
    Endpoint* ep = nullptr;
    fi_addr_t addr = FI_ADDR_UNSPEC;
  };
  struct Plan {
    Lane home;
    std::vector<Lane> lanes;  // spread pairs (net/rails.hpp spread_lanes): rails x flows; else empty
    WireCut cut;
    int rails = 1, flows = 1;
    bool sock = false;
    bool sock_only = false;
  };
  std::vector<Plan> routes(blobs.size());
  std::map<const Endpoint*, int> users;
  std::map<std::string, int> peers_of;  // provider -> ranks routed through it
  std::map<std::string, int> home_of;   // rail label -> ranks whose home rail it is
  int striped = 0, max_flows_fi = 1;
  std::string stripe_rails;
  std::vector<std::pair<int, std::string>> sock_peers(blobs.size(), {-1, std::string()});
  std::vector<bool> same_host(blobs.size(), false);  // the socket path's flows: one to a peer on this host
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
    Plan& rt = routes[r];
    same_host[r] = b.same_host(self_);
    ++peers_of[plan.provider];
    if (!trusted(plan.provider)) {
      // No fabric lane: the socket path carries everything, this rank's own messages too.
      rt.sock_only = true;
      if (!sock_)
        core::raise(dcclUnavailable,
                    core::describe(rank, "connect",
                                   "rank " + std::to_string(r) + " is reached over " + plan.provider +
                                       ", which is not trusted, and this rank has no socket path (no rail with "
                                       "an IP address); DCCL_TRUST_NETWORK=1 would use " + plan.provider));
      if (static_cast<int>(r) == rank) {
        loop_self = true;
        continue;
      }
      if (b.sock.empty())
        core::raise(dcclInvalidUsage,
                    core::describe(rank, "connect",
                                   "rank " + std::to_string(r) + " is reached over " + plan.provider +
                                       ", which is not trusted, but rank " + std::to_string(r) +
                                       " publishes no socket path; every rank must use the same DCCL_TRUST_NETWORK"));
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
    // Flow f of rail i: this rank's endpoint and the peer's address on it.
    auto lane = [&](int i, int f) {
      Lane l;
      const std::vector<Endpoint*> flows = flows_of(eps[static_cast<size_t>(i)]);
      if (f >= static_cast<int>(flows.size()))
        core::raise(dcclInternalError, core::describe(rank, "connect", "flow " + std::to_string(f + 1) +
                                                                           " of rail " + std::to_string(i) +
                                                                           " was not opened"));
      l.ep = flows[static_cast<size_t>(f)];
      l.addr = l.ep->insert(b.flow_address(theirs[static_cast<size_t>(i)], f), static_cast<int>(r));
      ++users[l.ep];
      return l;
    };
    rt.home = lane(plan.home, 0);
    const std::vector<std::pair<int, int>> spread = spread_lanes(plan);
    if (!spread.empty()) {
      size_t part = SIZE_MAX;
      for (const auto& [i, f] : spread) {
        rt.lanes.push_back(i == plan.home && f == 0 ? rt.home : lane(i, f));
        part = std::min(part, rt.lanes.back().ep->max_part());
      }
      rt.cut = spread_cut(plan, part);
      rt.rails = plan.lanes;
      rt.flows = plan.flows;
      max_flows_fi = std::max(max_flows_fi, plan.flows);
    }
    if (plan.lanes >= 2) {
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
    sock_->connect(sock_peers, loop_self, until, same_host);
    for (size_t r = 0; r < routes.size(); ++r) routes[r].sock = sock_->limit(static_cast<int>(r)) > 0;
    if (!sock_->any()) sock_.reset();
  }
  // Every peer's links, in the order LinkTransport::post asks them.
  std::vector<Route> links_of(routes.size());
  std::vector<std::unique_ptr<Link>> links;
  auto stripe_order = std::make_shared<std::mutex>();
  for (size_t r = 0; r < routes.size(); ++r) {
    const Plan& p = routes[r];
    Route& out = links_of[r];
    if (p.sock || p.sock_only) {
      // Several flows to the peer: the link that sprays large messages over them.
      auto add = [&](auto l) {
        out.small_max = l->limit();
        out.small = l.get();
        links.push_back(std::move(l));
      };
      if (sock_->flows(static_cast<int>(r)) > 1) add(std::make_unique<FlowsLink>(sock_.get(), static_cast<int>(r)));
      else add(std::make_unique<SockLink>(sock_.get(), static_cast<int>(r)));
    }
    if (p.sock_only) {
      out.link = out.small;
      out.small = nullptr;
      out.host_only = true;
      continue;
    }
    links.push_back(std::make_unique<FabricLink>(p.home.ep, p.home.addr));
    out.link = links.back().get();
    if (!p.lanes.empty()) {
      std::vector<std::unique_ptr<FabricLink>> lanes;
      for (const Lane& l : p.lanes) lanes.push_back(std::make_unique<FabricLink>(l.ep, l.addr));
      std::vector<uint16_t> fixed = opts_.lane_weights;
      if (fixed.empty() && !opts_.lane_balance) fixed.assign(lanes.size(), kLaneWeightMax);
      auto s = std::make_unique<StripedLink>(rank, static_cast<int>(r), std::move(lanes), p.cut, stripe_order,
                                             p.rails, p.flows, std::move(fixed), opts_.lane_window);
      out.large_min = s->stripe_min();
      out.large = s.get();
      links.push_back(std::move(s));
    }
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
  std::vector<const void*> order;  // the engines' order in rail_counters(): the endpoints, then the sockets
  for (const auto& ep : eps_) order.push_back(ep.get());
  order.push_back(sock_.get());
  adopt(std::move(links_of), std::move(links), order);
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
  // Naps on the sockets end when a message arrives only if the sockets carry everything.
  nap_wakes_ = sock_ != nullptr && std::all_of(routes.begin(), routes.end(), [](const Plan& r) { return r.sock_only; });
  // "shm for 3 ranks, tcp;ofi_rxm for 4 ranks (rails: eth0 for 2 ranks, eth1 for 2 ranks)"
  auto ranks = [](int k) { return std::to_string(k) + (k == 1 ? " rank" : " ranks"); };
  std::string log;
  for (const auto& [prov, k] : peers_of) log += (log.empty() ? "" : ", ") + prov + " for " + ranks(k);
  const auto sock_only = std::count_if(routes.begin(), routes.end(), [](const Plan& x) { return x.sock_only; });
  const auto sock_limited =
      std::count_if(routes.begin(), routes.end(), [](const Plan& x) { return x.sock && !x.sock_only; });
  int max_flows = 1;
  for (size_t r = 0; sock_ && r < routes.size(); ++r) max_flows = std::max(max_flows, sock_->flows(static_cast<int>(r)));
  if (max_flows > 1) log += "; up to " + std::to_string(max_flows) + " socket flows per peer (DCCL_NET_FLOWS)";
  if (max_flows_fi > 1)
    log += "; up to " + std::to_string(max_flows_fi) + " libfabric flows per peer and rail (DCCL_NET_FLOWS)";
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

}  // namespace dccl::net
