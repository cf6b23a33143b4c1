// Data-path counters of a communicator (dcclStats_t), updated lock-free.
#pragma once
#include <atomic>
#include <cstdint>

#include "dccl/dccl.h"

namespace dccl::sched {

struct Stats {
  std::atomic<uint64_t> ops{0}, sent_direct{0}, recv_direct{0}, staged_host{0}, host_copies{0},
      registrations{0}, reg_hits{0}, reg_misses{0}, allocations{0};
  dcclStats_t snapshot() const {
    dcclStats_t s{};
    s.ops = ops.load();
    s.bytesSentDirect = sent_direct.load();
    s.bytesRecvDirect = recv_direct.load();
    s.bytesRelayedHost = staged_host.load();
    s.hostCopies = host_copies.load();
    s.registrations = registrations.load();
    s.regCacheHits = reg_hits.load();
    s.regCacheMisses = reg_misses.load();
    s.allocations = allocations.load();
    return s;
  }
};

}  // namespace dccl::sched
