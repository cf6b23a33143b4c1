// The tuning plan: every threshold, cap, chunk and wait policy a communicator runs
// with, decided once from its topology, its provider and its settings. The tuner,
// the shared segment, the hierarchy and the waits read it; dccl-info --plan prints
// it (text or JSON), and bench/model reads that JSON instead of copying numbers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "tune/algo_table.hpp"
#include "tune/link_model.hpp"

namespace dccl::tune {

// Where an algorithm is the default: min_bytes <= size <= max_bytes, size being the
// per-rank bytes, or the whole buffer when the table says `total`. Recursive
// doubling's bound comes from the link model by rank count (Plan::rd_max_bytes).
struct Window {
  Coll coll;
  Algo algo;
  size_t min_bytes, max_bytes;
};

// Busy-polling against yielding: more ranks on a host than its cores means a
// spinning rank steals the core a peer needs.
struct SpinPlan {
  int64_t spin_us = 0;  // poll this long before yielding (0: yield at once)
  std::string why;      // where the value comes from, for logs and dccl-info
  // While the host is busy, calls of at least this many bytes leave a one-CPU
  // binding (core/affinity.hpp; 0: never).
  size_t busy_widen_bytes = 0;
};
// host_cores: distinct CPUs the host's ranks may run on (0: unknown).
SpinPlan spin_plan(int local_size, int host_cores, const core::Config& cfg);

struct Plan {
  // What it was made from.
  std::string provider;  // the provider summary ("shm", "tcp;ofi_rxm", ...)
  int nranks = 1, nhosts = 1, local_size = 1, host_cores = 0;
  LinkModel link{};

  // Pipeline chunks: across hosts; on one host for host memory (the link model's);
  // on one host for device memory; DCCL_CHUNK_BYTES replaces all three when set.
  size_t cross_host_chunk_bytes = 0, one_host_chunk_bytes = 0, device_chunk_bytes = 0;
  size_t chunk_override_bytes = 0;
  size_t chunk_bytes(bool device) const;  // what this communicator's calls take
  bool same_host() const { return nhosts == 1; }

  // The shared segment (all ranks on one host, at least 2): the largest one-shot
  // allreduce and the chunk of each rank's two chunk slots, 0 for a part that is
  // off. `segment`: the communicator uses one (false once opening it failed).
  bool segment = false;
  size_t segment_oneshot_bytes = 0, segment_chunk_bytes = 0;

  // Recursive doubling's upper bound for this communicator's rank count, and the
  // clamp the link model's crossover is held to.
  size_t rd_max_bytes = 0, rd_min_bound = kRdMinBytes, rd_max_bound = kRdMaxBytes;
  // Every table entry's size window, in table order (kModelBound: rd_max_bytes).
  std::vector<Window> windows;

  // Hierarchical algorithms: used when `hier`; allreduce shards above
  // hier_shard_bytes and runs in pieces of hier_piece_bytes (0: one piece).
  bool hier = false;
  size_t hier_shard_bytes = 0, hier_piece_bytes = 0;

  SpinPlan spin;
  std::string algo_override;  // DCCL_ALGO
};

struct PlanInput {
  int nranks = 1, nhosts = 1, local_size = 1;
  bool uniform = true;  // every host has as many ranks
  int host_cores = 0;
  std::string provider;
};
Plan make_plan(const PlanInput& in, const core::Config& cfg);

// The segment's chunk: DCCL_SEGMENT_CHUNK_BYTES when the environment set it, else that
// setting's default, or 512 KiB for 2 ranks, so that each rank's part of a chunk is
// 256 KiB as with 256 KiB over 4. Measured against 256 KiB (9 and 7 interleaved
// launches, medians): 2 ranks 1/4/16/64 MiB 3-7% faster; 4 ranks 1 and 16 MiB 3-7%
// slower: what matters is each rank's part of a chunk.
size_t segment_chunk_bytes(size_t configured, bool set_in_env, int nranks);

}  // namespace dccl::tune
