// dccl-perf's measurement: buffers, launching a collective, timing, checking.
#pragma once
#include <string>
#include <cstddef>
#include <vector>

#include "dccl-perf/args.hpp"
#include "dccl-perf/expect.hpp"
#include "dccl/dccl.h"

namespace dcclperf {

struct Ctx {
  Options opt;
  dcclComm_t comm = nullptr;
  dcclStream_t stream = nullptr;  // NULL with -z
  int rank = 0;
  int nranks = 1;
  size_t elem = 4;
  void* sendbuf = nullptr;  // dcclMemAlloc'd, buf_bytes each
  void* recvbuf = nullptr;
  size_t buf_bytes = 0;
  std::vector<unsigned char> stage;  // host staging for filling and reading back
};

// Prints "dccl-perf: rank R: WHAT: <error string> (<last error>)" on stderr,
// aborts the communicator and exits 1.
[[noreturn]] void fail(const Ctx& c, const char* what, dcclResult_t r);
#define PERF_CHECK(ctx, call)                                   \
  do {                                                          \
    dcclResult_t perf_check_r_ = (call);                        \
    if (perf_check_r_ != dcclSuccess) fail((ctx), #call, perf_check_r_); \
  } while (0)

// Allocates the send and receive buffers large enough for every size.
void alloc_buffers(Ctx& c);
void free_buffers(Ctx& c);

struct Result {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  double wrong = -1;  // elements, summed over ranks; -1 when not checked
  double staged = -1;  // host-staged bytes per payload byte (mean over ranks); -1 for --mem host
};
struct Row {
  size_t bytes = 0;
  size_t count = 0;
  Result out_of_place, in_place;
};

// Times and checks one size, out of place then in place. Collective: every
// rank must call it with the same size; the result is complete on every rank.
Row run_size(Ctx& c, size_t bytes);

// --trace FILE (trace.cc), on rank 0 before the run: makes FILE.dumps/ and removes the
// dumps an earlier run left there (dccl-rec.*.jsonl, nothing else), so that the
// timeline is this run's. Non-zero, with the reason on stderr, when it cannot.
int prepare_trace(const std::string& file);
// After the run: the flight recorders' timeline. Collective; non-zero when it could
// not be written.
int write_trace(Ctx& c, const std::string& file);

}  // namespace dcclperf
