// Where each rank runs: its emulated host (if any), its place among that host's
// ranks, and the CPU it is bound to.
#pragma once
#include <string>
#include <vector>

#include "dccl-run/netns.hpp"
#include "dccl-run/options.hpp"

namespace dcclrun {

struct Placement {
  int local_rank = 0, local_size = 1;
  int netns_fd = -1;     // emulated host's network namespace; -1: dccl-run's own
  std::string hostname;  // its UTS name
  int cpu = -1;          // --bind-to core: the CPU it runs on; -1: not bound
};

// One entry per rank: every rank on this host, or the ranks of --hosts host by host.
std::vector<Placement> place_ranks(const RunOptions& o, const EmuNet* net);
// --bind-to core: sets each rank's CPU (see placement.cc); --bind-to none leaves them -1.
void bind_ranks(const RunOptions& o, std::vector<Placement>* place);

}  // namespace dcclrun
