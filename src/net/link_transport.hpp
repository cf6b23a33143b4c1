// The transport's routing and waiting (net/transport.cc): which of a peer's links
// carries a message, the pass that progresses every link's engine, the wait with its
// timeout text. It knows links only through net/link.hpp; the paths are opened and
// the routes planned by its subclass (net/fabric_transport.hpp). Internal to net/.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/link.hpp"
#include "net/transport.hpp"

namespace dccl::net {

class LinkTransport : public Transport {
 public:
  explicit LinkTransport(const TransportOptions& o) : opts_(o) {}

  void isend(int peer, const void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) override {
    post(true, peer, const_cast<void*>(buf), len, tag, req, mr);
  }
  void irecv(int peer, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) override {
    post(false, peer, buf, len, tag, req, mr);
  }
  void progress() override {
    for (Link* l : engines_) l->progress();
  }
  void nap(int64_t ns) override;
  bool nap_wakes() const override { return nap_wakes_; }
  void wait(Request* const* reqs, size_t n, const std::string& what) override;
  void cancel_all() override {
    for (Link* l : engines_) l->cancel();
  }
  std::vector<std::string> rail_counters() const override;
  std::string untrusted_routes() const override { return untrusted_; }
  std::string mismatch_note(const Request& r) const override {
    return r.is_send || !r.link ? std::string() : r.link->mismatch_note(r);
  }

 protected:
  // A peer's links, in the order post() asks them.
  struct Route {
    Link* link = nullptr;      // what no other link takes
    Link* large = nullptr;     // messages of at least large_min bytes (striped over rails)
    size_t large_min = SIZE_MAX;
    Link* small = nullptr;     // host memory up to small_max bytes (the socket path)
    uint64_t small_max = 0;
    // `link` reads the buffers with the CPU: device memory cannot go to this peer
    // (the network is not trusted: the socket path carries everything).
    bool host_only = false;
  };
  // Takes the planned routes (one per rank) and the links they point to; collects the
  // links' engines, in `order` first (the rest after, in route order).
  void adopt(std::vector<Route> routes, std::vector<std::unique_ptr<Link>> links,
             const std::vector<const void*>& order);

  TransportOptions opts_;
  std::vector<Route> routes_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<Link*> engines_;  // one link per engine: progressed, counted, cancelled
  std::string untrusted_;  // after connect(): the ranks reached over an untrusted provider, and why
  bool connected_ = false;
  bool nap_wakes_ = false;  // every route takes the socket path (nap())

 private:
  void post(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr);
  std::string describe_req(const Request& r) const;
};

}  // namespace dccl::net
