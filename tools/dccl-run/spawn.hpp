// Starting one rank: fork, then in the child only async-signal-safe calls
// (its own process group, CPU binding, default signal dispositions, the
// emulated host's namespaces, stdio on pipes) before execve.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "dccl-run/placement.hpp"

namespace dcclrun {

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;  // read ends of the child's stdout and stderr pipes
};

// Starts rank r: `program` (a resolved path) with `args` and `env`, placed as `pl`,
// with signal mask `child_mask`; `parent` is dccl-run's pid. On failure says why
// and returns pid -1. A child that cannot exec writes
// "dccl-run: rank R: <what> (errno E)" and exits 127.
Spawned spawn_rank(int r, const std::string& program, std::vector<std::string> args,
                   std::vector<std::string> env, const Placement& pl, const sigset_t& child_mask, pid_t parent);

}  // namespace dcclrun
