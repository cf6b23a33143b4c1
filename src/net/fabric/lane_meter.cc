#include "net/fabric/lane_meter.hpp"

#include <algorithm>
#include <cmath>

namespace dccl::net {

void LaneMeter::finished(const uint64_t* bytes, const int64_t* ns) {
  double sum = 0;
  int n = 0;
  for (size_t k = 0; k < share_.size(); ++k) {
    if (!bytes[k]) continue;
    if (ns[k] <= 0) return;  // a time that cannot be: learn nothing from this message
    sum += static_cast<double>(ns[k]);
    ++n;
  }
  if (n < 2) return;
  const double mean = sum / n;
  double top = 0;
  for (size_t k = 0; k < share_.size(); ++k) {
    if (bytes[k]) {
      const double r = static_cast<double>(ns[k]) / mean;
      double& late = late_[k];
      late = late == 0 ? r : (1 - kLateWeight) * late + kLateWeight * r;
      if (std::fabs(late - 1) > kDeadband) {
        share_[k] *= std::clamp(1 / std::sqrt(late), kMinStep, kMaxStep);
        late = 1;  // moved: gather evidence anew
      }
    }
    top = std::max(top, share_[k]);
  }
  const double floor = static_cast<double>(kMinWeight) / kMaxWeight;
  for (double& s : share_) s = std::max(s / top, floor);
}

void LaneMeter::weights(uint16_t* out) const {
  for (size_t k = 0; k < share_.size(); ++k)
    out[k] = static_cast<uint16_t>(std::clamp(std::lround(kMaxWeight * share_[k]), static_cast<long>(kMinWeight),
                                              static_cast<long>(kMaxWeight)));
}

}  // namespace dccl::net
