// A rank that waits for a late peer leaves its CPU to others: the last rank
// sleeps 1 s before each allreduce, and every other rank's process CPU time over
// its call must stay within the spin window's allowance plus 10 % of the time
// waited (core/backoff.hpp: spin, yield for 0.5 ms, then sleep until woken or a
// nap ends). CPU time is a count, not a timing: a slow machine adds wall time,
// not CPU. Each result is checked against the exact float64 sum.
//   late_peer   (under dccl-run, 2 ranks or more; DCCL_PROVIDER picks the path)
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dccl/dccl.h"

namespace {

constexpr double kSleepS = 1.0;
constexpr double kShare = 0.10;      // of one core, after the spin window
constexpr double kWindowS = 0.005;   // the spin and yield window, with margin (0.55 ms today)

double seconds(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int g_rank = 0, g_n = 1, g_wrong = 0;

bool call(dcclResult_t rc, const char* what) {
  if (rc == dcclSuccess) return true;
  ++g_wrong;
  fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, what, dcclGetErrorString(rc), dcclGetLastError(nullptr));
  return false;
}

// One allreduce of `count` floats with the last rank late; `stream`: null (blocking)
// or a stream, synchronized.
void late_call(dcclComm_t comm, size_t count, dcclStream_t stream, const char* label) {
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((g_rank + 1) * ((i % 7) + 1));
  const bool late = g_rank == g_n - 1;
  if (late) {
    const timespec ts{static_cast<time_t>(kSleepS), 0};
    nanosleep(&ts, nullptr);
  }
  const double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
  bool ok = call(dcclAllReduce(in.data(), out.data(), count, dcclFloat32, dcclSum, comm, stream), label);
  if (ok && stream) ok = call(dcclStreamSynchronize(stream), "dcclStreamSynchronize");
  const double wall = seconds(CLOCK_MONOTONIC) - wall0, cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  if (!ok) return;
  const double ranks = static_cast<double>(g_n) * (g_n + 1) / 2.0;
  for (size_t i = 0; i < count; ++i) {
    const double want = ranks * static_cast<double>((i % 7) + 1);
    if (std::fabs(static_cast<double>(out[i]) - want) > 1e-6 * want) {
      ++g_wrong;
      fprintf(stderr, "rank %d: %s: element %zu is %g, not %g\n", g_rank, label, i, out[i], want);
      return;
    }
  }
  if (late) return;
  const double allowed = kWindowS + kShare * wall;
  printf("rank %d: %s of %zu floats: waited %.3f s, used %.4f s of CPU (%.1f %% of a core; allowed %.4f s)\n", g_rank,
         label, count, wall, cpu, 100.0 * cpu / wall, allowed);
  if (wall < 0.5 * kSleepS) {
    ++g_wrong;
    fprintf(stderr, "rank %d: %s: returned after %.3f s, before the late rank called\n", g_rank, label, wall);
  }
  if (cpu > allowed) {
    ++g_wrong;
    fprintf(stderr, "rank %d: %s: %.4f s of CPU while waiting %.3f s for a late rank (more than %.4f s)\n", g_rank,
            label, cpu, wall, allowed);
  }
}

}  // namespace

int main() {
  dcclComm_t comm;
  if (!call(dcclCommInitFromEnv(&comm), "dcclCommInitFromEnv")) return 1;
  dcclCommUserRank(comm, &g_rank);
  dcclCommCount(comm, &g_n);
  if (g_n < 2) {
    fprintf(stderr, "late_peer: needs 2 ranks or more\n");
    return 2;
  }
  float one = 1.0f, sum = 0.0f;  // connections and segments are made before timing
  call(dcclAllReduce(&one, &sum, 1, dcclFloat32, dcclSum, comm, nullptr), "warm-up allreduce");
  late_call(comm, 2, nullptr, "small blocking allreduce");
  late_call(comm, 1 << 20, nullptr, "4 MiB blocking allreduce");
  dcclStream_t stream = nullptr;
  if (call(dcclStreamCreate(&stream), "dcclStreamCreate")) {
    late_call(comm, 2, stream, "small allreduce on a stream");
    dcclStreamDestroy(stream);
  }
  dcclCommDestroy(comm);
  if (g_wrong) fprintf(stderr, "rank %d: %d failure(s)\n", g_rank, g_wrong);
  return g_wrong ? 1 : 0;
}
