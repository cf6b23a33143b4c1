#include "core/env_init.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstdlib>
#include <cstring>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::core {

namespace {

const char* env(const char* n) {
  const char* v = getenv(n);
  return v && *v ? v : nullptr;
}

bool pick(const char* rank_var, const char* size_var, const char* name, EnvJob* job) {
  const char* r = env(rank_var);
  const char* s = env(size_var);
  if (!r || !s) return false;
  job->rank = static_cast<int>(parse_int(r, rank_var));
  job->nranks = static_cast<int>(parse_int(s, size_var));
  job->source = name;
  return true;
}

std::string numeric_host(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) raise(dcclInvalidArgument, "cannot resolve rendezvous host '" + host + "': " + gai_strerror(rc));
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof(buf));
  freeaddrinfo(res);
  return buf;
}

// Not secret: every rank must derive the same value from what the launcher shares.
std::array<uint8_t, 16> derived_secret(const std::string& seed) {
  std::array<uint8_t, 16> out{};
  uint64_t h1 = 1469598103934665603ULL, h2 = 0x9e3779b97f4a7c15ULL;
  for (unsigned char ch : seed) {
    h1 = (h1 ^ ch) * 1099511628211ULL;
    h2 = (h2 ^ ch) * 0x100000001b3ULL + 0x7f4a7c15;
  }
  memcpy(out.data(), &h1, 8);
  memcpy(out.data() + 8, &h2, 8);
  return out;
}

}  // namespace

EnvJob env_job() {
  EnvJob job;
  if (!pick("DCCL_RANK", "DCCL_WORLD_SIZE", "DCCL", &job) &&
      !pick("RANK", "WORLD_SIZE", "torchrun", &job) &&
      !pick("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI", &job) &&
      !pick("PMI_RANK", "PMI_SIZE", "MPICH/PMI", &job) &&
      !pick("SLURM_PROCID", "SLURM_NTASKS", "Slurm", &job))
    raise(dcclInvalidArgument,
          "dcclCommInitFromEnv: no rank/size in the environment (set DCCL_RANK and DCCL_WORLD_SIZE, "
          "or run under dccl-run, torchrun, mpirun or srun)");
  if (job.nranks < 1 || job.rank < 0 || job.rank >= job.nranks)
    raise(dcclInvalidArgument, "dcclCommInitFromEnv: rank " + std::to_string(job.rank) + " / size " +
                                   std::to_string(job.nranks) + " from " + job.source + " is out of range");
  if (const char* id = env("DCCL_ID")) {
    job.id = boot::decode_id(boot::id_from_hex(id));
    return job;
  }
  std::string host;
  int port = -1;
  if (const char* addr = env("DCCL_ADDR")) {
    std::string a = addr;
    auto colon = a.rfind(':');
    if (colon == std::string::npos) raise(dcclInvalidArgument, "DCCL_ADDR must be host:port, got '" + a + "'");
    host = a.substr(0, colon);
    port = static_cast<int>(parse_int(a.substr(colon + 1), "DCCL_ADDR port"));
  } else if (env("MASTER_ADDR") && env("MASTER_PORT")) {
    // MASTER_PORT itself belongs to the launcher's own store; ours listens on the next port.
    host = env("MASTER_ADDR");
    port = static_cast<int>(parse_int(env("MASTER_PORT"), "MASTER_PORT")) + 1;
  } else {
    raise(dcclInvalidArgument, "dcclCommInitFromEnv: no rendezvous address (set DCCL_ID, DCCL_ADDR=host:port, "
                               "or MASTER_ADDR and MASTER_PORT)");
  }
  if (port <= 0 || port > 65535) raise(dcclInvalidArgument, "rendezvous port out of range: " + std::to_string(port));
  job.id.host = numeric_host(host);
  job.id.port = static_cast<uint16_t>(port);
  if (const char* s = env("DCCL_SECRET")) {
    job.id.secret = boot::secret_from_hex(s);
  } else {
    std::string seed = "dccl:" + host + ":" + std::to_string(port);
    for (const char* v : {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid",
                          "PMI_JOBID"})
      if (env(v)) seed += std::string(":") + env(v);
    job.id.secret = derived_secret(seed);
    if (job.rank == 0)
      DCCL_WARN("bootstrap secret derived from the job's variables; set DCCL_SECRET (32 hex digits) "
                "to keep other processes out of the rendezvous");
  }
  job.host_store = job.rank == 0;
  return job;
}

}  // namespace dccl::core
