// Plays NCCL's part for libnccl-net-dccl.so: loads it with dlopen, finds its
// tables, swaps listen handles out of band (files in a directory both processes
// see, as NCCL's bootstrap would carry them) and polls connect/accept until both
// ends have a comm, as NCCL's proxy does. Ranks come from DCCL_RANK and
// DCCL_WORLD_SIZE (dccl-run).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "plugin/nccl/nccl_net.h"

namespace harness {

[[noreturn]] void die(const std::string& what);
#define CHECK(cond, ...)                                                                    \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      char msg_[512];                                                                       \
      snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                            \
      harness::die(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " + msg_);     \
    }                                                                                       \
  } while (0)
#define OK(call) CHECK((call) == kNcclSuccess, "%s failed: %s", #call, harness::last_warning().c_str())

struct Plugin {
  void* lib = nullptr;
  NcclNetV11* v11 = nullptr;
  NcclNetV10* v10 = nullptr;
  NcclNetV9* v9 = nullptr;
  NcclNetV8* v8 = nullptr;
  NcclNetV7* v7 = nullptr;
};

// dlopen + every table; dies naming what is missing. Logs through log_fn().
Plugin load(const std::string& path);
NcclLogFn log_fn();
// The latest warning the plugin logged ("" when none), and all of them.
std::string last_warning();
const std::vector<std::string>& warnings();

int rank();
int world();
// The first device whose name starts with "dccl-<kind>" (kind: sock, shm, tcp).
int find_device(NcclNetV10* net, const std::string& kind);

// Out of band: publishes this rank's bytes under `name`, and reads another
// rank's (waiting up to 60 s). The directory is shared by the job's ranks.
void publish(const std::string& name, const void* bytes, size_t n);
void fetch(const std::string& name, void* bytes, size_t n);
// Every rank reaches this point (files in the directory).
void barrier(const std::string& name);
// At the end of a job: a barrier (unless a rank is gone), then rank 0 removes the directory.
void cleanup(bool wait_for_all = true);

struct Pair {
  void* send = nullptr;  // to `to`
  void* recv = nullptr;  // from `from`
  void* listen = nullptr;
};
// Connects this rank to `to` (send comm) and accepts from `from` (recv comm),
// polling both as NCCL does; `tag` names this round's handles.
Pair connect_pair(NcclNetV10* net, int dev, int to, int from, const std::string& tag);
// The same through the v11 table, under the context its init returned.
Pair connect_pair(NcclNetV11* net, void* ctx, int dev, int to, const std::string& tag);
void close_pair(NcclNetV10* net, Pair& p);

// Tests a request until done (dies after 60 s); returns the sizes.
void wait_req(NcclNetV10* net, void* req, int* sizes = nullptr);

// Deterministic fill and check of bytes.
void fill(void* p, size_t n, uint32_t seed);
bool check(const void* p, size_t n, uint32_t seed);

}  // namespace harness
