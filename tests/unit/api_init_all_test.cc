// dcclCommInitAll: ranks made by one call of this process, each working from its
// own thread, destroyed in turn from one thread; bad input refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "dccl/dccl.h"
#include "rank_threads.hpp"

[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new ShmApiEnv("10"));

namespace {
// dcclCommInitAll: n ranks of this process in one call; each works from its own
// thread, results checked against sums computed here; bad input refused.
TEST(ApiInitAll, MakesWorkingRanksAndRefusesBadInput) {
  for (int n : {1, 2, 4}) {
    std::vector<dcclComm_t> cs(static_cast<size_t>(n), nullptr);
    const std::vector<int> devs = {0, 1, 2, 3};
    ASSERT_EQ(dcclCommInitAll(cs.data(), n, n == 2 ? devs.data() : nullptr), dcclSuccess) << last_error();
    for (int r = 0; r < n; ++r) {
      int rank = -1, size = -1;
      ASSERT_EQ(dcclCommUserRank(cs[static_cast<size_t>(r)], &rank), dcclSuccess);
      ASSERT_EQ(dcclCommCount(cs[static_cast<size_t>(r)], &size), dcclSuccess);
      EXPECT_EQ(rank, r);
      EXPECT_EQ(size, n);
    }
    expect_allreduce_works(cs);
    on_ranks(n, [&](int r) { EXPECT_EQ(dcclCommDestroy(cs[static_cast<size_t>(r)]), dcclSuccess) << last_error(); });
  }
  dcclComm_t c[2] = {reinterpret_cast<dcclComm_t>(0x1), reinterpret_cast<dcclComm_t>(0x1)};
  expect_code(dcclCommInitAll(nullptr, 2, nullptr), dcclInvalidArgument, "comms is NULL", "NULL comms");
  expect_code(dcclCommInitAll(c, 0, nullptr), dcclInvalidArgument, "ndev 0", "ndev 0");
  expect_code(dcclCommInitAll(c, -3, nullptr), dcclInvalidArgument, "ndev -3", "ndev -3");
  const int bad[2] = {0, -1};
  expect_code(dcclCommInitAll(c, 2, bad), dcclInvalidArgument, "devlist[1]", "negative device");
}

// One thread destroys the ranks of a dcclCommInitAll in turn (as NCCL programs do):
// no destroy waits for a rank not yet reached (before: each waited DCCL_TIMEOUT_S
// for the others at the store). An abort among them frees the rest too.
TEST(ApiInitAll, OneThreadDestroysTheRanksInTurn) {
  setenv("DCCL_TIMEOUT_S", "20", 1);
  for (bool abort_one : {false, true}) {
    std::vector<dcclComm_t> cs(3, nullptr);
    ASSERT_EQ(dcclCommInitAll(cs.data(), 3, nullptr), dcclSuccess) << last_error();
    expect_allreduce_works(cs, true);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t r = 0; r < cs.size(); ++r) {
      if (abort_one && r == 1) EXPECT_EQ(dcclCommAbort(cs[r]), dcclSuccess) << last_error();
      else EXPECT_EQ(dcclCommDestroy(cs[r]), dcclSuccess) << last_error();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0) << "destroying 3 ranks from one thread took " << s << " s (abort one: " << abort_one << ")";
    expect_code(dcclCommDestroy(cs[0]), dcclInvalidUsage, "not a live communicator", "destroyed twice");
  }
  unsetenv("DCCL_TIMEOUT_S");
}
}  // namespace
