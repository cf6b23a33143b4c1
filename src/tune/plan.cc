#include "tune/plan.hpp"

#include "coll/hier.hpp"

namespace dccl::tune {

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * KiB;
// Across hosts 256 KiB, so that reduction overlaps the wire.
constexpr size_t kCrossHostChunk = 256 * KiB;
// Device memory on one host: every chunk's reduction is handed to the device's
// engine and waited for, and that hand-off, not the copy, sets the pace (sim, 4
// ranks, medians of 3: 16 MiB direct 21.0 -> 16.8 ms, staged 27.1 -> 22.2 ms
// against 512 KiB).
constexpr size_t kDeviceChunk = 2 * MiB;
// Above 4 ranks the one-shot's n slots are read by every rank: a smaller cap.
constexpr size_t kManyRanksOneshot = 16 * KiB;
constexpr int kManyRanks = 4;
// Two chunk slots per rank; the whole segment stays within 64 MiB.
constexpr size_t kSegmentChunkBudget = 32 * MiB;
}  // namespace

size_t segment_chunk_bytes(size_t configured, bool set_in_env, int nranks) {
  if (nranks == 2 && !set_in_env) return 512 * KiB;
  return configured;
}

SpinPlan spin_plan(int local_size, int host_cores, const core::Config& cfg) {
  // The cores are the union of the host's ranks' affinities, not one rank's binding
  // (under mpirun each rank may be bound to a core of its own).
  if (!cfg.set_in_env("DCCL_SPIN_US") && host_cores > 0 && local_size > host_cores)
    return {0, std::to_string(local_size) + " ranks on " + std::to_string(host_cores) +
                   " cores (the union of this host's ranks' CPU affinities): yielding instead of spinning"};
  return {cfg.spin_us, "DCCL_SPIN_US"};
}

size_t Plan::chunk_bytes(bool device) const {
  if (chunk_override_bytes) return chunk_override_bytes;
  if (!same_host()) return cross_host_chunk_bytes;
  return device ? device_chunk_bytes : one_host_chunk_bytes;
}

Plan make_plan(const PlanInput& in, const core::Config& cfg) {
  Plan p;
  p.provider = in.provider;
  p.nranks = in.nranks;
  p.nhosts = in.nhosts;
  p.local_size = in.local_size;
  p.host_cores = in.host_cores;
  p.link = link_model_for(in.provider);
  p.cross_host_chunk_bytes = kCrossHostChunk;
  p.one_host_chunk_bytes = p.link.one_host_chunk_bytes;
  p.device_chunk_bytes = kDeviceChunk;
  p.chunk_override_bytes = cfg.chunk_bytes;

  p.segment_oneshot_bytes = cfg.segment_bytes;
  if (in.nranks > kManyRanks && p.segment_oneshot_bytes > kManyRanksOneshot) p.segment_oneshot_bytes = kManyRanksOneshot;
  p.segment_chunk_bytes = segment_chunk_bytes(cfg.segment_chunk_bytes, cfg.set_in_env("DCCL_SEGMENT_CHUNK_BYTES"), in.nranks);
  const size_t chunk_cap = kSegmentChunkBudget / static_cast<size_t>(in.nranks > 0 ? in.nranks : 1);
  if (p.segment_chunk_bytes > chunk_cap) p.segment_chunk_bytes = chunk_cap & ~size_t{63};
  p.segment = in.nhosts == 1 && in.nranks >= 2 && (p.segment_oneshot_bytes > 0 || p.segment_chunk_bytes > 0);

  p.rd_max_bytes = rd_allreduce_max_bytes(in.nranks, p.link);
  for (const AlgoEntry& e : algo_table())
    p.windows.push_back(Window{e.coll, e.algo, e.min_bytes, e.max_bytes == kModelBound ? p.rd_max_bytes : e.max_bytes});

  p.hier = cfg.hier && in.nhosts >= 2 && in.uniform && in.local_size >= 2;
  p.hier_shard_bytes = coll::kHierShardBytes;
  p.hier_piece_bytes = cfg.hier_piece_bytes;
  p.spin = spin_plan(in.local_size, in.host_cores, cfg);
  p.spin.busy_widen_bytes = cfg.busy_widen_bytes;
  p.algo_override = cfg.algo;
  return p;
}

}  // namespace dccl::tune
