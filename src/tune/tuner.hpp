// Picks the algorithm and chunk size by collective, bytes, what the communicator
// offers (shared segment, sub-communicators across hosts) and the memory's kind,
// from the one table in algo_table.hpp. DCCL_ALGO overrides: "ring" (every
// collective that has it) or "allreduce:rhd,broadcast:tree"; a forced algorithm
// the call cannot use falls back to the default choice.
#pragma once
#include <cstddef>
#include <string>

#include "tune/algo_table.hpp"
#include "tune/link_model.hpp"

namespace dccl::tune {

// Pipeline chunk for device memory when every rank shares a host.
constexpr size_t kDeviceChunkBytes = size_t{2} << 20;

struct Choice {
  Algo algo;
  size_t chunk_bytes;
  const AlgoEntry* entry;  // what runs it
};

class Tuner {
 public:
  // `override_spec` is DCCL_ALGO; throws core::Error(dcclInvalidArgument) for an unknown name.
  // smem_bytes: largest allreduce the shared-memory one-shot takes (0: not available);
  // smem_chunks: the segment has chunk slots for larger allreduces.
  // `link`: the model the size thresholds marked kModelBound come from.
  Tuner(const std::string& override_spec, size_t chunk_bytes_override, bool same_host, size_t smem_bytes = 0,
        bool smem_chunks = false, LinkModel link = link_model_for("tcp"));
  // Hierarchical algorithms have their sub-communicators; `blocked`: ranks are
  // numbered host by host (the hierarchical allgather needs it).
  void set_levels(bool available, bool blocked) {
    offer_.levels = available;
    offer_.blocked = blocked;
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
  size_t chunk_override_;
  bool same_host_;
  size_t one_host_chunk_;  // host memory, every rank on one host (the link model's)
  Offer offer_;
  // rd_allreduce_max_bytes(n, link) by ceil(log2 n) (0..31), computed once: the
  // bound depends on n only through it, and choose() runs on every call.
  size_t rd_bound_[32];
};

}  // namespace dccl::tune
