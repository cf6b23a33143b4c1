#include "tune/algo_table.hpp"

#include <algorithm>

namespace dccl::tune {

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * KiB, kAny = SIZE_MAX;
constexpr int kAll = 1 << 30;
}  // namespace

const char* coll_name(Coll c) {
  static const char* n[] = {"all_reduce", "reduce", "broadcast", "all_gather",
                            "reduce_scatter", "alltoall", "barrier", "sendrecv"};
  return n[static_cast<int>(c)];
}

const char* algo_name(Algo a) {
  static const char* n[] = {"ring", "rhd", "rd", "tree", "chain", "bruck", "pairwise", "dissemination",
                            "direct", "smem", "smem_rs", "hier"};
  static_assert(sizeof n / sizeof n[0] == kNumAlgos);
  return n[static_cast<int>(a)];
}

const std::vector<AlgoEntry>& algo_table() {
  using C = Coll;
  using A = Algo;
  // In order of preference within each collective.
  static const std::vector<AlgoEntry> t = {
      {C::AllReduce, A::Smem, kOneShot | kHostMem, 0, kAny, kAll, false, true, coll::allreduce_smem, nullptr,
       "one-shot through the host's shared segment"},
      {C::AllReduce, A::SmemRs, kChunks | kHostMem, 0, kAny, kAll, false, true, coll::allreduce_smem_rs, nullptr,
       "chunked reduce-scatter + allgather through the host's shared segment"},
      {C::AllReduce, A::Hier, kLevels, 0, kAny, kAll, false, true, nullptr, coll::allreduce_hier,
       "on the host, across hosts per local rank, on the host"},
      // Up to the size where the link model (tune/link_model.hpp) has halving-doubling win.
      {C::AllReduce, A::Rd, kNothing, 0, kModelBound, kAll, false, true, coll::allreduce_rd, nullptr,
       "recursive doubling"},
      {C::AllReduce, A::Rhd, kNothing, 0, 256 * KiB, kAll, false, true, coll::allreduce_rhd, nullptr,
       "recursive halving-doubling"},
      {C::AllReduce, A::Ring, kNothing, 0, kAny, kAll, false, true, coll::allreduce_ring, nullptr, "pipelined ring"},

      {C::Reduce, A::Hier, kLevels, 0, kAny, kAll, false, true, nullptr, coll::reduce_hier,
       "on each host to the root's local rank, then across hosts"},
      {C::Reduce, A::Tree, kNothing, 0, 64 * KiB, kAll, false, true, coll::reduce_tree, nullptr, "binomial tree"},
      {C::Reduce, A::Chain, kNothing, 0, kAny, kAll, false, true, coll::reduce_chain, nullptr, "pipelined chain"},

      {C::Broadcast, A::Hier, kLevels, 0, kAny, kAll, false, true, nullptr, coll::broadcast_hier,
       "across hosts, then on each host"},
      {C::Broadcast, A::Tree, kNothing, 0, 64 * KiB, kAll, false, true, coll::broadcast_tree, nullptr,
       "binomial tree"},
      {C::Broadcast, A::Chain, kNothing, 0, kAny, kAll, false, true, coll::broadcast_chain, nullptr,
       "pipelined chain"},

      {C::AllGather, A::Hier, kLevels | kBlocked, 0, kAny, kAll, true, true, nullptr, coll::allgather_hier,
       "on the host, then host groups across hosts"},
      // Through the segment every byte is copied twice (in, out); libfabric shm's
      // single CMA copy wins while the buffers sit in cache (measured: 64 KiB-1 MiB).
      {C::AllGather, A::Smem, kChunks | kHostMem, 4 * MiB, kAny, kAll, true, true, coll::allgather_smem, nullptr,
       "chunked through the host's shared segment"},
      {C::AllGather, A::Bruck, kNothing, 0, 64 * KiB, kAll, true, true, coll::allgather_bruck, nullptr, "Bruck"},
      {C::AllGather, A::Ring, kNothing, 0, kAny, kAll, true, true, coll::allgather_ring, nullptr, "ring"},

      {C::ReduceScatter, A::Hier, kLevels | kBlocked, 0, kAny, kAll, false, true, nullptr, coll::reduce_scatter_hier,
       "host groups across hosts, then on the host"},
      {C::ReduceScatter, A::Smem, kChunks | kHostMem, 4 * MiB, kAny, kAll, false, true, coll::reduce_scatter_smem,
       nullptr, "chunked through the host's shared segment"},
      {C::ReduceScatter, A::Ring, kNothing, 0, kAny, kAll, false, true, coll::reduce_scatter_ring, nullptr, "ring"},

      {C::AlltoAll, A::Pairwise, kNothing, 0, kAny, kAll, false, true, coll::alltoall_pairwise, nullptr,
       "pairwise with a window"},
      {C::Barrier, A::Dissemination, kNothing, 0, kAny, kAll, false, true, coll::barrier_dissemination, nullptr,
       "dissemination"},
      {C::SendRecv, A::Direct, kNothing, 0, kAny, kAll, false, true, nullptr, nullptr, "point to point"},
  };
  return t;
}

bool usable(const AlgoEntry& e, const Offer& o, size_t bytes) {
  if ((e.needs & kOneShot) && (o.oneshot_bytes == 0 || bytes > o.oneshot_bytes)) return false;
  if ((e.needs & kChunks) && !o.chunks) return false;
  if ((e.needs & kHostMem) && !o.host_mem) return false;
  if ((e.needs & kLevels) && !o.levels) return false;
  if ((e.needs & kBlocked) && !o.blocked) return false;
  return true;
}

const AlgoEntry* find_entry(Coll c, Algo a) {
  for (const AlgoEntry& e : algo_table())
    if (e.coll == c && e.algo == a) return &e;
  return nullptr;
}

std::string algo_list_text() {
  std::string s;
  for (int c = 0; c < kNumColls; ++c) {
    if (static_cast<Coll>(c) == Coll::SendRecv) continue;
    std::vector<Algo> seen;
    for (const AlgoEntry& e : algo_table())
      if (static_cast<int>(e.coll) == c && std::find(seen.begin(), seen.end(), e.algo) == seen.end())
        seen.push_back(e.algo);
    std::string cn = coll_name(static_cast<Coll>(c));
    cn.erase(std::remove(cn.begin(), cn.end(), '_'), cn.end());
    if (!s.empty()) s += "; ";
    s += cn + ":";
    for (size_t i = 0; i < seen.size(); ++i) {
      s += i ? ", " : " ";
      s += algo_name(seen[i]);
    }
  }
  return s;
}

const std::vector<core::ConfigEntry>& settings() {
  static const std::string algo_help = std::string("Force an algorithm, for every collective that has it (ring) or per "
                                                   "collective (allreduce:rhd,broadcast:tree). Known: ") +
                                       algo_list_text();
  static const std::vector<core::ConfigEntry> entries = [] {
    std::vector<core::ConfigEntry> v = core::config_entries();
    for (core::ConfigEntry& e : v)
      if (std::string(e.name) == "DCCL_ALGO") e.help = algo_help.c_str();
    return v;
  }();
  return entries;
}

}  // namespace dccl::tune
