// Rank placement: emulated hosts and CPU binding.
#include "dccl-run/placement.hpp"

#include <sched.h>

namespace dcclrun {

// --bind-to core (the default): rank r on the r-th CPU dccl-run may use while the
// ranks fit them; with more ranks than CPUs, consecutive ranks share one (rank r on
// CPU r * cpus / n, every CPU used). Neighbours in rank order are the ring's
// neighbours, recursive doubling's first partners and an emulated host's ranks: on a
// shared core they hand it to each other when they wait, and the placement is the
// same in every launch. Measured with 4 ranks on 2 cores over TCP:
// medians at 8 B to 4 MiB level with leaving the ranks unbound, within the noise,
// with fewer and shorter slow launches; emulated hosts 3-4x faster at 8 B (unbound,
// each host's ranks busy-polled on CPUs shared with the other's). Every emulated
// host shares this machine's CPUs, so
// the ranks of the whole job are counted against them.
void bind_ranks(const RunOptions& o, std::vector<Placement>* place) {
  if (o.bind_to == "none") return;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) return;
  const size_t n = place->size(), k = cpus.size();
  for (size_t r = 0; r < n; ++r) (*place)[r].cpu = cpus[n <= k ? r : r * k / n];
}

std::vector<Placement> place_ranks(const RunOptions& o, const EmuNet* net) {
  std::vector<Placement> out;
  if (!net) {
    for (int r = 0; r < o.nranks; ++r) out.push_back({r, o.nranks, -1, ""});
    return out;
  }
  for (size_t h = 0; h < o.ranks_per_host.size(); ++h)
    for (int k = 0; k < o.ranks_per_host[h]; ++k)
      out.push_back({k, o.ranks_per_host[h], net->host_ns_fd(static_cast<int>(h)),
                     EmuNet::hostname(static_cast<int>(h))});
  return out;
}

}  // namespace dcclrun
