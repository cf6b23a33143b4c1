// Runs queued operations on a communicator's resources: picks the algorithm, builds
// the algorithm's context and drives it to completion.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "core/config_table.hpp"
#include "core/recorder.hpp"
#include "coll/hier.hpp"
#include "coll/scratch.hpp"
#include "mem/path_choice.hpp"
#include "net/shm_segment.hpp"
#include "net/transport.hpp"
#include "sched/op.hpp"
#include "sched/stats.hpp"
#include "tune/tuner.hpp"

namespace dccl::sched {

struct Resources {
  int rank = 0, nranks = 1;
  net::Transport* net = nullptr;
  const tune::Tuner* tuner = nullptr;
  mem::PathChooser* paths = nullptr;
  Stats* stats = nullptr;
  // Scratch per memory kind (host, sim, cuda), made on first use and kept.
  std::unique_ptr<coll::ScratchPool> scratch[3];
  coll::ScratchPool& scratch_for(mem::Backend& be);
  int64_t spin_us = DCCL_DEFAULT_SPIN_US;
  int64_t timeout_ms = DCCL_DEFAULT_TIMEOUT_S * 1000;
  // The running submission's deadline: every wait of the call ends by it.
  std::chrono::steady_clock::time_point deadline{};
  bool check = false;  // DCCL_CHECK
  net::ShmSegment* smem = nullptr;
  coll::Levels* levels = nullptr;  // sub-communicators for hierarchical algorithms, if any
  const std::vector<std::string>* peer_names = nullptr;  // how errors name each rank
  const std::atomic<bool>* failed = nullptr;  // see coll::CtxInit
  const std::string* failure = nullptr;
  dcclResult_t failure_code = dcclRemoteError;
  core::Recorder* rec = nullptr;  // the flight recorder (null: none)
};

// Executes `ops` (one call, or a group of calls on one communicator): send/recv are
// posted together first, collectives run in order, then every send/recv is awaited.
// Throws core::Error naming the rank, the operation and the cause.
void execute(Resources& res, std::span<const Op> ops);

}  // namespace dccl::sched
