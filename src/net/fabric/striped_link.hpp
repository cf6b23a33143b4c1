// The striped Link (net/link.hpp): a pair's messages of at least the stripe size cut
// into pieces over several rails (net/rails.hpp WireCut), each rail a FabricLink. The
// receiver posts the same length as the sender: pieces are matched one by one, in
// the order each rail sees them.
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
  StripedLink(int rank, int peer, std::vector<std::unique_ptr<FabricLink>> lanes, WireCut cut,
              std::shared_ptr<std::mutex> order)
      : rank_(rank), peer_(peer), lanes_(std::move(lanes)), cut_(cut), order_(std::move(order)) {}

  size_t stripe_min() const { return cut_.stripe_min; }

  std::string describe() const override {
    return lanes_[static_cast<size_t>(cut_.home)]->describe() + ", striped over " + std::to_string(lanes_.size()) +
           " rails";
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
  void parts(std::vector<Link*>* out) override {
    for (auto& l : lanes_) out->push_back(l.get());
  }

 private:
  int rank_, peer_;
  std::vector<std::unique_ptr<FabricLink>> lanes_;
  WireCut cut_;
  std::shared_ptr<std::mutex> order_;
};

}  // namespace dccl::net
