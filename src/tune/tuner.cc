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
}  // namespace

Tuner::Tuner(const std::string& spec, size_t chunk_override, bool same_host, size_t smem_bytes, bool smem_chunks,
             LinkModel link)
    : chunk_override_(chunk_override), same_host_(same_host), one_host_chunk_(link.one_host_chunk_bytes) {
  // Entry l: the smallest rank count whose ceil(log2) is l.
  for (int l = 0; l < 32; ++l) rd_bound_[l] = rd_allreduce_max_bytes(l == 0 ? 1 : (1 << (l - 1)) + 1, link);
  offer_.oneshot_bytes = smem_bytes;
  offer_.chunks = smem_chunks;
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
          forced_[i] = e;
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
      forced_[static_cast<int>(c)] = e;
    }
  }
}

Choice Tuner::choose(Coll c, size_t bytes, int n, bool device) const {
  if (memo_.valid && memo_.coll == c && memo_.bytes == bytes && memo_.nranks == n && memo_.device == device)
    return memo_.choice;
  const Choice ch = decide(c, bytes, n, device);
  memo_ = Memo{true, device, c, n, bytes, ch};
  return ch;
}

Choice Tuner::decide(Coll c, size_t bytes, int n, bool device) const {
  Offer o = offer_;
  o.host_mem = !device;
  const size_t total = bytes * static_cast<size_t>(n > 0 ? n : 1);
  const AlgoEntry* pick = nullptr;
  if (const AlgoEntry* f = forced_[static_cast<int>(c)]; f && usable(*f, o, bytes)) pick = f;
  for (const AlgoEntry& e : algo_table()) {
    if (pick) break;
    if (e.coll != c || !e.by_default || !usable(e, o, bytes)) continue;
    const size_t size = e.total ? total : bytes;
    const size_t max =
        e.max_bytes == kModelBound ? rd_bound_[n > 1 ? std::bit_width(static_cast<unsigned>(n - 1)) : 0] : e.max_bytes;
    if (size >= e.min_bytes && size <= max && n <= e.max_ranks) pick = &e;
  }
  if (!pick) core::raise(dcclInternalError, std::string("tuner: no algorithm for ") + coll_name(c));
  // Across hosts 256 KiB, so that reduction overlaps the wire. On one host the link
  // model's: larger chunks amortise per-message cost (512 KiB on shared memory, 1 MiB
  // over TCP loopback, where the wire is a memory copy too). Device memory on one host takes 2 MiB: every
  // chunk's reduction is handed to the device's engine and waited for, and that
  // hand-off, not the copy, sets the pace (sim, 4 ranks, medians of 3: 16 MiB
  // direct 21.0 -> 16.8 ms, staged 27.1 -> 22.2 ms against 512 KiB).
  size_t chunk = same_host_ ? (device ? kDeviceChunkBytes : one_host_chunk_) : (256u << 10);
  if (chunk_override_) chunk = chunk_override_;
  return Choice{pick->algo, chunk, pick};
}

}  // namespace dccl::tune
