// Direct (peer-direct) data path: the transport reaches device memory through the
// backend's dma-buf. Each allocation is exported once, mapped by the transport (as
// a NIC maps a dma-buf) and registered; the registration cache keeps it until the
// memory is freed through DirectCCL or the cache bound evicts it. No host copies.
#pragma once
#include <atomic>
#include <memory>

#include "mem/backend.hpp"
#include "mem/datapath.hpp"
#include "mem/reg_cache.hpp"

namespace dccl::mem {

// One dma-buf range registered with the transport: mapped by the CPU and
// registered as host memory (sim: its memfd, as a NIC maps a dma-buf), or handed
// to the provider (CUDA: FI_MR_DMABUF). Destruction deregisters and unmaps.
struct DmaBufRegistration {
  void* addr = nullptr;  // where dev_base is seen by the transport
  const char* dev_base = nullptr;
  void* map = nullptr;  // the page-aligned mapping itself (sim)
  size_t len = 0;
  net::MemRegion* mr = nullptr;
  net::Transport* net = nullptr;
  ~DmaBufRegistration();
  // The transport-visible address of device pointer p inside the range.
  void* at(const void* p) const { return static_cast<char*>(addr) + (static_cast<const char*>(p) - dev_base); }
};

// Registers the allocation [base, base+size) of memory `kind`, exported as `d`
// (`range`: its page-aligned extent, as the registration cache keys it).
// Throws core::Error naming `rank`.
std::shared_ptr<DmaBufRegistration> register_dmabuf_range(net::Transport& net, int rank, Kind kind, int device,
                                                          const DmaBuf& d, void* base, size_t size,
                                                          const RegRange& range);

struct PathCounters {
  std::atomic<uint64_t>* sent_direct = nullptr;
  std::atomic<uint64_t>* recv_direct = nullptr;
  std::atomic<uint64_t>* staged_host = nullptr;
  std::atomic<uint64_t>* host_copies = nullptr;
  std::atomic<uint64_t>* allocations = nullptr;
};

class DirectPath : public DataPath {
 public:
  DirectPath(net::Transport& net, int rank, size_t cache_bytes, PathCounters counters);
  ~DirectPath() override;
  void post_send(int peer, const void* p, size_t bytes, uint64_t tag, Xfer& x) override;
  void post_recv(int peer, void* p, size_t bytes, uint64_t tag, Xfer& x) override;
  bool progress(Xfer& x) override;
  RegCacheStats cache_stats() const { return cache_.stats(); }
  // The registration of the allocation holding [p, p+bytes), made on a miss; the
  // entry is not evicted while the Ref lives. Throws for memory outside one allocation.
  RegCache::Ref acquire(const void* p, size_t bytes);
  // Deregisters the allocation holding p (now, or when its transfers end).
  void forget(const void* p);

 private:
  // Transport-visible address of device pointer p (mapping it on first use).
  void* reach(const void* p, size_t bytes, Xfer& x, net::MemRegion** mr);

  net::Transport& net_;
  int rank_;
  PathCounters ctr_;
  RegCache cache_;
  int hook_ = -1;
};

}  // namespace dccl::mem
