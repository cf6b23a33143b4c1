// The libfabric Link (net/link.hpp): one endpoint (net/fabric/endpoint.hpp) and the
// peer's address in its address vector. Messages above the endpoint's part size are
// split by the endpoint; the endpoint is shared by every peer it reaches (engine()).
#pragma once
#include <string>
#include <vector>

#include "net/fabric/endpoint.hpp"
#include "net/link.hpp"

namespace dccl::net {

class FabricLink final : public Link {
 public:
  FabricLink(Endpoint* ep, fi_addr_t addr) : ep_(ep), addr_(addr) {}

  Endpoint* endpoint() const { return ep_; }
  fi_addr_t address() const { return addr_; }

  std::string describe() const override { return ep_->label(); }
  void post(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) override {
    ep_->post(send, addr_, buf, len, tag, mr ? mr->desc_for(ep_) : nullptr, req);
  }
  // One piece of a message that other pieces complete too (a striped link's): "" once
  // posted or queued, else the cause (Endpoint::post_one).
  // `first`: a receive's first piece (Endpoint::post_one).
  std::string post_piece(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr,
                         bool first = false) {
    return ep_->post_one(send, addr_, buf, len, tag, mr ? mr->desc_for(ep_) : nullptr, req, first);
  }
  void progress() override { ep_->progress(false); }
  const void* engine() const override { return ep_; }
  void cancel() override { ep_->cancel_all(); }
  std::vector<std::string> counters() const override;
  std::string mismatch_note(const Request& r) const override;
  // Whether the peer's message for receive `r` waits here with another length
  // (count_note), or from a call that differs (*got: its length).
  bool other_length(const Request& r) const;
  bool other_call(const Request& r, size_t* got) const;
  static std::string count_note(const Request& r);

 private:
  Endpoint* ep_;
  fi_addr_t addr_;
};

}  // namespace dccl::net
