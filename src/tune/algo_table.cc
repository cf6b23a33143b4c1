#include "tune/algo_table.hpp"

#include <algorithm>

namespace dccl::tune {

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * KiB;
}  // namespace

const char* coll_name(Coll c) {
  static const char* n[] = {"all_reduce", "reduce", "broadcast", "all_gather",
                            "reduce_scatter", "alltoall", "barrier", "sendrecv"};
  return n[static_cast<int>(c)];
}

const char* algo_name(Algo a) {
  static const char* n[] = {"ring", "rhd", "rd", "tree", "chain", "bruck", "pairwise", "dissemination",
                            "direct", "segment", "segment_rs", "hier"};
  static_assert(sizeof n / sizeof n[0] == kNumAlgos);
  return n[static_cast<int>(a)];
}

const std::vector<AlgoEntry>& algo_table() {
  using C = Coll;
  using A = Algo;
  // In order of preference within each collective.
  static const std::vector<AlgoEntry> t = {
      {.coll = C::AllReduce, .algo = A::Segment, .needs = kOneShot | kHostMem, .flat = coll::allreduce_segment,
       .what = "one-shot through the host's shared segment"},
      {.coll = C::AllReduce, .algo = A::SegmentRs, .needs = kChunks | kHostMem, .flat = coll::allreduce_segment_rs,
       .what = "chunked reduce-scatter + allgather through the host's shared segment"},
      {.coll = C::AllReduce, .algo = A::Hier, .needs = kLevels, .hier = coll::allreduce_hier,
       .what = "on the host, across hosts per local rank, on the host"},
      // Up to the size where the link model (tune/link_model.hpp) has halving-doubling win.
      {.coll = C::AllReduce, .algo = A::Rd, .max_bytes = kModelBound, .flat = coll::allreduce_rd,
       .what = "recursive doubling"},
      {.coll = C::AllReduce, .algo = A::Rhd, .max_bytes = 256 * KiB, .flat = coll::allreduce_rhd,
       .what = "recursive halving-doubling"},
      {.coll = C::AllReduce, .algo = A::Ring, .flat = coll::allreduce_ring, .what = "pipelined ring"},

      {.coll = C::Reduce, .algo = A::Hier, .needs = kLevels, .hier = coll::reduce_hier,
       .what = "on each host to the root's local rank, then across hosts"},
      {.coll = C::Reduce, .algo = A::Tree, .max_bytes = 64 * KiB, .flat = coll::reduce_tree, .what = "binomial tree"},
      {.coll = C::Reduce, .algo = A::Chain, .flat = coll::reduce_chain, .what = "pipelined chain"},

      {.coll = C::Broadcast, .algo = A::Hier, .needs = kLevels, .hier = coll::broadcast_hier,
       .what = "across hosts, then on each host"},
      {.coll = C::Broadcast, .algo = A::Tree, .max_bytes = 64 * KiB, .flat = coll::broadcast_tree,
       .what = "binomial tree"},
      {.coll = C::Broadcast, .algo = A::Chain, .flat = coll::broadcast_chain, .what = "pipelined chain"},

      {.coll = C::AllGather, .algo = A::Hier, .needs = kLevels | kRanksByHost, .total = true, .hier = coll::allgather_hier,
       .what = "on the host, then host groups across hosts"},
      // Through the segment every byte is copied twice (in, out); libfabric shm's
      // single CMA copy wins while the buffers sit in cache (measured: 64 KiB-1 MiB).
      {.coll = C::AllGather, .algo = A::Segment, .needs = kChunks | kHostMem, .min_bytes = 4 * MiB, .total = true,
       .flat = coll::allgather_segment, .what = "chunked through the host's shared segment"},
      {.coll = C::AllGather, .algo = A::Bruck, .max_bytes = 64 * KiB, .total = true, .flat = coll::allgather_bruck,
       .what = "Bruck"},
      {.coll = C::AllGather, .algo = A::Ring, .total = true, .flat = coll::allgather_ring, .what = "ring"},

      {.coll = C::ReduceScatter, .algo = A::Hier, .needs = kLevels | kRanksByHost, .hier = coll::reduce_scatter_hier,
       .what = "host groups across hosts, then on the host"},
      {.coll = C::ReduceScatter, .algo = A::Segment, .needs = kChunks | kHostMem, .min_bytes = 4 * MiB,
       .flat = coll::reduce_scatter_segment, .what = "chunked through the host's shared segment"},
      {.coll = C::ReduceScatter, .algo = A::Ring, .flat = coll::reduce_scatter_ring, .what = "ring"},

      {.coll = C::AlltoAll, .algo = A::Pairwise, .flat = coll::alltoall_pairwise, .what = "pairwise with a window"},
      {.coll = C::Barrier, .algo = A::Dissemination, .flat = coll::barrier_dissemination, .what = "dissemination"},
      {.coll = C::SendRecv, .algo = A::Direct, .what = "point to point"},
  };
  return t;
}

bool usable(const AlgoEntry& e, const Provides& o, size_t bytes) {
  if ((e.needs & kOneShot) && (o.oneshot_bytes == 0 || bytes > o.oneshot_bytes)) return false;
  if ((e.needs & kChunks) && !o.chunks) return false;
  if ((e.needs & kHostMem) && !o.host_mem) return false;
  if ((e.needs & kLevels) && !o.levels) return false;
  if ((e.needs & kRanksByHost) && !o.ranks_by_host) return false;
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
