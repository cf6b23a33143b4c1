// A rank for the injection test (inject.sh): after init it publishes its pid, waits
// until the attacker is done (DIR/go), allreduces COUNT floats (rank r's element i
// is (r + 1) * (i % 7 + 1)) and compares the result with the sum computed in
// float64. Writes DIR/result.<rank>: "ok", "error <text>" (the call failed: loud,
// acceptable) or "WRONG <index> <got> <want>" (success with other data).
//   inject_rank DIR COUNT
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"

namespace {
void put(const std::string& path, const std::string& text) {
  FILE* f = fopen((path + ".tmp").c_str(), "w");
  if (!f) return;
  fputs(text.c_str(), f);
  fclose(f);
  rename((path + ".tmp").c_str(), path.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: inject_rank DIR COUNT\n");
    return 2;
  }
  const std::string dir = argv[1];
  const size_t count = strtoull(argv[2], nullptr, 10);
  dcclComm_t comm;
  if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
    const std::string e = dcclGetLastError(nullptr);
    fprintf(stderr, "init: %s\n", e.c_str());
    put(dir + "/result." + (getenv("DCCL_RANK") ? getenv("DCCL_RANK") : "x"), "error init: " + e + "\n");
    return 1;
  }
  int rank = 0, n = 0;
  dcclCommUserRank(comm, &rank);
  dcclCommCount(comm, &n);
  const std::string me = std::to_string(rank);
  put(dir + "/pid." + me, std::to_string(getpid()) + "\n");
  for (int i = 0; i < 600 && access((dir + "/go").c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The peer a step behind, as a loaded host would be: the victim's receive then
  // waits while the attacker's messages are already there.
  if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1));
  if (dcclAllReduce(buf.data(), buf.data(), count, dcclFloat32, dcclSum, comm, nullptr) != dcclSuccess) {
    put(dir + "/result." + me, std::string("error ") + dcclGetLastError(nullptr) + "\n");
    dcclCommAbort(comm);
    return 1;
  }
  std::string res = "ok\n";
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<double>((r + 1) * static_cast<int>(i % 7 + 1));
    if (static_cast<double>(buf[i]) != want) {
      res = "WRONG " + std::to_string(i) + " " + std::to_string(buf[i]) + " " + std::to_string(want) + "\n";
      break;
    }
  }
  put(dir + "/result." + me, res);
  dcclCommDestroy(comm);
  return 0;
}
