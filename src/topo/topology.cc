#include "topo/topology.hpp"
#include "core/host.hpp"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <cstdlib>
#include <map>
#include <set>

#include "core/affinity.hpp"
#include "core/error.hpp"

namespace dccl::topo {

bool Topology::uniform() const {
  for (const auto& h : ranks_on)
    if (h.size() != ranks_on[0].size()) return false;
  return true;
}

bool Topology::ranks_by_host() const {
  if (!uniform()) return false;
  const int per = static_cast<int>(ranks_on[0].size());
  for (int r = 0; r < nranks; ++r)
    if (host_of[static_cast<size_t>(r)] != r / per) return false;
  return true;
}

std::string Topology::summary(bool names_too) const {
  std::string s = std::to_string(nhosts()) + (nhosts() == 1 ? " host" : " hosts");
  s += uniform() ? " x " + std::to_string(ranks_on[0].size()) + " ranks:" : " (uneven):";
  for (int h = 0; h < nhosts(); ++h) {
    s += " host" + std::to_string(h);
    if (names_too) s += "(" + names[static_cast<size_t>(h)] + ")";
    s += "=[";
    const auto& rs = ranks_on[static_cast<size_t>(h)];
    for (size_t i = 0; i < rs.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(rs[i]);
    }
    s += "]";
  }
  return s;
}

Topology make_topology(const std::vector<std::string>& ids, int rank) {
  Topology t;
  t.nranks = static_cast<int>(ids.size());
  if (rank < 0 || rank >= t.nranks)
    core::raise(dcclInvalidArgument, "topology: rank " + std::to_string(rank) + " outside [0, " +
                                         std::to_string(t.nranks) + ")");
  t.rank = rank;
  std::map<std::string, int> index;
  t.host_of.resize(ids.size());
  t.local_of.resize(ids.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    auto [it, fresh] = index.emplace(ids[r], static_cast<int>(t.ranks_on.size()));
    if (fresh) {
      t.ranks_on.emplace_back();
      t.names.push_back(ids[r]);
    }
    auto& on = t.ranks_on[static_cast<size_t>(it->second)];
    t.host_of[r] = it->second;
    t.local_of[r] = static_cast<int>(on.size());
    on.push_back(static_cast<int>(r));
  }
  t.host = t.host_of[static_cast<size_t>(rank)];
  t.local_rank = t.local_of[static_cast<size_t>(rank)];
  t.local_size = static_cast<int>(t.ranks_on[static_cast<size_t>(t.host)].size());
  return t;
}

std::string host_identity(const std::string& host_id_setting, const std::string& hostname) {
  if (!host_id_setting.empty()) return host_id_setting;
  std::string name = hostname;
  if (name.empty()) name = core::host_name();
  // Two machines may share a hostname; one machine keeps its boot id until reboot.
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return boot.empty() ? name : name + "/" + boot;
}

std::string affinity_text() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "";
  return core::Affinity::cpu_list_text(set);
}

int union_cpu_count(const std::vector<std::string>& lists) {
  std::set<long> cpus;
  for (const std::string& list : lists) {
    size_t pos = 0;
    while (pos < list.size()) {
      size_t comma = list.find(',', pos);
      if (comma == std::string::npos) comma = list.size();
      const std::string item = list.substr(pos, comma - pos);
      pos = comma + 1;
      char* end = nullptr;
      const long lo = std::strtol(item.c_str(), &end, 10);
      long hi = lo;
      if (end && *end == '-') {
        const char* from = end + 1;
        hi = std::strtol(from, &end, 10);
        if (end == from) end = nullptr;  // "0-": no upper bound
      }
      if (!end || *end || item.empty() || lo < 0 || hi < lo || hi >= CPU_SETSIZE) break;  // not a list: skip the rest
      for (long c = lo; c <= hi; ++c) cpus.insert(c);
    }
  }
  return static_cast<int>(cpus.size());
}

}  // namespace dccl::topo
