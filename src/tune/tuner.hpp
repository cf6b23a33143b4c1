// Picks the algorithm and chunk size by collective, bytes and ranks.
// DCCL_ALGO overrides: "ring" (every collective that has it) or "allreduce:rhd,broadcast:tree".
#pragma once
#include <cstddef>
#include <string>

namespace dccl::tune {

enum class Coll { AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AlltoAll, Barrier, SendRecv };
const char* coll_name(Coll c);  // "all_reduce", ...

enum class Algo { Ring, Rhd, Rd, Tree, Chain, Bruck, Pairwise, Dissemination, Direct, Smem, SmemRs, Hier };
constexpr int kNumAlgos = static_cast<int>(Algo::Hier) + 1;
const char* algo_name(Algo a);

struct Choice {
  Algo algo;
  size_t chunk_bytes;
};

class Tuner {
 public:
  // `override_spec` is DCCL_ALGO; throws core::Error(dcclInvalidArgument) for an unknown name.
  // smem_bytes: largest allreduce the shared-memory one-shot takes (0: not available);
  // smem_chunks: the segment has chunk slots for larger allreduces.
  Tuner(const std::string& override_spec, size_t chunk_bytes_override, bool same_host, size_t smem_bytes = 0,
        bool smem_chunks = false);
  // Hierarchical algorithms (coll/hier.hpp) have their sub-communicators; `blocked`:
  // ranks are numbered host by host (the hierarchical allgather needs it).
  void set_levels(bool available, bool blocked) {
    levels_ = available;
    levels_blocked_ = blocked;
  }
  // `bytes`: the per-rank message size the collective moves (allreduce: count*esize).
  Choice choose(Coll c, size_t bytes, int nranks) const;

 private:
  bool valid_for(Coll c, Algo a) const;
  Algo forced_[8];
  bool has_forced_[8] = {};
  size_t chunk_override_;
  bool same_host_;
  size_t smem_bytes_;
  bool smem_chunks_;
  bool levels_ = false, levels_blocked_ = false;
};

}  // namespace dccl::tune
