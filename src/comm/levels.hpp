// The two levels of sub-communicators a communicator spread over several hosts
// runs its hierarchical algorithms on (coll/hier.hpp): made at init with split(),
// one for this rank's host and one across hosts for its local rank.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "coll/hier.hpp"
#include "dccl/dccl.h"
#include "mem/backend.hpp"
#include "sched/stream.hpp"
#include "topo/topology.hpp"

namespace dccl::comm {

class Communicator;

class CommLevels final : public coll::Hierarchy {
 public:
  // `deadline`: the parent's running call's deadline (sched::ExecutorInputs::deadline),
  // which every step on the sub-communicators shares.
  CommLevels(const topo::Topology& topo, int64_t timeout_ms, size_t piece_bytes, std::unique_ptr<Communicator> local,
             std::unique_ptr<Communicator> cross, const std::chrono::steady_clock::time_point* deadline);
  ~CommLevels() override;

  int host() const override { return topo_.host; }
  int hosts() const override { return topo_.nhosts(); }
  int local_rank() const override { return topo_.local_rank; }
  int local_size() const override { return topo_.local_size; }
  int host_of(int rank) const override { return topo_.host_of[static_cast<size_t>(rank)]; }
  int local_of(int rank) const override { return topo_.local_of[static_cast<size_t>(rank)]; }
  bool ranks_by_host() const override { return topo_.ranks_by_host(); }
  void local(const coll::SubOp& op) override;
  void cross(const coll::SubOp& op) override;
  void cross_start(const coll::SubOp& op) override;
  void cross_wait() override;
  void cross_drain() noexcept override;
  size_t piece_bytes() const override { return piece_bytes_; }
  void divide(void* buf, size_t count, dcclDataType_t dt, int n) override;
  void* temp(size_t bytes, const void* like) override;

  // The parent stopped (its failure watch, a local error, abort): both
  // sub-communicators stop too, ending their in-flight waits at once. `idle`:
  // nothing was in flight (see Communicator::halt).
  void halt(dcclResult_t code, const std::string& text, bool idle);
  void finalize();  // both sub-communicators (see Communicator::finalize)
  // The sub-communicators' data-path counters (not their operation counts).
  void add_stats(dcclStats_t* s) const;

 private:
  void run(Communicator& c, const coll::SubOp& op, sched::Stream* stream);
  topo::Topology topo_;
  int64_t timeout_ms_;
  size_t piece_bytes_;
  const std::chrono::steady_clock::time_point* deadline_;
  std::unique_ptr<Communicator> local_, cross_;
  // The worker of cross_start(); declared after the communicators so that it is
  // joined before they go.
  std::unique_ptr<sched::Stream> worker_;
  bool cross_running_ = false;
  struct Temp {
    mem::Backend* be = nullptr;
    void* p = nullptr;
    size_t bytes = 0;
  } temp_[3];  // per memory kind (host, sim, cuda)
};

}  // namespace dccl::comm
