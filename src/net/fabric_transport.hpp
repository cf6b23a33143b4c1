// The libfabric transport's class (net/transport.hpp's Transport over endpoints,
// rails and the socket path), shared by its two files: transport.cc (endpoints,
// posting, waiting) and transport_connect.cc (routing every peer at connect()).
// Internal to net/.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <poll.h>

#include "net/blob.hpp"
#include "net/endpoint.hpp"
#include "net/provider.hpp"
#include "net/rails.hpp"
#include "net/shm_rescue.hpp"
#include "net/sock_path.hpp"
#include "net/transport.hpp"

namespace dccl::net {

inline std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

class FabricTransport final : public Transport {
 public:
  explicit FabricTransport(const TransportOptions& o);
  ~FabricTransport() override {
    if (connected_)
      for (const auto& line : rail_counters()) DCCL_INFO("net: rank %d %s", opts_.rank, line.c_str());
    unlink_exited_peers_regions(shm_peers_);  // a same-host peer killed: its region too, even as a zombie
    for (auto& [a, fd] : pidfds_) close(fd);
    if (!pidfds_.empty()) reap_orphaned_shm_regions();
  }

  std::string local_blob() const override;
  void connect(const std::vector<std::string>& blobs, std::chrono::steady_clock::time_point until = {}) override;
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
  bool nap_wakes() const override { return nap_wakes_; }
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
    if (has_call_mark(r.tag))
      for (const Lane& l : lanes)
        if (l.ep->peek(l.addr, r.tag, kLengthMarkBits | kCallMarkBits, &got, 100)) return call_mismatch_note(r, got);
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
  bool nap_wakes_ = false;  // every route takes the socket path (nap())
};

}  // namespace dccl::net
