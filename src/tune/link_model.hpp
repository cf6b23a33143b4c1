// The alpha-beta-gamma model of bench/model/costmodel.py, as far as the tuner takes
// its thresholds from it: a message of m bytes costs alpha + m / gbps on the link,
// reducing it m / reduce_gbps.
#pragma once
#include <cstddef>
#include <string>

namespace dccl::tune {

struct LinkModel {
  double alpha_us;     // per message
  double gbps;         // link bandwidth per direction, GB/s (1e9 B/s)
  double reduce_gbps;  // reduction speed on a chunk in cache
  // Pipeline chunk of host-memory collectives when every rank shares one host.
  size_t one_host_chunk_bytes = size_t{512} << 10;
};

// The parameters for a provider summary ("shm", "tcp;ofi_rxm", "shm+tcp;ofi_rxm",
// "efa", ...): the slowest class present. shm and tcp are fitted by bench/model to
// dccl-perf runs on a 2-core host; efa and verbs take the
// cloud parameters the model's scale-out tables state.
LinkModel link_model_for(const std::string& provider_summary);

// The largest allreduce (per-rank bytes) for which recursive doubling, log2(n)
// exchanges of the whole message, costs less than recursive halving-doubling,
// 2 log2(n) exchanges of halving parts:
//   L (alpha + S/beta + S/gamma) = 2 L alpha + 2 f S/beta + f S/gamma,  f = 1 - 2^-L
//   S* = L alpha / ((L - 2f)/beta + (L - f)/gamma)
// bounded to [kRdMinBytes, kRdMaxBytes] (above, the pipelined ring wins: measured).
constexpr size_t kRdMinBytes = size_t{4} << 10, kRdMaxBytes = size_t{256} << 10;
size_t rd_allreduce_max_bytes(int nranks, const LinkModel& m);

}  // namespace dccl::tune
