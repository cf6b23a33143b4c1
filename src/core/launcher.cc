// Launcher variables; see launcher.hpp.
#include "core/launcher.hpp"

#include <cstdlib>

#include "core/config.hpp"
#include "core/log.hpp"

namespace dccl::core {

const std::vector<Launcher>& launchers() {
  static const std::vector<Launcher> table = {
      {"DCCL", "DCCL_RANK", "DCCL_WORLD_SIZE", "DCCL_LOCAL_RANK", "DCCL_LOCAL_SIZE"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
  };
  return table;
}

int launcher_local_rank(std::string* source) {
  for (const Launcher& l : launchers()) {
    const char* var = l.local_rank;
    const std::string text = env_text(var);
    if (text.empty() || text == "-1") continue;
    char* end = nullptr;
    const long r = strtol(text.c_str(), &end, 10);
    if (*end || r < 0 || r > 0x7fffffff) {
      DCCL_WARN("ignoring %s='%s': not a local rank", var, text.c_str());
      continue;
    }
    if (source) *source = std::string(var) + "=" + text;
    return static_cast<int>(r);
  }
  return -1;
}

}  // namespace dccl::core
