// Calls that differ between ranks must not pair, even where their messages or
// shared-segment steps look alike (run under dccl-run):
//   call_pair_check SCENARIO
// On the hierarchical path (hosts emulated by DCCL_HOST_ID with emu_hosts.sh) a
// collective runs as steps on sub-communicators; steps of calls that differ can
// look alike (the shards of all_reduce counts 2k and 2k+1 are both k):
//     tail    4 ranks, 2 hosts x 2: all_reduce of 2k floats (160 KB) on host 0,
//             2k+1 on host 1, then all_reduce of 1 float everywhere, then one
//             more. Without a check host 1's tail step pairs with host 0's second
//             call (wrong data, dcclSuccess on every rank for the first two calls).
//     local   the same with 2k on rank 0 and 2k+1 on rank 1 (both on host 0):
//             the intra-host tail step pairs with rank 0's next call.
//     lanes   2k on ranks 0 and 2 (local rank 0 of each host), 2k+1 on ranks 1 and
//             3, k = 512 Ki (4 MiB): the cross-host steps agree, every step on the
//             host goes through the shared segment (reduce-scatter and allgather of
//             k rows, alike for both counts; then rank 1's tail, a one-shot of 1
//             float, alike to rank 0's next call): only the call each step belongs
//             to tells them apart.
//     avg     all_reduce of 1000 floats (one step on the host, one across hosts),
//             dcclAvg on rank 0 and dcclSum on the others: the hierarchy sums at
//             every level and divides at the end, so the steps were alike and every
//             rank returned dcclSuccess (rank 0 the average, the others the sum).
// On one host's shared segment (one-shot allreduce, 2 ranks):
//     zero COUNT      call 0 of 0 floats on rank 0 and of COUNT on rank 1, then 2 of
//                     COUNT (1000: the one-shot; 1 Mi: chunked): rank 0's call 1 used
//                     to pair with rank 1's call 0 (wrong data)
//     zero-all COUNT  call 0 of 0 floats on every rank: every call succeeds, right
// And on any path:
//     premul COUNT  all_reduce of COUNT floats with PreMulSum ops of different
//             scalars on every rank (must succeed, checked), then a PreMulSum on
//             rank 0 against a plain sum on the others (same count and datatype):
//             they used to pair, rank 1 getting 2*x0 + x1 for its sum (2 ranks;
//             4 on emulated hosts for the hierarchy).
// Every rank checks each call that returns dcclSuccess against a float64 reference
// of what its own arguments define (the ranks' inputs are known to every rank);
// a call whose counts differ between ranks must not return dcclSuccess. Exit 0
// when no rank saw wrong data as success.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dccl/dccl.h"

namespace {

int g_rank = -1, g_n = 0;

// Input of rank r, call `call`, element i: small integers, exact in float32.
float input(int r, int call, size_t i) { return static_cast<float>((r + 1) * 100 + call * 10 + static_cast<int>(i % 7)); }

// Checks one allreduce result against the float64 sum of every rank's input, for
// the count this rank passed. Returns 1 on a wrong element.
int check(const std::vector<float>& d, size_t count, int call) {
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < g_n; ++r) want += input(r, call, i);
    if (std::fabs(static_cast<double>(d[i]) - want) > 0) {
      std::printf("rank %d: FAILED: call %d returned dcclSuccess with element %zu = %g, reference %g\n", g_rank, call,
                  i, static_cast<double>(d[i]), want);
      return 1;
    }
  }
  return 0;
}

enum class Mode { Tail, Local, Lanes, Avg };

// Rank r's scalar in the PreMulSum control call: r + 2.
int premul(size_t count) {
  dcclComm_t c = nullptr;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", g_rank, dcclGetLastError(nullptr));
    return 3;
  }
  dcclCommCount(c, &g_n);
  float scalar = static_cast<float>(g_rank + 2);
  dcclRedOp_t pm = dcclSum;
  if (dcclRedOpCreatePreMulSum(&pm, &scalar, dcclFloat32, dcclScalarHostImmediate, c) != dcclSuccess) return 3;
  int bad = 0;
  for (int call = 0; call < 2; ++call) {
    // call 0: every rank a PreMulSum; call 1: rank 0 a PreMulSum, the others a sum.
    const bool scaled = call == 0 || g_rank == 0;
    std::vector<float> s(count), d(count, -1.0f);
    for (size_t i = 0; i < count; ++i) s[i] = input(g_rank, call, i);
    const dcclResult_t rc = dcclAllReduce(s.data(), d.data(), count, dcclFloat32, scaled ? pm : dcclSum, c, nullptr);
    const char* msg = dcclGetLastError(c);
    if (call == 0) {
      if (rc != dcclSuccess) {
        std::printf("rank %d: FAILED: PreMulSum on every rank failed: %s\n", g_rank, msg);
        bad = 1;
        break;
      }
      for (size_t i = 0; i < count && !bad; ++i) {
        double want = 0;
        for (int r = 0; r < g_n; ++r) want += (r + 2.0) * input(r, call, i);
        if (static_cast<double>(d[i]) != want) {
          std::printf("rank %d: FAILED: PreMulSum element %zu = %g, reference %g\n", g_rank, i,
                      static_cast<double>(d[i]), want);
          bad = 1;
        }
      }
      if (!bad) std::printf("rank %d: ok: PreMulSum of %zu floats right\n", g_rank, count);
    } else if (rc == dcclSuccess) {
      std::printf("rank %d: FAILED: %s against another op returned dcclSuccess (element 0 = %g)\n", g_rank,
                  scaled ? "PreMulSum" : "sum", static_cast<double>(d[0]));
      bad = 1;
    } else {
      std::printf("rank %d: ok: PreMulSum against a sum refused: %s\n", g_rank, msg);
    }
  }
  std::fflush(stdout);
  dcclCommAbort(c);
  return bad;
}

int run(Mode mode) {
  dcclComm_t c = nullptr;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", g_rank, dcclGetLastError(nullptr));
    return 3;
  }
  dcclCommCount(c, &g_n);
  // 2k floats = 160 KB: above the hierarchy's 64 KiB, pieces + tail; lanes: 4 MiB,
  // where the host's reduce-scatter and allgather take the shared segment.
  const size_t k = mode == Mode::Lanes ? size_t{1} << 19 : 20000;
  const bool odd = mode == Mode::Local ? g_rank == 1 : mode == Mode::Lanes ? g_rank % 2 == 1 : g_rank >= g_n / 2;
  size_t counts[3] = {2 * k + (odd ? 1 : 0), 1, 1};
  if (mode == Mode::Avg) counts[0] = 1000;
  const dcclRedOp_t op0 = mode == Mode::Avg && g_rank == 0 ? dcclAvg : dcclSum;
  int bad = 0;
  bool failed = false;
  for (int call = 0; call < 3 && !failed; ++call) {
    const size_t n = counts[call];
    std::vector<float> s(n), d(n, -1.0f);
    for (size_t i = 0; i < n; ++i) s[i] = input(g_rank, call, i);
    const dcclResult_t rc = dcclAllReduce(s.data(), d.data(), n, dcclFloat32, call == 0 ? op0 : dcclSum, c, nullptr);
    if (rc != dcclSuccess) {
      std::printf("rank %d: ok: call %d (%zu floats) failed: %s\n", g_rank, call, n, dcclGetLastError(c));
      failed = true;
      break;
    }
    if (call == 0) {
      std::printf("rank %d: FAILED: call 0 (%zu floats, another %s on other ranks) returned dcclSuccess\n", g_rank,
                  n, mode == Mode::Avg ? "op" : "count");
      bad = 1;
    }
    if (call > 0 || op0 == dcclSum) bad |= check(d, n, call);
  }
  std::fflush(stdout);
  if (failed) dcclCommAbort(c);
  else dcclCommDestroy(c);
  return bad;
}

// Allreduce on one host's shared segment: call 0 of 0 floats on rank 0 (`all`: on
// every rank) and of `count` on the others, then 2 calls of `count` everywhere.
// Rank 0 used to return at once from its call of 0, and its next call paired with
// the others' call 0 (their inputs of call 0 taken for its call 1's, and theirs of
// call 0 returned with its call-1 inputs in them). With `all`, every call must succeed.
int zero(bool all, size_t count) {
  dcclComm_t c = nullptr;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", g_rank, dcclGetLastError(nullptr));
    return 3;
  }
  dcclCommCount(c, &g_n);
  int bad = 0;
  bool failed = false;
  for (int call = 0; call < 3 && !failed; ++call) {
    const size_t n = call == 0 && (all || g_rank == 0) ? 0 : count;
    std::vector<float> s(count), d(count, -1.0f);
    for (size_t i = 0; i < count; ++i) s[i] = input(g_rank, call, i);
    const dcclResult_t rc = dcclAllReduce(s.data(), d.data(), n, dcclFloat32, dcclSum, c, nullptr);
    if (rc != dcclSuccess) {
      std::printf("rank %d: %s: call %d (%zu floats) failed: %s\n", g_rank, all ? "FAILED" : "ok", call, n,
                  dcclGetLastError(c));
      bad |= all ? 1 : 0;
      failed = true;
      break;
    }
    if (call == 0 && !all) {
      std::printf("rank %d: FAILED: call 0 (%zu floats, another count on other ranks) returned dcclSuccess\n",
                  g_rank, n);
      bad = 1;
    }
    if (n == 0 && d[0] != -1.0f) {
      std::printf("rank %d: FAILED: a call of 0 floats wrote its output\n", g_rank);
      bad = 1;
    }
    if (n > 0) bad |= check(d, n, call);
  }
  if (!failed && !bad) std::printf("rank %d: ok: every call right\n", g_rank);
  std::fflush(stdout);
  if (failed) dcclCommAbort(c);
  else dcclCommDestroy(c);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  const char* r = std::getenv("DCCL_RANK");
  g_rank = r ? std::atoi(r) : -1;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "tail") return run(Mode::Tail);
  if (mode == "local") return run(Mode::Local);
  if (mode == "lanes") return run(Mode::Lanes);
  if (mode == "avg") return run(Mode::Avg);
  if (mode == "zero" && argc > 2) return zero(false, std::strtoull(argv[2], nullptr, 10));
  if (mode == "zero-all" && argc > 2) return zero(true, std::strtoull(argv[2], nullptr, 10));
  if (mode == "premul" && argc > 2) return premul(std::strtoull(argv[2], nullptr, 10));
  std::fprintf(stderr, "usage: call_pair_check tail|local|lanes|avg | zero|zero-all|premul COUNT\n");
  return 2;
}
