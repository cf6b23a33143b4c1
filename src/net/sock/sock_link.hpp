// The socket Link (net/link.hpp): one pair's TCP connection on DirectCCL's socket
// path (net/sock/sock_path.hpp), which serves every socket peer (engine()). Host
// memory only: it reads and writes the buffers with the CPU.
#pragma once
#include <string>
#include <vector>

#include "net/link.hpp"
#include "net/sock/sock_path.hpp"

namespace dccl::net {

class SockLink : public Link {
 public:
  SockLink(SockPath* path, int peer) : path_(path), peer_(peer) {}

  // Largest message this pair's connection carries (both ends' DCCL_NET_SOCK_BYTES).
  uint64_t limit() const { return path_->limit(peer_); }

  std::string describe() const override { return "DirectCCL sockets"; }
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

 protected:
  SockPath* path_;
  int peer_;
};

}  // namespace dccl::net
