#include <cerrno>
#include <map>
#include <mutex>
#include <unistd.h>
#include <sys/syscall.h>
#include <poll.h>
// Transport: routes each peer to an endpoint (shm on the same host, tcp;ofi_rxm across
// hosts, or one forced provider), posts tagged messages and drives completions.
#include "net/transport.hpp"
#include "net/fabric_transport.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/config.hpp"
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

std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace


FabricTransport::FabricTransport(const TransportOptions& o) : opts_(o) {
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
    sock_ = std::make_unique<SockPath>(o.rank, sock_max, o.timeout, tcp_ips, tcp_rails, o.secret);
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
  // A receive of up to len bytes cannot know which path or cut a shorter message took.
  if (!send && req->up_to && (rt.sock || !rt.lanes.empty()))
    core::raise(dcclInvalidUsage,
                core::describe(opts_.rank, op,
                               "a receive of up to " + std::to_string(len) + " bytes from rank " + std::to_string(peer) +
                                   ", whose messages take the socket path or stripes by size"));
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
  core::Backoff backoff(opts_.spin_us, t0, opts_.spin_us > 0);
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
    backoff.idle(now, nap_wakes_, [this](int64_t ns) { nap(ns); });
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

std::unique_ptr<Transport> Transport::create(const TransportOptions& opts) {
  return std::make_unique<FabricTransport>(opts);
}

std::string call_mismatch_note(const Request& r, size_t got) {
  return "; call mismatch: rank " + std::to_string(r.peer) +
         " sent a message for this step of a call that differs from this rank's (another count, datatype, "
         "collective, op or root; its message has " + std::to_string(got) + " bytes, this rank expects " +
         std::to_string(r.len) + ")";
}

}  // namespace dccl::net
