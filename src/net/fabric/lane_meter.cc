#include "net/fabric/lane_meter.hpp"

#include <algorithm>
#include <cmath>

namespace dccl::net {

void LaneMeter::sample(int lane, uint64_t bytes, uint64_t ns) {
  Last& l = last_[static_cast<size_t>(lane)];
  if (ns < l.ns || bytes < l.bytes) l = Last{};  // another endpoint behind the lane: start over
  const uint64_t dns = ns - l.ns, dbytes = bytes - l.bytes;
  if (dns < kMinSampleNs) return;  // too little to tell; keep accumulating
  const double r = static_cast<double>(dbytes) / static_cast<double>(dns);
  double& rate = rate_[static_cast<size_t>(lane)];
  rate = rate == 0.0 ? r : 0.5 * (rate + r);
  l = Last{bytes, ns};
}

void LaneMeter::weights(uint16_t* out) const {
  const double top = *std::max_element(rate_.begin(), rate_.end());
  const bool all = std::all_of(rate_.begin(), rate_.end(), [](double r) { return r > 0.0; });
  for (size_t k = 0; k < rate_.size(); ++k) {
    if (!all || top <= 0.0) {
      out[k] = kMaxWeight;
      continue;
    }
    const double w = std::round(kMaxWeight * rate_[k] / top);
    out[k] = static_cast<uint16_t>(std::clamp(w, static_cast<double>(kMinWeight), static_cast<double>(kMaxWeight)));
  }
}

}  // namespace dccl::net
