// DCCL_* variables in the environment that are no setting but one or two letters
// away from one: a misspelled setting (DCCL_TIMOUT_S) would otherwise be ignored
// without a word. Names far from every known one are left alone (scripts keep
// their own DCCL_* variables).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/config.hpp"
#include "core/log.hpp"

namespace dccl::core {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> known_names() {
  std::vector<std::string> v;
  for (const ConfigEntry& e : config_entries()) v.emplace_back(e.name);
  for (const ConfigAlias& a : setting_aliases()) v.emplace_back(a.old_name);
  for (const OutsideVar& o : outside_vars())
    if (!strncmp(o.name, "DCCL_", 5)) v.emplace_back(o.name);
  return v;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> misspelled_settings(char* const* env) {
  static const std::vector<std::string> known = known_names();
  std::vector<std::pair<std::string, std::string>> out;
  for (char* const* e = env; e && *e; ++e) {
    const char* eq = strchr(*e, '=');
    if (strncmp(*e, "DCCL_", 5) != 0 || !eq) continue;
    const std::string name(*e, static_cast<size_t>(eq - *e));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    size_t best = 3;
    const std::string* like = nullptr;
    for (const std::string& k : known)
      if (const size_t d = edit_distance(name, k); d < best) {
        best = d;
        like = &k;
      }
    if (like) out.emplace_back(name, *like);
  }
  return out;
}

void warn_misspelled_settings() {
  static std::mutex mu;
  static std::set<std::string> warned;
  for (const auto& [name, like] : misspelled_settings(environ)) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!warned.insert(name).second) continue;
    }
    DCCL_WARN("%s is not a DirectCCL setting and is ignored: did you mean %s?", name.c_str(), like.c_str());
  }
}

}  // namespace dccl::core
