// Runs queued operations on a communicator's resources: picks the algorithm, builds
// the algorithm's context and drives it to completion.
#pragma once
#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "coll/comm_state.hpp"
#include "core/recorder.hpp"
#include "coll/hier.hpp"
#include "coll/scratch.hpp"
#include "mem/path_choice.hpp"
#include "net/shared_segment.hpp"
#include "net/transport.hpp"
#include "sched/op.hpp"
#include "sched/stats.hpp"
#include "tune/tuner.hpp"

namespace dccl::sched {

// What the scheduler runs a submission with: the communicator's shared state
// (referenced, not copied) and what only the scheduler uses.
struct ExecutorInputs {
  coll::CommState* comm = nullptr;
  const tune::Tuner* tuner = nullptr;
  mem::PathChooser* paths = nullptr;
  Stats* stats = nullptr;
  // Scratch per memory kind (host, sim, cuda), made on first use and kept.
  std::unique_ptr<coll::ScratchPool> scratch[3];
  coll::ScratchPool& scratch_for(mem::Backend& be);
  // The pools made so far, for readers on other threads (the status publisher's
  // counters): published once made, never replaced.
  std::atomic<const coll::ScratchPool*> scratch_made[3] = {};
  // The running submission's deadline: every wait of the call ends by it.
  std::chrono::steady_clock::time_point deadline{};
  bool check = false;  // DCCL_CHECK
  coll::Hierarchy* levels = nullptr;  // sub-communicators for hierarchical algorithms, if any
  core::Recorder* rec = nullptr;  // the flight recorder (null: none)
};

// The sub-collective a hierarchical algorithm runs for collective `c` (its own).
coll::SubColl sub_coll(tune::Coll c);

// Executes `ops` (one call, or a group of calls on one communicator): send/recv are
// posted together first, collectives run in order, then every send/recv is awaited.
// Throws core::Error naming the rank, the operation and the cause.
void execute(ExecutorInputs& res, std::span<const Op> ops);

}  // namespace dccl::sched
