// How a striped link (net/fabric/striped_link.hpp) splits its next message over its
// lanes: so that every lane finishes its piece at the same time. After a message the
// sender knows when each lane's connection finished its piece (the striped link
// counts each lane's pieces on a request of its own); a lane that finished later than the average gets
// a smaller share, one that finished earlier a larger one. A single finishing time
// is noisy (TCP flows share a link unevenly over a few milliseconds; a waiter sees
// completions between its naps), so each lane's lateness (its time over the mean) is
// averaged over messages, and a share moves only while that average is more than
// kDeadband away from 1, by the square root of it (at most 1.25x per message),
// after which the lane's average starts over. A delay common to every lane
// (a receiver that posts late) changes every lane's time alike and the shares not at
// all, so only real differences move them: a flow that collides with another on a
// path, or a slower rail.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dccl::net {

class LaneMeter {
 public:
  // Weights are integers in [kMinWeight, kMaxWeight]: the largest share kMaxWeight,
  // the others in proportion, but never below kMinWeight, so that a slow lane keeps
  // a piece that measures it (a lane whose path clears up is seen again).
  static constexpr uint16_t kMaxWeight = 1024;
  static constexpr uint16_t kMinWeight = kMaxWeight / 16;

  static constexpr double kMaxStep = 1.25, kMinStep = 1 / kMaxStep;
  static constexpr double kDeadband = 0.15, kLateWeight = 0.25;

  explicit LaneMeter(int lanes) : share_(static_cast<size_t>(lanes), 1.0), late_(static_cast<size_t>(lanes), 0.0) {}

  // A message is through: lane k carried bytes[k] (0: no piece) and finished ns[k]
  // after the message was posted. Lanes without a piece keep their share.
  void finished(const uint64_t* bytes, const int64_t* ns);
  // The weights for the next message, one per lane (all kMaxWeight at first).
  void weights(uint16_t* out) const;
  double share(int lane) const { return share_[static_cast<size_t>(lane)]; }

 private:
  std::vector<double> share_;  // largest 1, none below kMinWeight / kMaxWeight
  std::vector<double> late_;   // averaged time over the mean, per lane (0: none yet)
};

}  // namespace dccl::net
