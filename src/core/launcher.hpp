// The launchers DirectCCL runs under and the variables each sets: dccl-run,
// torchrun, Open MPI's mpirun, MPICH/PMI and Slurm's srun. The bootstrap reads a
// job's rank and size from them; the rail and GPU choice read the local rank.
#pragma once
#include <string>
#include <vector>

namespace dccl::core {

struct Launcher {
  const char* name;        // "DCCL" (dccl-run or set by hand), "torchrun", ...
  const char* rank;        // the job-wide rank
  const char* size;        // the world size
  const char* local_rank;  // the rank's place on its host
  const char* local_size;  // ranks on its host; null when the launcher sets none
};

// In the order they are tried: DCCL first, so dccl-run's (or a user's) own
// variables win over a launcher's.
const std::vector<Launcher>& launchers();

// This process's place on its host: DCCL_LOCAL_RANK (a setting), then the
// launchers' local rank variables. -1 when none is set; a value that is not a
// local rank is skipped with a warning. `source` gets "VAR=value".
int launcher_local_rank(std::string* source);

}  // namespace dccl::core
