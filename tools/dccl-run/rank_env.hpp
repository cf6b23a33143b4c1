// Each rank's environment and the argv/envp arrays for execve.
#pragma once
#include <string>
#include <vector>

#include "dccl-run/options.hpp"
#include "dccl-run/placement.hpp"

namespace dcclrun {

// Rank r's environment: dccl-run's own minus the keys set here, then DCCL_RANK,
// DCCL_WORLD_SIZE, DCCL_LOCAL_RANK, DCCL_LOCAL_SIZE, DCCL_ID, then --env (the
// last --env entry for a key wins).
std::vector<std::string> rank_env(const RunOptions& o, int r, const Placement& p, const std::string& id);
// Null-terminated pointers into v (which must outlive them).
std::vector<char*> c_array(std::vector<std::string>& v);

}  // namespace dcclrun
