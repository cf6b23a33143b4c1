// The ranks' environments.
#include "dccl-run/rank_env.hpp"

extern char** environ;

namespace dcclrun {

std::vector<std::string> rank_env(const RunOptions& o, int r, const Placement& p, const std::string& id) {
  std::vector<std::string> set = {
      "DCCL_RANK=" + std::to_string(r), "DCCL_WORLD_SIZE=" + std::to_string(o.nranks),
      "DCCL_LOCAL_RANK=" + std::to_string(p.local_rank), "DCCL_LOCAL_SIZE=" + std::to_string(p.local_size),
      "DCCL_ID=" + id};
  set.insert(set.end(), o.env.begin(), o.env.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& s : set) overridden |= s.compare(0, key.size() + 1, key + "=") == 0;
    if (!overridden) env.push_back(kv);
  }
  // Later --env entries win over earlier ones with the same key.
  for (size_t i = 0; i < set.size(); ++i) {
    const std::string key = set[i].substr(0, set[i].find('=') + 1);
    bool later = false;
    for (size_t j = i + 1; j < set.size(); ++j) later |= set[j].compare(0, key.size(), key) == 0;
    if (!later) env.push_back(set[i]);
  }
  return env;
}

std::vector<char*> c_array(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace dcclrun
