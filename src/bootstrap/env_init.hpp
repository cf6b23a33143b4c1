// Where rank, size and rendezvous come from for dcclCommInitFromEnv:
// DCCL_* (dccl-run), torchrun, Open MPI, MPICH/PMI and Slurm variables.
#pragma once
#include <memory>
#include <string>

#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "dccl/dccl.h"

namespace dccl::boot {

struct EnvJob {
  int rank = -1, nranks = -1;
  boot::UniqueIdData id;
  bool host_store = false;   // this rank (0) must start the store at id.host:id.port
  // ... on every interface: the rendezvous host is a name that resolves to loopback on
  // this node while the launcher says the job spans nodes (the others cannot reach loopback).
  bool listen_any = false;
  std::string source;        // which launcher's variables were used, for messages
  const char* rank_var = "";  // and their names
  const char* size_var = "";
  // Set when this process already runs the store at id.host:id.port for an
  // earlier communicator from the environment that is still alive.
  std::shared_ptr<StoreServer> running_store;
  // A bad DCCL_* setting (dcclSuccess: none): the job is still resolved, with the
  // default settings and a short wait for the secret, so that init can tell the
  // other ranks through the store before it fails with `bad_text`.
  dcclResult_t bad_setting = dcclSuccess;
  std::string bad_text;
};

// Throws Error(dcclInvalidArgument) naming the missing or bad variable (a bad
// DCCL_* setting: see EnvJob::bad_setting, unless the job cannot be resolved).
EnvJob env_job();

// DCCL_ADDR's value, host:port (the last colon splits; port 1 to 65535): its parts,
// or Error(dcclInvalidArgument) naming what is wrong. The one reading of it, for
// init, dccl-run and dccl-info.
void parse_store_addr(const std::string& value, std::string* host, int* port);

// The store rank 0 hosts for `job` (null on other ranks): the store this process
// already runs at that address, shared (a second communicator from the same
// environment gets a key namespace of its own in it), or a new one, which later
// communicators of the same address share while it lives. A single rank's
// private store is started on a free port and `job->id` updated.
std::unique_ptr<StoreServer> env_store(EnvJob* job);

}  // namespace dccl::boot
