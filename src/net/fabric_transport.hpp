// The transport as DirectCCL builds it (net/link_transport.hpp's routing and waiting
// over libfabric endpoints, rails and the socket path): transport_open.cc opens the
// providers' endpoints and the socket path, transport_routes.cc plans every peer's
// route at connect() and gives it its links (net/fabric/, net/sock/). With rails.cc,
// the only files of net/ that know both kinds of path. Internal to net/.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <poll.h>

#include "net/blob.hpp"
#include "net/fabric/endpoint.hpp"
#include "net/fabric/provider.hpp"
#include "net/fabric/registration.hpp"
#include "net/fabric/shm_rescue.hpp"
#include "net/link_transport.hpp"
#include "net/rails.hpp"
#include "net/sock/sock_path.hpp"

namespace dccl::net {

inline std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

class FabricTransport final : public LinkTransport {
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
  std::vector<std::string> topology() const override {
    return topology_lines(blobs_, forced_, 16, [this](const std::string& prov) { return trusted(prov); });
  }
  std::string hmem_missing() const override;
  MemRegion* register_memory(const void* buf, size_t len) override;
  void deregister_memory(MemRegion* mr) override;
  MemRegion* register_dmabuf(int fd, uint64_t offset, size_t len, void* base, int iface, int device) override {
    return net::register_dmabuf(eps_, fd, offset, len, base, iface, device);
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
    engines_.clear();  // the links still point at the endpoints, which are never freed
  }

 private:
  bool open(const std::string& prov, std::string* why);
  bool open_rails(const std::string& prov, std::string* why);
  // Flows (net/rails.hpp): how many endpoints per rail of `prov` this rank opens; the
  // further ones opened after a rail's first; a rail's flows in order, from its first.
  int flows_wanted(const std::string& prov) const;
  void open_flows(const std::string& prov, const ProviderInfo& spare, const std::string& rail);
  std::vector<Endpoint*> flows_of(const Endpoint* lead) const;
  [[noreturn]] void unavailable(const std::string& what) const;

  // Whether `prov` may carry the job's data as it is (net/fabric/provider.hpp's table).
  bool trusted(const std::string& prov) const { return opts_.trust_network || provider_trusted(prov); }
  // Untrusted tcp: the rails' names and addresses are published (for the pair plan and
  // the socket path) without opening libfabric endpoints on them.
  bool publish_rails(std::string* why);

  std::string forced_;  // "" = automatic
  std::vector<std::string> ifnames_;  // DCCL_NET_IFNAME
  Blob self_;
  // shm and/or the network provider's rails, in rail order, each followed by its further
  // flows (Endpoint::flow() > 0)
  std::vector<std::unique_ptr<Endpoint>> eps_;
  std::vector<Blob> blobs_;  // every rank's, for topology()
  std::map<fi_addr_t, int> pidfds_;  // same-host shm peers' processes
  std::vector<ShmPeer> shm_peers_;  // fixed after connect(): read by peers_failed()
  std::unique_ptr<SockPath> sock_;  // TCP-routed peers' small messages (DCCL_NET_SOCK_BYTES)
  std::vector<std::pair<std::string, std::string>> unopened_;  // publish_rails: (rail, sockaddr bytes)
  bool abandoned_ = false;
};

}  // namespace dccl::net
