// A rank for the flight-recorder tests (trace.sh): allreduces COUNT floats in a
// loop, checking each result, until a call fails or DIR/done exists; then it
// writes "<epoch ms> <error text>" to DIR/result.<rank> and, with --dump, asks
// every rank to dump its flight recorder (dcclCommDumpRecorder). DIR/pid.<rank>
// and, after the first 20 calls, DIR/ready.<rank> let the test pick its moment.
//   trace_rank DIR COUNT [--culprit R --bad-count N] [--calls N --dump]
// --bad-count N: once DIR/go exists, rank R calls its next allreduce with N floats.
// --calls N:     every rank waits for DIR/go before its 22nd call, then makes N calls in all
//                (instead of running until DIR/done).
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

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: trace_rank DIR COUNT [--culprit R] [--bad-count N] [--calls N] [--dump]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const size_t count = strtoul(argv[2], nullptr, 10);
  int culprit = -1;
  long calls = -1;
  size_t bad_count = 0;
  bool dump = false;
  for (int a = 3; a < argc; ++a) {
    if (strcmp(argv[a], "--culprit") == 0 && a + 1 < argc) culprit = atoi(argv[++a]);
    else if (strcmp(argv[a], "--bad-count") == 0 && a + 1 < argc) bad_count = strtoul(argv[++a], nullptr, 10);
    else if (strcmp(argv[a], "--calls") == 0 && a + 1 < argc) calls = atol(argv[++a]);
    else if (strcmp(argv[a], "--dump") == 0) dump = true;
    else {
      fprintf(stderr, "trace_rank: unknown argument '%s'\n", argv[a]);
      return 2;
    }
  }
  dcclComm_t comm;
  if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
    fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 1;
  dcclCommUserRank(comm, &rank);
  dcclCommCount(comm, &n);
  const std::string me = std::to_string(rank);
  put(dir + "/pid." + me, std::to_string(getpid()) + "\n");
  std::vector<float> buf(count > bad_count ? count : bad_count);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (long i = 0; std::chrono::steady_clock::now() < end; ++i) {
    if (calls < 0 ? access((dir + "/done").c_str(), F_OK) == 0 : i >= calls) break;
    if (calls >= 0 && i == 21)  // every rank at the same call: the test shapes a link meanwhile
      for (int w = 0; w < 600 && access((dir + "/go").c_str(), F_OK) != 0; ++w) usleep(100000);
    size_t c = count;
    if (rank == culprit && bad_count && i > 20 && access((dir + "/go").c_str(), F_OK) == 0) c = bad_count;
    for (size_t j = 0; j < c; ++j) buf[j] = static_cast<float>(rank + 1);
    dcclCommSetCallTag(comm, "trace", static_cast<uint64_t>(i + 1));
    if (dcclAllReduce(buf.data(), buf.data(), c, dcclFloat32, dcclSum, comm, nullptr) != dcclSuccess) {
      put(dir + "/result." + me, std::to_string(now_ms()) + " " + dcclGetLastError(nullptr) + "\n");
      // Stay until the test is done looking (dccl-info reads this rank's status meanwhile).
      for (int w = 0; w < 600 && access((dir + "/done").c_str(), F_OK) != 0; ++w) usleep(100000);
      dcclCommAbort(comm);
      return 1;
    }
    const float want = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
    if (buf[0] != want || buf[c - 1] != want) {
      fprintf(stderr, "rank %d: allreduce %ld returned %g, expected %g\n", rank, i, buf[0], want);
      return 3;
    }
    if (i == 20) put(dir + "/ready." + me, "1\n");
  }
  if (dump && dcclCommDumpRecorder(comm, nullptr, 1) != dcclSuccess)
    fprintf(stderr, "rank %d: dump: %s\n", rank, dcclGetLastError(nullptr));
  put(dir + "/result." + me, std::to_string(now_ms()) + " ok\n");
  usleep(1500000);  // the other ranks take the dump request within DCCL_STATUS_MS
  dcclCommDestroy(comm);
  return 0;
}
