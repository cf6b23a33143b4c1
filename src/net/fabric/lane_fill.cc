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

}  // namespace dccl::net
