// How a striped link (net/fabric/striped_link.hpp) hands its next message to its
// lanes with DCCL_NET_LANE_BALANCE=1: to the lanes with the fewest of this pair's
// bytes still outstanding (sent, not yet completed), filled up to a common level,
// as water fills the lowest vessels first. Idle lanes share a message equally; while
// a pipeline keeps messages in flight, each goes to the lanes that drained most, so
// a flow that collides with another on a path, or a slower rail, is handed less.
// The result is a weight per lane for WireCut::each_weighted (net/rails.hpp).
//
// Filling by queues needs queues that tell the lanes apart, so a balanced link keeps
// a window per lane (LaneWindow): a message waits while every lane holds at least
// its window, and goes once one drained below it.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dccl::net {

// The weight of the lane that gets the most; the others in proportion (0: none).
inline constexpr uint16_t kLaneWeightMax = 1024;

// Weights for `len` bytes over lanes whose outstanding bytes are `queued`: lane k
// gets max(0, L - queued[k]) for the level L at which those sum to len.
void fill_lanes(const std::vector<uint64_t>& queued, uint64_t len, uint16_t* w);

// Each lane's window: the floor (DCCL_NET_LANE_WINDOW_BYTES), or what the lane
// drains in kWindowTime at its measured rate where that is more, so that a lane of
// a fast NIC still has work queued for that long when its next message waits for
// the caller's next progress call (a reduction between two messages). A lane's rate
// is measured only while it stays busy: the bytes that completed over at least
// kSampleTime since it was handed bytes while empty (or since the last sample),
// averaged over samples. Shorter spans are dropped when the lane empties: a burst of
// completions seen together would read as a rate far above the link's.
class LaneWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kWindowTime = std::chrono::milliseconds(1);
  static constexpr auto kSampleTime = std::chrono::milliseconds(2);

  // floor 0: never full (no message waits).
  LaneWindow(size_t lanes, uint64_t floor) : floor_(floor), rate_(lanes, 0.0), acc_(lanes, 0), since_(lanes) {}

  // Lane k, which had `before` bytes outstanding, was handed more at `now`.
  void handed(size_t k, uint64_t before, Clock::time_point now) {
    if (before == 0) {
      since_[k] = now;
      acc_[k] = 0;
    }
  }
  // `bytes` of lane k completed, seen at `now`.
  void drained(size_t k, uint64_t bytes, Clock::time_point now);
  // Whether every lane holds at least its window (`queued`: bytes outstanding).
  bool full(const std::vector<uint64_t>& queued) const;
  uint64_t window(size_t k) const;
  double rate(size_t k) const { return rate_[k]; }  // bytes per second, 0 unknown

 private:
  uint64_t floor_;
  std::vector<double> rate_;
  std::vector<uint64_t> acc_;  // bytes completed since since_
  std::vector<Clock::time_point> since_;
};

}  // namespace dccl::net
