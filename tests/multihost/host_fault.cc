// A rank for the cross-host fault tests (faults.sh): allreduces 1 MiB in a loop
// until a call fails, then writes "<epoch ms> <error text>" to DIR/result.<rank>
// and exits 1. DIR/pid.<rank> and, after the first good call, DIR/ready.<rank>
// let the test pick its moment.   host_fault DIR
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dccl/dccl.h"

namespace {
long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
void put(const std::string& path, const std::string& text) {
  FILE* f = fopen((path + ".tmp").c_str(), "w");
  if (!f) return;
  fputs(text.c_str(), f);
  fclose(f);
  rename((path + ".tmp").c_str(), path.c_str());  // readers see the whole line or nothing
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: host_fault DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  dcclComm_t comm;
  if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
    fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr));
    return 1;
  }
  int rank = 0;
  dcclCommUserRank(comm, &rank);
  const std::string me = std::to_string(rank);
  put(dir + "/pid." + me, std::to_string(getpid()) + "\n");
  std::vector<float> buf(1 << 18, 1.0f);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (long i = 0; std::chrono::steady_clock::now() < end; ++i) {
    if (dcclAllReduce(buf.data(), buf.data(), buf.size(), dcclFloat32, dcclMax, comm, nullptr) != dcclSuccess) {
      const long long t = now_ms();
      put(dir + "/result." + me, std::to_string(t) + " " + dcclGetLastError(nullptr) + "\n");
      dcclCommAbort(comm);
      return 1;
    }
    if (i == 0) put(dir + "/ready." + me, "1\n");
  }
  fprintf(stderr, "rank %d: no failure seen in 300 s\n", rank);
  dcclCommDestroy(comm);
  return 0;
}
