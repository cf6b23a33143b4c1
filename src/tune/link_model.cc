#include "tune/link_model.hpp"

#include <algorithm>
#include <cmath>

namespace dccl::tune {

namespace {
// Fitted (bench/model/run --vm, 2 ranks, 2026-12-01): tcp;ofi_rxm 6.9 us per message and
// 3.1 GB/s in cache; libfabric shm 1 us (fi_pingpong's 8 B one way) and 10 GB/s.
// Reductions of a chunk in cache: ~10 GB/s (dccl-ceiling, 64 KiB float sum).
constexpr LinkModel kShm{1.0, 10.0, 10.0};
// Over TCP on one host, 1 MiB chunks: the socket path carries them whole, and fewer,
// larger messages beat 512 KiB (2 ranks, 4 MiB, 8 interleaved launches, medians:
// 256 KiB 3.27 ms, 512 KiB 2.36, 1 MiB 2.16, 2 MiB 2.23).
constexpr LinkModel kTcp{6.9, 3.1, 10.0, size_t{1} << 20};
// A cloud NIC (100 Gbit/s per accelerator, 15 us per message), as the model's tables.
constexpr LinkModel kCloudNic{15.0, 12.5, 10.0};
}  // namespace

LinkModel link_model_for(const std::string& p) {
  if (p.find("tcp") != std::string::npos || p.find("sockets") != std::string::npos ||
      p.find("udp") != std::string::npos)
    return kTcp;
  if (p.find("efa") != std::string::npos || p.find("verbs") != std::string::npos) return kCloudNic;
  if (p.find("shm") != std::string::npos) return kShm;
  return kTcp;  // unknown providers: assume a network
}

size_t rd_allreduce_max_bytes(int nranks, const LinkModel& m) {
  if (nranks < 2) return kRdMaxBytes;
  const double L = std::ceil(std::log2(static_cast<double>(nranks)));
  const double f = 1.0 - std::pow(2.0, -L);
  // Bytes per microsecond.
  const double beta = m.gbps * 1e3, gamma = m.reduce_gbps * 1e3;
  const double per_byte = (L - 2 * f) / beta + (L - f) / gamma;
  if (per_byte <= 0 || m.alpha_us <= 0) return kRdMaxBytes;
  const double s = L * m.alpha_us / per_byte;
  if (s >= static_cast<double>(kRdMaxBytes)) return kRdMaxBytes;
  return std::max(kRdMinBytes, static_cast<size_t>(s));
}

}  // namespace dccl::tune
