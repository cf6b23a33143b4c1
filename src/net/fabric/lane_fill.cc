#include "net/fabric/lane_fill.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dccl::net {

void fill_lanes(const std::vector<uint64_t>& queued, uint64_t len, uint16_t* w) {
  const size_t n = queued.size();
  std::vector<size_t> by(n);
  std::iota(by.begin(), by.end(), size_t{0});
  std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) { return queued[a] < queued[b]; });
  // The level: the i least-queued lanes filled to L = (len + their queues) / i, as
  // long as L does not pass the next lane's queue.
  double level = 0, below = 0;
  size_t used = 0;
  for (size_t i = 0; i < n; ++i) {
    below += static_cast<double>(queued[by[i]]);
    used = i + 1;
    level = (static_cast<double>(len) + below) / static_cast<double>(used);
    if (i + 1 == n || level <= static_cast<double>(queued[by[i + 1]])) break;
  }
  double top = 0;
  std::vector<double> give(n, 0.0);
  for (size_t i = 0; i < used; ++i) {
    give[by[i]] = std::max(0.0, level - static_cast<double>(queued[by[i]]));
    top = std::max(top, give[by[i]]);
  }
  for (size_t k = 0; k < n; ++k)
    w[k] = top > 0 ? static_cast<uint16_t>(std::lround(kLaneWeightMax * give[k] / top)) : kLaneWeightMax;
}

void LaneWindow::drained(size_t k, uint64_t bytes, Clock::time_point now) {
  acc_[k] += bytes;
  if (now - since_[k] < kSampleTime) return;  // too short to tell; an empty lane starts over
  const double sample = static_cast<double>(acc_[k]) / std::chrono::duration<double>(now - since_[k]).count();
  rate_[k] = rate_[k] > 0 ? rate_[k] + (sample - rate_[k]) / 4 : sample;
  since_[k] = now;
  acc_[k] = 0;
}

uint64_t LaneWindow::window(size_t k) const {
  const double by_rate = rate_[k] * std::chrono::duration<double>(kWindowTime).count();
  return std::max(floor_, static_cast<uint64_t>(by_rate));
}

bool LaneWindow::full(const std::vector<uint64_t>& queued) const {
  if (floor_ == 0) return false;
  for (size_t k = 0; k < queued.size(); ++k)
    if (queued[k] < window(k)) return false;
  return true;
}

}  // namespace dccl::net
