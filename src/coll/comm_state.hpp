// The state a communicator shares with its scheduler and every collective's context,
// held once by the communicator and referenced, never copied: who this rank is, the
// transport and shared segment, how peers are named, the wait budget, the failure.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_table.hpp"
#include "core/fail_flag.hpp"

namespace dccl::net {
class Transport;
class SharedSegment;
}  // namespace dccl::net

namespace dccl::coll {

struct CommState {
  int rank = 0, nranks = 1;
  net::Transport* net = nullptr;
  net::SharedSegment* segment = nullptr;  // when every rank is on this host
  // How errors name peers ("rank 3 on node7"), by rank; empty: "rank N".
  std::vector<std::string> peer_names;
  int64_t spin_us = DCCL_DEFAULT_SPIN_US;
  size_t busy_widen_bytes = 0;  // core/affinity.hpp
  int64_t timeout_ms = DCCL_DEFAULT_TIMEOUT_S * 1000;
  // Set once the communicator learned that a rank failed: waits then stop with its code.
  core::FailFlag fail;
};

}  // namespace dccl::coll
