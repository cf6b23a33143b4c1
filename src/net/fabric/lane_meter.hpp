// How a striped link (net/fabric/striped_link.hpp) splits its next message over its
// lanes: in proportion to the rate each lane's connection delivered lately, so that a
// flow that collides with another on one path, or a slower rail, gets fewer bytes and
// every lane finishes at about the same time. Rates come from the endpoints' send
// meters (Endpoint::tx_meter: bytes over the time a send was outstanding), sampled
// when a message is posted; a lane's rate moves halfway to each new sample.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dccl::net {

class LaneMeter {
 public:
  // Weights are integers in [kMinWeight, kMaxWeight]: the fastest lane kMaxWeight,
  // the others in proportion, but never below kMinWeight, so that a slow lane keeps
  // a share that measures it (a lane whose path clears up is seen again).
  static constexpr uint16_t kMaxWeight = 1024;
  static constexpr uint16_t kMinWeight = kMaxWeight / 16;
  // A sample counts once its lane was busy this long since the last one.
  static constexpr uint64_t kMinSampleNs = 200'000;

  explicit LaneMeter(int lanes) : last_(static_cast<size_t>(lanes)), rate_(static_cast<size_t>(lanes), 0.0) {}

  // Lane `lane`'s meter now (cumulative bytes and busy ns).
  void sample(int lane, uint64_t bytes, uint64_t ns);
  // The weights for the next message, one per lane; all kMaxWeight until every lane
  // has been measured.
  void weights(uint16_t* out) const;
  double rate(int lane) const { return rate_[static_cast<size_t>(lane)]; }

 private:
  struct Last {
    uint64_t bytes = 0, ns = 0;
  };
  std::vector<Last> last_;
  std::vector<double> rate_;  // bytes per ns; 0: not yet measured
};

}  // namespace dccl::net
