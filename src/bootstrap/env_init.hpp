// Where rank, size and rendezvous come from for dcclCommInitFromEnv:
// DCCL_* (dccl-run), torchrun, Open MPI, MPICH/PMI and Slurm variables.
#pragma once
#include <string>

#include "bootstrap/unique_id.hpp"

namespace dccl::boot {

struct EnvJob {
  int rank = -1, nranks = -1;
  boot::UniqueIdData id;
  bool host_store = false;   // this rank (0) must start the store at id.host:id.port
  std::string source;        // which launcher's variables were used, for messages
};

// Throws Error(dcclInvalidArgument) naming the missing or bad variable.
EnvJob env_job();

}  // namespace dccl::boot
