// Hierarchical collectives: a communicator spread over several hosts runs each
// collective as steps on two levels of sub-communicators (dcclCommSplit):
//   local: the ranks of this rank's host (shared segment, shm);
//   cross: the ranks with this rank's local rank on every host, one per host,
//          ranked by host (each local rank has its own, so all of them, and
//          every rail, carry cross-host traffic at once).
// Needs the same number of ranks on every host. The steps run synchronously, in
// the same order on every rank.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "dccl/dccl.h"

namespace dccl::coll {

enum class SubColl { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce };

struct SubOp {
  SubColl coll = SubColl::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // as in the C API: allgather sendcount, reduce_scatter recvcount
  dcclDataType_t dt = dcclFloat32;
  dcclRedOp_t op = dcclSum;
  int root = 0;
  // The mark of the call these steps belong to (sched::step_of): every step carries
  // it in its own call mark (tags and the shared segment's call words), so that
  // steps of calls that differ between ranks, or of different calls, never pair even
  // where the steps themselves look alike (the shards of counts 2k and 2k+1).
  uint32_t parent = 0;
};

class Hierarchy {
 public:
  virtual ~Hierarchy() = default;
  virtual int host() const = 0;  // this rank's host, 0..hosts()-1
  virtual int hosts() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual int host_of(int rank) const = 0;
  virtual int local_of(int rank) const = 0;
  // True when ranks are numbered host by host (rank = host * local_size + local rank).
  virtual bool ranks_by_host() const = 0;
  virtual void local(const SubOp& op) = 0;
  virtual void cross(const SubOp& op) = 0;
  // A cross-host step that runs beside the caller's next local steps (on the
  // levels' own worker, so the network stays busy while the host copies and
  // reduces). At most one at a time: cross_wait() ends it and throws its error.
  // cross_drain() is for unwinding: it stops a step still running (aborting the
  // cross-host communicator) and waits for it, never throwing.
  virtual void cross_start(const SubOp& op) = 0;
  virtual void cross_wait() = 0;
  virtual void cross_drain() noexcept = 0;
  // Bytes of the whole vector per pipelined piece of a large hierarchical
  // allreduce (DCCL_HIER_PIECE_BYTES; 0: one piece).
  virtual size_t piece_bytes() const = 0;
  // buf[i] /= n on buf's memory (dcclAvg's last step).
  virtual void divide(void* buf, size_t count, dcclDataType_t dt, int n) = 0;
  // Scratch of `bytes` in the same kind of memory as `like`, kept for later calls
  // (valid until the next temp() call).
  virtual void* temp(size_t bytes, const void* like) = 0;
};

// Below this many bytes an allreduce reduces on the host, then every local rank
// reduces the whole vector across hosts (fewest steps); above it, reduce-scatter
// on the host, allreduce of each shard across hosts, allgather on the host.
constexpr size_t kHierShardBytes = 64u << 10;

// Each hierarchical algorithm is handed the collective it runs, tagged as itself:
// anything else is a scheduler bug, refused before a step is taken.
inline void expect_coll(const SubOp& op, SubColl c, const char* fn) {
  if (op.coll != c) throw core::Error(dcclInternalError, std::string(fn) + ": handed another collective");
}

void allreduce_hier(Hierarchy& lv, const SubOp& op);
void broadcast_hier(Hierarchy& lv, const SubOp& op);  // op.root: a rank of the whole communicator
void allgather_hier(Hierarchy& lv, const SubOp& op);       // needs ranks_by_host()
void reduce_scatter_hier(Hierarchy& lv, const SubOp& op);  // needs ranks_by_host()
void reduce_hier(Hierarchy& lv, const SubOp& op);          // op.root: a rank of the whole communicator

}  // namespace dccl::coll
