// The striped Link (net/link.hpp): a pair's large messages cut into pieces over
// several endpoints (net/rails.hpp WireCut, spread_lanes): its rails (parts of at
// least the stripe size), the flows of its rail (parts of at least kFlowsMinBytes:
// each flow its own connection, so that multipath hashing and per-flow caps tell
// them apart), or both, each a FabricLink. The receiver posts the same length as the
// sender: pieces are matched one by one, in the order each endpoint sees them.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/fabric/fabric_link.hpp"
#include "net/link.hpp"
#include "net/rails.hpp"

namespace dccl::net {

class StripedLink final : public Link {
 public:
  // `lanes`: the rails in order; `order`: held while one message's pieces are posted,
  // shared by every striped link of the transport so that two threads' messages reach
  // the lanes in one order.
  // `rails` x `flows` lanes (rails >= 2: striped over rails; flows >= 2: over flows).
  StripedLink(int rank, int peer, std::vector<std::unique_ptr<FabricLink>> lanes, WireCut cut,
              std::shared_ptr<std::mutex> order, int rails, int flows)
      : rank_(rank), peer_(peer), lanes_(std::move(lanes)), cut_(cut), order_(std::move(order)), rails_(rails),
        flows_(flows) {}

  size_t stripe_min() const { return cut_.stripe_min; }

  // "tcp;ofi_rxm on eth0, striped over 2 rails", "tcp;ofi_rxm on eth0, over 8 flows",
  // "tcp;ofi_rxm on eth0, striped over 2 rails x 8 flows".
  std::string describe() const override {
    std::string s = lanes_[static_cast<size_t>(cut_.home)]->endpoint()->rail_label() + ", ";
    if (rails_ >= 2) s += "striped over " + std::to_string(rails_) + " rails" + (flows_ >= 2 ? " x " : "");
    else s += "over ";
    if (flows_ >= 2) s += std::to_string(flows_) + " flows";
    return s;
  }
  void post(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) override;
  // The lanes' endpoints are progressed, counted and cancelled as parts.
  void progress() override {
    for (auto& l : lanes_) l->progress();
  }
  const void* engine() const override { return this; }
  void cancel() override {
    for (auto& l : lanes_) l->cancel();
  }
  std::vector<std::string> counters() const override { return {}; }
  std::string mismatch_note(const Request& r) const override;
  // The lanes (rails, flows) that still hold pieces of `r`, by their endpoints' labels.
  std::string pending_note(const Request& r) const override;
  void parts(std::vector<Link*>* out) override {
    for (auto& l : lanes_) out->push_back(l.get());
  }

 private:
  int rank_, peer_;
  std::vector<std::unique_ptr<FabricLink>> lanes_;
  WireCut cut_;
  std::shared_ptr<std::mutex> order_;
  int rails_, flows_;
};

}  // namespace dccl::net
