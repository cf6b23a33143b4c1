// Picks the algorithm and chunk size by collective, bytes, what the communicator
// offers (shared segment, sub-communicators across hosts) and the memory's kind,
// from the one table in algo_table.hpp. DCCL_ALGO overrides: "ring" (every
// collective that has it) or "allreduce:rhd,broadcast:tree"; a forced algorithm
// the call cannot use falls back to the default choice.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "tune/algo_table.hpp"
#include "tune/plan.hpp"

namespace dccl::tune {

struct Choice {
  Algo algo;
  size_t chunk_bytes;
  const AlgoEntry* entry;  // what runs it
};

// Throws core::Error(dcclInvalidArgument) when `spec` is not a valid DCCL_ALGO.
void check_algo_override(const std::string& spec);

class Tuner {
 public:
  // Chooses by `plan`: its windows, chunks and shared segment (the one-shot when
  // plan.segment and segment_oneshot_bytes > 0, chunk slots when segment_chunk_bytes > 0),
  // the link model for recursive doubling's bound at other rank counts, and
  // plan.algo_override (DCCL_ALGO): throws core::Error(dcclInvalidArgument) for an
  // unknown name.
  explicit Tuner(const Plan& plan);
  // Hierarchical algorithms have their sub-communicators; `ranks_by_host`: ranks are
  // numbered host by host (the hierarchical allgather needs it).
  void set_levels(bool available, bool ranks_by_host) {
    provides_.levels = available;
    provides_.ranks_by_host = ranks_by_host;
    memo_.valid = false;
  }
  // `bytes`: the per-rank message size the collective moves (allreduce: count*esize;
  // reduce-scatter: the whole input). `device`: the buffers are device memory.
  // The last answer is kept and reused for the same question (a training loop asks
  // the same one call after call): not for concurrent use on one Tuner, which the
  // communicator's turn order guarantees (one operation executes at a time).
  Choice choose(Coll c, size_t bytes, int nranks, bool device = false) const;

 private:
  Choice decide(Coll c, size_t bytes, int nranks, bool device) const;
  struct Memo {
    bool valid = false;
    bool device = false;
    Coll coll{};
    int nranks = 0;
    size_t bytes = 0;
    Choice choice{};
  };
  mutable Memo memo_;
  const AlgoEntry* forced_[kNumColls] = {};
  size_t host_chunk_, device_chunk_;  // the plan's chunk_bytes(false / true)
  std::vector<Window> windows_;       // the plan's, in table order
  Provides provides_;
  // rd_allreduce_max_bytes(n, link) by ceil(log2 n) (0..31), computed once: the
  // bound depends on n only through it, and choose() runs on every call.
  size_t rd_bound_[32];
};

}  // namespace dccl::tune
