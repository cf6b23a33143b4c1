// dcclCommSplit under dccl-run: colors and keys (ties by rank), DCCL_SPLIT_NOCOLOR,
// nested splits, a child that outlives its parent, the C++ form, bad arguments.
// Every result is checked against what the ranks' own arithmetic predicts.
//   split_check [--hosts H]   (H: give blocks of ranks DCCL_HOST_ID h0, h1, ...)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dccl/dccl.h"
#include "dccl/dccl.hpp"

namespace {

int g_rank = 0, g_n = 1, g_checks = 0, g_wrong = 0;

void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_wrong;
    fprintf(stderr, "rank %d: WRONG: %s\n", g_rank, what.c_str());
  }
}

bool call(dcclResult_t rc, const char* what) {
  if (rc == dcclSuccess) return true;
  ++g_wrong;
  fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, what, dcclGetErrorString(rc), dcclGetLastError(nullptr));
  return false;
}

// The world ranks of `comm`'s members, by their rank there (allgather of world ranks).
std::vector<int64_t> members(dcclComm_t comm) {
  int n = 0;
  if (!call(dcclCommCount(comm, &n), "dcclCommCount")) return {};
  std::vector<int64_t> all(static_cast<size_t>(n), -1);
  int64_t me = g_rank;
  call(dcclAllGather(&me, all.data(), 1, dcclInt64, comm, nullptr), "dcclAllGather");
  return all;
}

// Splits `comm` by (color, key) and checks the result against `want`: the world
// ranks expected in the new communicator, in rank order (empty: no communicator).
dcclComm_t split_and_check(dcclComm_t comm, int color, int key, const std::vector<int64_t>& want,
                           const std::string& label) {
  dcclComm_t child = reinterpret_cast<dcclComm_t>(&g_checks);  // must be overwritten
  if (!call(dcclCommSplit(comm, color, key, &child, nullptr), label.c_str())) return nullptr;
  if (want.empty()) {
    expect(child == nullptr, label + ": NOCOLOR rank got a communicator");
    return nullptr;
  }
  if (!child) {
    expect(false, label + ": no communicator");
    return nullptr;
  }
  std::vector<int64_t> got = members(child);
  expect(got == want, label + ": members differ");
  int r = -1;
  call(dcclCommUserRank(child, &r), "dcclCommUserRank");
  expect(r >= 0 && r < static_cast<int>(want.size()) && want[static_cast<size_t>(r)] == g_rank,
         label + ": wrong rank " + std::to_string(r));
  // A sum over the members, in float64 and exact in int64.
  int64_t one = g_rank + 1, sum = 0, ref = 0;
  for (int64_t w : want) ref += w + 1;
  call(dcclAllReduce(&one, &sum, 1, dcclInt64, dcclSum, child, nullptr), "dcclAllReduce");
  expect(sum == ref, label + ": allreduce " + std::to_string(sum) + " != " + std::to_string(ref));
  return child;
}

}  // namespace

int main(int argc, char** argv) {
  int hosts = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--hosts") && i + 1 < argc) hosts = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: split_check [--hosts H]\n");
      return 2;
    }
  }
  if (hosts > 0) {
    const char* r = getenv("DCCL_RANK");
    const char* n = getenv("DCCL_WORLD_SIZE");
    if (!r || !n) return 2;
    const int per = (atoi(n) + hosts - 1) / hosts;
    char id[32];
    snprintf(id, sizeof id, "h%d", atoi(r) / per);
    setenv("DCCL_HOST_ID", id, 1);
  }
  dcclComm_t world;
  if (!call(dcclCommInitFromEnv(&world), "dcclCommInitFromEnv")) return 1;
  dcclCommUserRank(world, &g_rank);
  dcclCommCount(world, &g_n);

  // Parity classes, reversed by key.
  std::vector<int64_t> parity;
  for (int r = g_n - 1; r >= 0; --r)
    if (r % 2 == g_rank % 2) parity.push_back(r);
  dcclComm_t odd_even = split_and_check(world, g_rank % 2, -g_rank, parity, "parity split");

  // Rank 0 stays out; equal keys: ordered by world rank.
  std::vector<int64_t> rest;
  if (g_rank != 0)
    for (int r = 1; r < g_n; ++r) rest.push_back(r);
  dcclComm_t no0 = split_and_check(world, g_rank == 0 ? DCCL_SPLIT_NOCOLOR : 7, 0, rest, "nocolor split");

  // Nested: split the parity communicator again, everyone one color, same order.
  dcclComm_t nested = odd_even ? split_and_check(odd_even, 0, 0, parity, "nested split") : nullptr;

  // Bad arguments fail on every rank at once (nothing collective happens).
  dcclComm_t dummy = nullptr;
  expect(dcclCommSplit(world, -5, 0, &dummy, nullptr) == dcclInvalidArgument, "color -5 accepted");
  expect(dcclCommSplit(world, 0, 0, nullptr, nullptr) == dcclInvalidArgument, "NULL newcomm accepted");
  dcclConfig_t bad = DCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  expect(dcclCommSplit(world, 0, 0, &dummy, &bad) == dcclInvalidArgument, "uninitialised config accepted");

  // The C++ form, with a config-free call, and a communicator of all ranks.
  {
    dccl::Communicator w(world);  // borrows: released below, not destroyed
    std::vector<int64_t> all;
    for (int r = 0; r < g_n; ++r) all.push_back(g_n - 1 - r);
    dccl::Communicator rev = w.split(0, g_n - g_rank);
    expect(static_cast<bool>(rev) && rev.rank() == g_n - 1 - g_rank && rev.size() == g_n, "C++ split rank/size");
    expect(members(rev.get()) == all, "C++ split members");
    dccl::Communicator none = w.split(DCCL_SPLIT_NOCOLOR, 0);
    expect(!none, "C++ NOCOLOR split is not empty");
    (void)w.release();
  }

  // Children outlive their parent.
  call(dcclCommDestroy(world), "dcclCommDestroy(world)");
  if (odd_even) {
    int64_t one = 1, sum = 0;
    call(dcclAllReduce(&one, &sum, 1, dcclInt64, dcclSum, odd_even, nullptr), "allreduce after parent destroyed");
    expect(sum == static_cast<int64_t>(parity.size()), "allreduce after the parent was destroyed");
  }
  for (dcclComm_t c : {nested, no0, odd_even})
    if (c) call(dcclCommDestroy(c), "dcclCommDestroy(child)");
  printf("split_check: rank %d of %d, %d checks, %d wrong\n", g_rank, g_n, g_checks, g_wrong);
  return g_wrong ? 1 : 0;
}
