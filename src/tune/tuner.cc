#include "tune/tuner.hpp"

#include <bit>
#include <sstream>

#include "core/error.hpp"

namespace dccl::tune {

namespace {
bool parse_algo(const std::string& s, Algo* out) {
  for (int i = 0; i < kNumAlgos; ++i)
    if (s == algo_name(static_cast<Algo>(i))) {
      *out = static_cast<Algo>(i);
      return true;
    }
  for (const core::ConfigAlias& a : core::algo_aliases())  // a renamed algorithm's old name
    if (s == a.old_name && parse_algo(a.name, out)) {
      core::warn_deprecated(a, "DCCL_ALGO: the algorithm ");
      return true;
    }
  return false;
}
bool parse_coll(const std::string& s, Coll* out) {
  for (int i = 0; i < kNumColls; ++i) {
    std::string name = coll_name(static_cast<Coll>(i));
    std::string bare;
    for (char ch : name)
      if (ch != '_') bare += ch;
    if (s == name || s == bare) {
      *out = static_cast<Coll>(i);
      return true;
    }
  }
  return false;
}

// DCCL_ALGO: "ring" (every collective that has it) or "allreduce:rhd,broadcast:tree".
void parse_override(const std::string& spec, const AlgoEntry* forced[kNumColls]) {
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto colon = item.find(':');
    Algo a;
    if (colon == std::string::npos) {
      if (!parse_algo(item, &a))
        core::raise(dcclInvalidArgument, "DCCL_ALGO: unknown algorithm '" + item + "' (known: " + algo_list_text() + ")");
      bool any = false;
      for (int i = 0; i < kNumColls; ++i)
        if (const AlgoEntry* e = find_entry(static_cast<Coll>(i), a)) {
          forced[i] = e;
          any = true;
        }
      if (!any) core::raise(dcclInvalidArgument, "DCCL_ALGO: '" + item + "' applies to no collective");
    } else {
      Coll c;
      if (!parse_coll(item.substr(0, colon), &c))
        core::raise(dcclInvalidArgument, "DCCL_ALGO: unknown collective '" + item.substr(0, colon) + "'");
      const AlgoEntry* e = parse_algo(item.substr(colon + 1), &a) ? find_entry(c, a) : nullptr;
      if (!e)
        core::raise(dcclInvalidArgument, "DCCL_ALGO: '" + item.substr(colon + 1) + "' is not an algorithm for " +
                                             coll_name(c) + " (known: " + algo_list_text() + ")");
      forced[static_cast<int>(c)] = e;
    }
  }
}

}  // namespace

void check_algo_override(const std::string& spec) {
  const AlgoEntry* forced[kNumColls] = {};
  parse_override(spec, forced);
}

Tuner::Tuner(const Plan& plan)
    : host_chunk_(plan.chunk_bytes(false)), device_chunk_(plan.chunk_bytes(true)), windows_(plan.windows) {
  if (windows_.size() != algo_table().size()) core::raise(dcclInternalError, "tuner: the plan's windows are not the table's");
  // Entry l: the smallest rank count whose ceil(log2) is l.
  for (int l = 0; l < 32; ++l) rd_bound_[l] = rd_allreduce_max_bytes(l == 0 ? 1 : (1 << (l - 1)) + 1, plan.link);
  provides_.oneshot_bytes = plan.segment ? plan.segment_oneshot_bytes : 0;
  provides_.chunks = plan.segment && plan.segment_chunk_bytes > 0;
  parse_override(plan.algo_override, forced_);
}

Choice Tuner::choose(Coll c, size_t bytes, int n, bool device) const {
  if (memo_.valid && memo_.coll == c && memo_.bytes == bytes && memo_.nranks == n && memo_.device == device)
    return memo_.choice;
  const Choice ch = decide(c, bytes, n, device);
  memo_ = Memo{true, device, c, n, bytes, ch};
  return ch;
}

Choice Tuner::decide(Coll c, size_t bytes, int n, bool device) const {
  Provides o = provides_;
  o.host_mem = !device;
  const size_t total = bytes * static_cast<size_t>(n > 0 ? n : 1);
  const AlgoEntry* pick = nullptr;
  if (const AlgoEntry* f = forced_[static_cast<int>(c)]; f && usable(*f, o, bytes)) pick = f;
  const std::vector<AlgoEntry>& table = algo_table();
  for (size_t i = 0; i < table.size() && !pick; ++i) {
    const AlgoEntry& e = table[i];
    if (e.coll != c || !usable(e, o, bytes)) continue;
    const size_t size = e.total ? total : bytes;
    // The model's bound by this call's rank count (the plan's window holds its own count's).
    const size_t max = e.max_bytes == kModelBound ? rd_bound_[n > 1 ? std::bit_width(static_cast<unsigned>(n - 1)) : 0]
                                                  : windows_[i].max_bytes;
    if (size >= windows_[i].min_bytes && size <= max) pick = &e;
  }
  if (!pick) core::raise(dcclInternalError, std::string("tuner: no algorithm for ") + coll_name(c));
  return Choice{pick->algo, device ? device_chunk_ : host_chunk_, pick};
}

}  // namespace dccl::tune
