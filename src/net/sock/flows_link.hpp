// The several-flows Link (net/link.hpp): one pair's TCP connections on DirectCCL's
// socket path when the pair has more than one (DCCL_NET_FLOWS, net/sock/spray.hpp).
// A message of at least spray::kSprayMinBytes is announced on the lead flow and its
// chunks are sprayed over every flow, each to the one with the fewest bytes queued;
// smaller ones go whole on the lead flow, as on a SockLink. The socket path serves
// every socket peer (engine()). Host memory only.
#pragma once
#include <string>
#include <vector>

#include "net/link.hpp"
#include "net/sock/sock_path.hpp"

namespace dccl::net {

class FlowsLink final : public Link {
 public:
  FlowsLink(SockPath* path, int peer) : path_(path), peer_(peer) {}

  uint64_t limit() const { return path_->limit(peer_); }

  std::string describe() const override {
    return "DirectCCL sockets, " + std::to_string(path_->flows(peer_)) + " flows sprayed";
  }
  void post(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* /*mr*/) override {
    path_->post(send, peer_, buf, len, tag, req);
  }
  void progress() override { path_->progress(false); }
  const void* engine() const override { return path_; }
  void cancel() override { path_->cancel_all(); }
  std::vector<std::string> counters() const override { return path_->counters(); }
  std::string mismatch_note(const Request& r) const override { return path_->mismatch_note(r); }
  bool nap(int64_t ns) override {
    path_->nap(ns);
    return true;
  }

 private:
  SockPath* path_;
  int peer_;
};

}  // namespace dccl::net
