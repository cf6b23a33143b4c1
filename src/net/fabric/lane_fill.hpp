// How a striped link (net/fabric/striped_link.hpp) hands its next message to its
// lanes with DCCL_NET_LANE_BALANCE=1: to the lanes with the fewest of this pair's
// bytes still outstanding (sent, not yet completed), filled up to a common level,
// as water fills the lowest vessels first. Idle lanes share a message equally; while
// a pipeline keeps messages in flight, each goes to the lanes that drained most, so
// a flow that collides with another on a path, or a slower rail, is handed less.
// The result is a weight per lane for WireCut::each_weighted (net/rails.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dccl::net {

// The weight of the lane that gets the most; the others in proportion (0: none).
inline constexpr uint16_t kLaneWeightMax = 1024;

// Weights for `len` bytes over lanes whose outstanding bytes are `queued`: lane k
// gets max(0, L - queued[k]) for the level L at which those sum to len.
void fill_lanes(const std::vector<uint64_t>& queued, uint64_t len, uint16_t* w);

}  // namespace dccl::net
