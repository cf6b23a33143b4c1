// The one table of algorithms: for every collective, its algorithms in order of
// preference, each with the function that runs it, what it needs (the shared
// segment, host memory, sub-communicators, ...) and the sizes it is the default
// for. The tuner's choice, DCCL_ALGO's parsing, the algorithms' names and the
// setting's help text all come from it: adding an algorithm touches this table and
// the algorithm's own file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coll/algos.hpp"
#include "coll/hier.hpp"
#include "core/config.hpp"

namespace dccl::tune {

enum class Coll { AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AlltoAll, Barrier, SendRecv };
constexpr int kNumColls = static_cast<int>(Coll::SendRecv) + 1;
const char* coll_name(Coll c);  // "all_reduce", ...

enum class Algo { Ring, Rhd, Rd, Tree, Chain, Bruck, Pairwise, Dissemination, Direct, Segment, SegmentRs, Hier };
constexpr int kNumAlgos = static_cast<int>(Algo::Hier) + 1;
const char* algo_name(Algo a);

// What an algorithm needs of the communicator and the call.
enum Requires : unsigned {
  kNothing = 0,
  kOneShot = 1u << 0,   // the shared segment's one-shot slots, and a message that fits one
  kChunks = 1u << 1,    // the shared segment's chunk slots
  kHostMem = 1u << 2,   // host buffers (the segment cannot carry device memory)
  kLevels = 1u << 3,    // intra-host and cross-host sub-communicators
  kRanksByHost = 1u << 4,   // ranks numbered host by host
};

using FlatFn = void (*)(coll::CallContext&, const coll::Args&);
using HierFn = void (*)(coll::Hierarchy&, const coll::SubOp&);

// max_bytes that the tuner takes from its link model (tune/link_model.hpp) for the
// call's rank count instead of from the table.
constexpr size_t kModelBound = SIZE_MAX - 1;

struct AlgoEntry {
  Coll coll;
  Algo algo;
  unsigned needs = kNothing;
  // The default choice where min_bytes <= size <= max_bytes (size: the per-rank
  // bytes, or the whole buffer when `total`); tune::Plan holds the windows in use.
  size_t min_bytes = 0, max_bytes = SIZE_MAX;
  bool total = false;
  FlatFn flat = nullptr;  // one of flat / hier
  HierFn hier = nullptr;
  const char* what = "";  // dccl-info --plan's description
};

const std::vector<AlgoEntry>& algo_table();

// What the communicator and the call offer (Requires bits it satisfies).
struct Provides {
  size_t oneshot_bytes = 0;  // largest one-shot message (0: no one-shot)
  bool chunks = false;
  bool host_mem = true;
  bool levels = false;
  bool ranks_by_host = false;
};
bool usable(const AlgoEntry& e, const Provides& o, size_t bytes);

// "allreduce: segment, segment_rs, hier, rd, rhd, ring; reduce: ..." for help texts.
std::string algo_list_text();
// The settings table (core::config_entries) with DCCL_ALGO's help listing the
// algorithms from the one table of them: what dccl-info and docs/env.md show.
const std::vector<core::ConfigEntry>& settings();
// The entry running `algo` for `c`, or null.
const AlgoEntry* find_entry(Coll c, Algo a);

}  // namespace dccl::tune
