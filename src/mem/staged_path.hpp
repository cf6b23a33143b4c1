// Host-staged data path, used where peer-direct is not viable: device data crosses
// registered host staging slots. Per peer and direction there are DCCL_STAGING_SLOTS
// slots of DCCL_STAGING_SLOT_BYTES, allocated and registered once, on first use.
// A transfer is cut into slot-sized parts (the same cut the transport makes for
// every message, so a staged sender and a direct receiver agree on the wire):
//   send: device->host copy of part k+1 overlaps the send of part k;
//   recv: the receive of part k+1 overlaps the host->device copy of part k.
// Slots are page-locked by the device backend that first copies into them (tried
// once per pool; refused, they stay pageable). A CUDA backend runs the copy-outs
// and copy-ins on two copy streams, so a rank's sends and receives overlap.
// Slots are granted in posting order per peer, which both ends share, so a few
// slots carry any number of transfers without deadlock.
#pragma once
#include <deque>
#include <list>
#include <memory>
#include <vector>

#include "mem/backend.hpp"
#include "mem/datapath.hpp"
#include "mem/direct_path.hpp"

namespace dccl::mem {

class StagedPath : public DataPath {
 public:
  StagedPath(net::Transport& net, int rank, int nranks, size_t slot_bytes, int slots, PathCounters counters);
  ~StagedPath() override;
  void post_send(int peer, const void* p, size_t bytes, uint64_t tag, Xfer& x) override;
  void post_recv(int peer, void* p, size_t bytes, uint64_t tag, Xfer& x) override;
  bool progress(Xfer& x) override;

 private:
  enum class Stage { CopyOut, Net, CopyIn, Done };
  struct Part {
    size_t off = 0, len = 0;
    int slot = -1;
    Stage stage = Stage::Net;
    Ticket ticket = 0;
    net::Request req;
  };
  struct Pool;
  struct Transfer {
    bool send = false;
    int peer = -1;
    char* dev = nullptr;
    size_t bytes = 0, nparts = 0, started = 0, finished = 0;
    uint64_t tag = 0;
    Backend* be = nullptr;
    Pool* pool = nullptr;
    std::deque<Part> parts;  // started and not yet finished, in order
    std::string error;
  };
  struct Pool {
    char* base = nullptr;
    net::MemRegion* mr = nullptr;
    Backend* pinned = nullptr;  // the backend that page-locked the slots, if any
    bool pin_tried = false;     // page-locking is tried once per pool
    std::vector<int> free;
    std::deque<Transfer*> waiting;  // ops with parts not yet started, in posting order
  };

  void post(bool send, int peer, char* p, size_t bytes, uint64_t tag, Xfer& x);
  Pool& pool(int peer, bool send);
  void pin(Pool& p, Backend& be);
  void grant(Pool& pool);
  void start_part(Transfer& op, int slot);
  void advance(Transfer& op);
  void advance_all();
  char* slot_ptr(const Pool& pool, int slot) const { return pool.base + static_cast<size_t>(slot) * slot_bytes_; }

  net::Transport& net_;
  int rank_;
  size_t slot_bytes_;
  int slots_;
  PathCounters ctr_;
  std::vector<std::unique_ptr<Pool>> send_pools_, recv_pools_;
  std::list<Transfer*> active_;
};

}  // namespace dccl::mem
