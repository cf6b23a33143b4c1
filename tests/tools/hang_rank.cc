// A rank for the flight-recorder checks under dccl-run: allreduces 1024 floats,
// ITERS times (default 40), and at call AT (default 20) rank BAD (default 2):
//   hang_rank sleep S     sleeps S seconds (the others time out and fail)
//   hang_rank kill        dies of SIGKILL (the others fail hearing of it)
//   hang_rank dump DIR    (no fault) after the calls, rank 0 calls
//                         dcclCommDumpRecorder(comm, DIR, 0); "dump: ok" or the error
// A failed call: its error on stderr, dcclCommAbort, exit 3.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dccl/dccl.h"

namespace {
int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "sleep" && mode != "kill" && mode != "dump") {
    fprintf(stderr, "usage: hang_rank sleep S | kill | dump DIR\n");
    return 2;
  }
  const int iters = env_int("ITERS", 40), at = env_int("AT", 20), bad = env_int("BAD", 2);
  dcclComm_t comm;
  if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
    fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 1;
  dcclCommUserRank(comm, &rank);
  dcclCommCount(comm, &n);
  std::vector<float> buf(1024);
  for (int i = 0; i < iters; ++i) {
    if (rank == bad && i == at) {
      if (mode == "sleep") sleep(static_cast<unsigned>(atoi(argc > 2 ? argv[2] : "30")));
      if (mode == "kill") raise(SIGKILL);
    }
    for (float& x : buf) x = 1;
    if (dcclAllReduce(buf.data(), buf.data(), buf.size(), dcclFloat32, dcclSum, comm, nullptr) != dcclSuccess) {
      fprintf(stderr, "rank %d call %d: %s\n", rank, i, dcclGetLastError(comm));
      dcclCommAbort(comm);
      return 3;
    }
    if (buf[0] != static_cast<float>(n)) {
      fprintf(stderr, "rank %d call %d: %g, expected %d\n", rank, i, buf[0], n);
      return 4;
    }
  }
  if (mode == "dump" && rank == 0) {
    const dcclResult_t r = dcclCommDumpRecorder(comm, argc > 2 ? argv[2] : nullptr, 0);
    printf("dump: %s\n", r == dcclSuccess ? "ok" : dcclGetLastError(comm));
  }
  dcclCommDestroy(comm);
  return 0;
}
