// Which ranks share a host: hosts in order of their lowest rank, each host's
// ranks ascending, every rank's local rank, and the hosts' leaders (their lowest
// rank). A pure function of every rank's host id, unit-tested without a network.
// Host ids come from DCCL_HOST_ID, else hostname + boot id (host_identity()).
#pragma once
#include <string>
#include <vector>

namespace dccl::topo {

struct Topology {
  int rank = 0;
  int nranks = 1;
  int host = 0;                            // this rank's host index
  int local_rank = 0, local_size = 1;      // place among the ranks of its host
  std::vector<int> host_of;                // rank -> host index
  std::vector<int> local_of;               // rank -> local rank
  std::vector<std::vector<int>> ranks_on;  // host index -> its ranks, ascending
  std::vector<std::string> names;          // host index -> host id

  int nhosts() const { return static_cast<int>(ranks_on.size()); }
  int leader(int h) const { return ranks_on[static_cast<size_t>(h)][0]; }
  // Every host has the same number of ranks.
  bool uniform() const;
  // Ranks of every host are consecutive (rank r is on host r / local_size).
  bool ranks_by_host() const;
  // "2 hosts x 2 ranks: host0=[0,1] host1=[2,3]" (names included when `names_too`).
  std::string summary(bool names_too = true) const;
};

// ids[r]: rank r's host id. Throws core::Error(dcclInvalidArgument) for a bad rank.
Topology make_topology(const std::vector<std::string>& ids, int rank);

// This process's host id: DCCL_HOST_ID when set, else "<hostname>/<boot id>".
// `hostname`: "" = gethostname().
std::string host_identity(const std::string& host_id_setting, const std::string& hostname = "");

// This process's CPU affinity as a list, "0-3,8,10-11" ("" when unknown).
std::string affinity_text();
// Distinct CPUs in the union of such lists (0 when none can be read): the cores
// the ranks of one host may run on together, whatever each one's binding.
int union_cpu_count(const std::vector<std::string>& lists);

}  // namespace dccl::topo
