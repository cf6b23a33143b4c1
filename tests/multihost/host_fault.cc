// A rank for the cross-host fault tests (faults.sh): allreduces 1 MiB in a loop
// until a call fails, then writes "<epoch ms> <error text>" to DIR/result.<rank>
// and exits 1. DIR/pid.<rank> and, after the first good call, DIR/ready.<rank>
// let the test pick its moment.
//   host_fault DIR [--linger] [--abort-rank R]
// --linger: after its failure a rank neither aborts nor exits until DIR/done
//   exists (at most 120 s), so that no other rank learns of the failure from this
//   one's leaving: each must have been stopped by the failure itself.
// --abort-rank R: once DIR/go exists, rank R calls dcclCommAbort instead of its
//   next allreduce, while the other ranks wait inside theirs, and writes
//   "<epoch ms> aborted" to DIR/result.R.
// A failed init writes "<ms it took> <error text>" to DIR/init.<rank> (DCCL_RANK).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"
#include "rank_files.hpp"

namespace {
void linger(const std::string& dir) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (access((dir + "/done").c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: host_fault DIR [--linger] [--abort-rank R]\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool stay = false;
  int abort_rank = -1;
  for (int a = 2; a < argc; ++a) {
    if (strcmp(argv[a], "--linger") == 0) {
      stay = true;
    } else if (strcmp(argv[a], "--abort-rank") == 0 && a + 1 < argc) {
      abort_rank = atoi(argv[++a]);
    } else {
      fprintf(stderr, "host_fault: unknown argument '%s'\n", argv[a]);
      return 2;
    }
  }
  dcclComm_t comm;
  const auto t_init = std::chrono::steady_clock::now();
  if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t_init)
                             .count();
    const char* r = getenv("DCCL_RANK");
    put(dir + "/init." + (r ? r : "x"), std::to_string(ms) + " " + dcclGetLastError(nullptr) + "\n");
    fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr));
    return 1;
  }
  int rank = 0;
  dcclCommUserRank(comm, &rank);
  const std::string me = std::to_string(rank);
  put(dir + "/pid." + me, std::to_string(getpid()) + "\n");
  std::vector<float> buf(1 << 18, 1.0f);
  const std::string go = dir + "/go";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (long i = 0; std::chrono::steady_clock::now() < end; ++i) {
    if (rank == abort_rank && i > 0 && access(go.c_str(), F_OK) == 0) {
      const long long t = now_ms();
      const dcclResult_t rc = dcclCommAbort(comm);
      put(dir + "/result." + me, std::to_string(t) + " aborted (dcclCommAbort returned " + std::to_string(rc) + ")\n");
      if (stay) linger(dir);
      return 1;
    }
    if (dcclAllReduce(buf.data(), buf.data(), buf.size(), dcclFloat32, dcclMax, comm, nullptr) != dcclSuccess) {
      const long long t = now_ms();
      put(dir + "/result." + me, std::to_string(t) + " " + dcclGetLastError(nullptr) + "\n");
      if (stay) linger(dir);
      dcclCommAbort(comm);
      return 1;
    }
    if (buf[0] != 1.0f || buf[buf.size() - 1] != 1.0f) {
      fprintf(stderr, "rank %d: allreduce %ld returned %g, expected 1\n", rank, i, buf[0]);
      return 3;
    }
    if (i == 0) put(dir + "/ready." + me, "1\n");
  }
  fprintf(stderr, "rank %d: no failure seen in 300 s\n", rank);
  dcclCommDestroy(comm);
  return 0;
}
