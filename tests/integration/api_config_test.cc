// dcclCommInitRankConfig (blocking and non-blocking, per-communicator timeout,
// algorithm and peer-direct settings) and dcclCommFinalize, on 1-4 ranks that are
// threads of this process. Results are checked against references computed here.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"
#include "rank_threads.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// n ranks with one config each (cfgs[r]; empty: NULL config); codes[r] gets each result.
std::vector<dcclComm_t> init_all(int n, std::vector<dcclConfig_t*> cfgs, std::vector<dcclResult_t>* codes,
                                 std::vector<std::string>* errors = nullptr) {
  dcclUniqueId id;
  EXPECT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
  std::vector<dcclComm_t> cs(static_cast<size_t>(n), nullptr);
  codes->assign(static_cast<size_t>(n), dcclInternalError);
  if (errors) errors->assign(static_cast<size_t>(n), "");
  on_ranks(n, [&](int r) {
    const size_t i = static_cast<size_t>(r);
    (*codes)[i] = dcclCommInitRankConfig(&cs[i], n, id, r, cfgs.empty() ? nullptr : cfgs[i]);
    if (errors) (*errors)[i] = last_error();
  });
  return cs;
}

// Float allreduce of rank-dependent data, checked against a float64 reference.
void expect_allreduce(const std::vector<dcclComm_t>& cs, dcclStream_t* streams = nullptr) {
  const int n = static_cast<int>(cs.size());
  const size_t count = 4099;
  on_ranks(n, [&](int r) {
    std::vector<float> in(count), out(count, -1.0f);
    for (size_t i = 0; i < count; ++i) in[i] = 0.5f * static_cast<float>(i % 31) - static_cast<float>(r);
    dcclStream_t s = streams ? streams[r] : nullptr;
    ASSERT_EQ(dcclAllReduce(in.data(), out.data(), count, dcclFloat32, dcclSum, cs[static_cast<size_t>(r)], s),
              dcclSuccess) << last_error();
    if (s) {
      ASSERT_EQ(dcclStreamSynchronize(s), dcclSuccess) << last_error();
    }
    for (size_t i = 0; i < count; ++i) {
      double ref = 0;
      for (int q = 0; q < n; ++q) ref += 0.5 * static_cast<double>(i % 31) - q;
      ASSERT_NEAR(out[i], ref, 1e-4) << "rank " << r << " element " << i;
    }
  });
}

[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new ShmApiEnv("20"));

TEST(ApiConfig, BlockingInitWithDefaultsWorksOn1To4Ranks) {
  for (int n : {1, 2, 4}) {
    dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
    std::vector<dcclResult_t> rc;
    auto cs = init_all(n, std::vector<dcclConfig_t*>(static_cast<size_t>(n), &cfg), &rc);
    for (int r = 0; r < n; ++r) ASSERT_EQ(rc[static_cast<size_t>(r)], dcclSuccess) << "n " << n << " rank " << r;
    expect_allreduce(cs);
    destroy_all(cs);
  }
}

TEST(ApiConfig, BadConfigIsRefusedNamingTheField) {
  dcclUniqueId id;
  ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess);
  struct Case {
    std::function<void(dcclConfig_t&)> set;
    const char* text;
  };
  const std::vector<Case> cases = {
      {[](dcclConfig_t& c) { c.magic = 7; }, "DCCL_CONFIG_INITIALIZER"},
      {[](dcclConfig_t& c) { c.size = 3; }, "DCCL_CONFIG_INITIALIZER"},
      {[](dcclConfig_t& c) { c.blocking = 2; }, "blocking is 2"},
      {[](dcclConfig_t& c) { c.timeoutMs = 0; }, "timeoutMs is 0"},
      {[](dcclConfig_t& c) { c.timeoutMs = -5; }, "timeoutMs is -5"},
      {[](dcclConfig_t& c) { c.peerDirect = 5; }, "peerDirect is 5"},
      {[](dcclConfig_t& c) { c.algo = "bogus"; }, "config: algo: unknown algorithm 'bogus'"},
      {[](dcclConfig_t& c) { c.algo = "allreduce:tree"; }, "not an algorithm for all_reduce"},
  };
  for (const Case& k : cases) {
    dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
    k.set(cfg);
    dcclComm_t c = reinterpret_cast<dcclComm_t>(0x1);
    EXPECT_EQ(dcclCommInitRankConfig(&c, 1, id, 0, &cfg), dcclInvalidArgument) << k.text;
    EXPECT_NE(last_error().find(k.text), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("dcclCommInitRankConfig"), std::string::npos) << last_error();
    EXPECT_EQ(c, nullptr);
  }
  // The refused calls left the id usable: a one-rank communicator still forms.
  dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
  dcclComm_t c = nullptr;
  ASSERT_EQ(dcclCommInitRankConfig(&c, 1, id, 0, &cfg), dcclSuccess) << last_error();
  expect_allreduce({c});
  EXPECT_EQ(dcclCommDestroy(c), dcclSuccess);
}

// A struct from an older application (only size, magic, version) means defaults.
TEST(ApiConfig, SmallerOlderStructTakesDefaults) {
  struct Old {
    size_t size;
    unsigned int magic, version;
  } old{sizeof(Old), DCCL_CONFIG_MAGIC, DCCL_VERSION(0, 1, 0)};
  dcclUniqueId id;
  ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess);
  dcclComm_t c = nullptr;
  ASSERT_EQ(dcclCommInitRankConfig(&c, 1, id, 0, reinterpret_cast<dcclConfig_t*>(&old)), dcclSuccess) << last_error();
  EXPECT_EQ(dcclCommDestroy(c), dcclSuccess);
}

// The config's timeout, not DCCL_TIMEOUT_S (20 s here), bounds a wait, and the
// error says which bound it was.
TEST(ApiConfig, TimeoutMsBoundsEveryWait) {
  dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
  cfg.timeoutMs = 1500;
  std::vector<dcclResult_t> rc;
  auto cs = init_all(2, {&cfg, &cfg}, &rc);
  ASSERT_EQ(rc[0], dcclSuccess);
  ASSERT_EQ(rc[1], dcclSuccess);
  std::vector<float> x(64, 1.0f);
  const auto t0 = Clock::now();
  EXPECT_EQ(dcclAllReduce(x.data(), x.data(), x.size(), dcclFloat32, dcclSum, cs[0], nullptr), dcclTimeout);
  const double took = seconds_since(t0);
  const std::string err = last_error();
  EXPECT_GE(took, 1.4);
  EXPECT_LT(took, 8.0);
  EXPECT_NE(err.find("rank 0"), std::string::npos) << err;
  EXPECT_NE(err.find("1.5 s"), std::string::npos) << err;
  on_ranks(2, [&](int r) { EXPECT_EQ(dcclCommAbort(cs[static_cast<size_t>(r)]), dcclSuccess) << last_error(); });
}

// Non-blocking: init returns dcclInProgress; calls meanwhile return dcclInProgress;
// dcclCommGetAsyncError turns dcclSuccess when every rank has joined.
TEST(ApiConfig, NonBlockingInitIsPolledToReadiness) {
  const int n = 3;
  dcclUniqueId id;
  ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess);
  std::vector<dcclComm_t> cs(n, nullptr);
  std::vector<double> ready_after(n, -1);
  on_ranks(n, [&](int r) {
    if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the others wait for it
    dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    const auto t0 = Clock::now();
    ASSERT_EQ(dcclCommInitRankConfig(&cs[static_cast<size_t>(r)], n, id, r, &cfg), dcclInProgress) << last_error();
    ASSERT_NE(cs[static_cast<size_t>(r)], nullptr);
    EXPECT_LT(seconds_since(t0), 0.3) << "non-blocking init returned late";
    dcclComm_t c = cs[static_cast<size_t>(r)];
    if (r == 0) {  // the last rank has not come yet: init cannot be over
      float v = 1;
      EXPECT_EQ(dcclAllReduce(&v, &v, 1, dcclFloat32, dcclSum, c, nullptr), dcclInProgress);
      EXPECT_NE(last_error().find("in progress"), std::string::npos) << last_error();
      int count = 0;
      EXPECT_EQ(dcclCommCount(c, &count), dcclInProgress);
    }
    dcclResult_t state = dcclInProgress;
    while (state == dcclInProgress && seconds_since(t0) < 15) {
      ASSERT_EQ(dcclCommGetAsyncError(c, &state), dcclSuccess) << last_error();
      if (state == dcclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_EQ(state, dcclSuccess) << last_error();
    ready_after[static_cast<size_t>(r)] = seconds_since(t0);
    int rank = -1;
    ASSERT_EQ(dcclCommUserRank(c, &rank), dcclSuccess);
    EXPECT_EQ(rank, r);
  });
  EXPECT_GE(ready_after[0], 0.3) << "rank 0 was ready before the last rank joined";
  expect_allreduce(cs);
  destroy_all(cs);
}

// A non-blocking init that cannot complete (its peer never comes) ends with the
// error in dcclCommGetAsyncError within its timeout; destroying the handle is clean.
TEST(ApiConfig, NonBlockingInitFailureIsReportedAndDestroyed) {
  dcclUniqueId id;
  ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess);
  dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.timeoutMs = 1000;
  dcclComm_t c = nullptr;
  const auto t0 = Clock::now();
  ASSERT_EQ(dcclCommInitRankConfig(&c, 2, id, 0, &cfg), dcclInProgress) << last_error();
  dcclResult_t state = dcclInProgress;
  while (state == dcclInProgress && seconds_since(t0) < 20) {
    ASSERT_EQ(dcclCommGetAsyncError(c, &state), dcclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(state, dcclInProgress);
  EXPECT_NE(state, dcclSuccess);
  EXPECT_LT(seconds_since(t0), 10.0);
  const std::string err = last_error();
  EXPECT_NE(err.find("rank 0"), std::string::npos) << err;
  float v = 1;
  EXPECT_EQ(dcclAllReduce(&v, &v, 1, dcclFloat32, dcclSum, c, nullptr), dcclInvalidUsage);
  EXPECT_NE(last_error().find("init failed"), std::string::npos) << last_error();
  EXPECT_EQ(dcclCommDestroy(c), dcclSuccess) << last_error();
}

// Destroying a handle whose non-blocking init still runs waits for the init.
TEST(ApiConfig, DestroyDuringNonBlockingInitWaitsForIt) {
  dcclUniqueId id;
  ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess);
  dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.timeoutMs = 800;
  dcclComm_t c = nullptr;
  ASSERT_EQ(dcclCommInitRankConfig(&c, 2, id, 0, &cfg), dcclInProgress);
  const auto t0 = Clock::now();
  EXPECT_EQ(dcclCommDestroy(c), dcclSuccess) << last_error();
  EXPECT_LT(seconds_since(t0), 8.0);
  EXPECT_EQ(dcclCommDestroy(c), dcclInvalidUsage);  // gone
}

// Settings that shape the wire must agree: a per-rank algo differs -> init fails.
TEST(ApiConfig, AlgoIsAppliedAndMustAgree) {
  dcclConfig_t ring = DCCL_CONFIG_INITIALIZER, rhd = DCCL_CONFIG_INITIALIZER;
  ring.algo = "allreduce:ring";
  rhd.algo = "allreduce:rhd";
  std::vector<dcclResult_t> rc;
  std::vector<std::string> errs;
  auto cs = init_all(2, {&ring, &rhd}, &rc, &errs);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rc[static_cast<size_t>(r)], dcclInvalidUsage) << errs[static_cast<size_t>(r)];
    EXPECT_NE(errs[static_cast<size_t>(r)].find("settings differ"), std::string::npos) << errs[static_cast<size_t>(r)];
    EXPECT_NE(errs[static_cast<size_t>(r)].find("allreduce:ring"), std::string::npos) << errs[static_cast<size_t>(r)];
    EXPECT_EQ(cs[static_cast<size_t>(r)], nullptr);
  }
  cs = init_all(2, {&ring, &ring}, &rc);
  ASSERT_EQ(rc[0], dcclSuccess);
  ASSERT_EQ(rc[1], dcclSuccess);
  expect_allreduce(cs);
  destroy_all(cs);
}

// peerDirect per communicator: on sim memory, 0 stages every byte through host
// memory and 1 sends it direct; the counters show which.
TEST(ApiConfig, PeerDirectPerCommunicator) {
  for (int mode : {0, 1}) {
    dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
    cfg.peerDirect = mode;
    std::vector<dcclResult_t> rc;
    auto cs = init_all(2, {&cfg, &cfg}, &rc);
    ASSERT_EQ(rc[0], dcclSuccess);
    ASSERT_EQ(rc[1], dcclSuccess);
    const size_t count = 1 << 18;
    on_ranks(2, [&](int r) {
      void* buf = nullptr;
      ASSERT_EQ(dcclMemAlloc(&buf, count * 4, dcclMemSim), dcclSuccess) << last_error();
      std::vector<float> h(count, static_cast<float>(r + 1));
      ASSERT_EQ(dcclMemcpy(buf, h.data(), count * 4), dcclSuccess);
      ASSERT_EQ(dcclAllReduce(buf, buf, count, dcclFloat32, dcclSum, cs[static_cast<size_t>(r)], nullptr),
                dcclSuccess) << last_error();
      ASSERT_EQ(dcclMemcpy(h.data(), buf, count * 4), dcclSuccess);
      for (size_t i = 0; i < count; i += 997) ASSERT_EQ(h[i], 3.0f);
      dcclStats_t st;
      ASSERT_EQ(dcclCommGetStats(cs[static_cast<size_t>(r)], &st), dcclSuccess);
      if (mode == 0) {
        EXPECT_GT(st.bytesRelayedHost, 0u);
        EXPECT_EQ(st.bytesSentDirect, 0u);
      } else {
        EXPECT_EQ(st.bytesRelayedHost, 0u);
        EXPECT_GT(st.bytesSentDirect, 0u);
      }
      EXPECT_EQ(dcclMemFree(buf), dcclSuccess);
    });
    destroy_all(cs);
  }
}

// Finalize completes queued stream work (not cancelled as by destroy), refuses new
// calls, and leaves a destroy that needs no other rank.
TEST(ApiConfig, FinalizeCompletesQueuedWorkThenRefuses) {
  for (int n : {1, 2, 4}) {
    std::vector<dcclResult_t> rc;
    auto cs = init_all(n, {}, &rc);
    for (int r = 0; r < n; ++r) ASSERT_EQ(rc[static_cast<size_t>(r)], dcclSuccess);
    on_ranks(n, [&](int r) {
      dcclComm_t c = cs[static_cast<size_t>(r)];
      dcclStream_t s = nullptr;
      ASSERT_EQ(dcclStreamCreate(&s), dcclSuccess);
      const size_t count = 1 << 16;
      const int calls = 8;
      std::vector<std::vector<int64_t>> bufs(calls, std::vector<int64_t>(count));
      for (int k = 0; k < calls; ++k)
        for (size_t i = 0; i < count; ++i) bufs[static_cast<size_t>(k)][i] = static_cast<int64_t>(i) * (r + 1) + k;
      for (int k = 0; k < calls; ++k)
        ASSERT_EQ(dcclAllReduce(bufs[static_cast<size_t>(k)].data(), bufs[static_cast<size_t>(k)].data(), count,
                                dcclInt64, dcclSum, c, s), dcclSuccess) << last_error();
      ASSERT_EQ(dcclCommFinalize(c), dcclSuccess) << last_error();  // no synchronize before it
      const int64_t ranks_sum = static_cast<int64_t>(n) * (n + 1) / 2;
      for (int k = 0; k < calls; ++k)
        for (size_t i = 0; i < count; i += 101)
          ASSERT_EQ(bufs[static_cast<size_t>(k)][i], static_cast<int64_t>(i) * ranks_sum + k * n) << "call " << k;
      int64_t v = 1;
      EXPECT_EQ(dcclAllReduce(&v, &v, 1, dcclInt64, dcclSum, c, nullptr), dcclInvalidUsage);
      EXPECT_NE(last_error().find("finalized"), std::string::npos) << last_error();
      EXPECT_EQ(dcclAllReduce(&v, &v, 1, dcclInt64, dcclSum, c, s), dcclInvalidUsage);
      EXPECT_EQ(dcclCommFinalize(c), dcclInvalidUsage);
      int size = 0;
      EXPECT_EQ(dcclCommCount(c, &size), dcclSuccess);
      EXPECT_EQ(size, n);
      EXPECT_EQ(dcclStreamDestroy(s), dcclSuccess);
    });
    // Destroy is local now: rank 0 alone, long before the others, returns at once.
    const auto t0 = Clock::now();
    EXPECT_EQ(dcclCommDestroy(cs[0]), dcclSuccess) << last_error();
    EXPECT_LT(seconds_since(t0), 2.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    on_ranks(n - 1, [&](int r) { EXPECT_EQ(dcclCommDestroy(cs[static_cast<size_t>(r + 1)]), dcclSuccess); });
  }
}

// A split child takes the config's timeout.
TEST(ApiConfig, SplitTakesTheConfig) {
  std::vector<dcclResult_t> rc;
  auto cs = init_all(2, {}, &rc);
  ASSERT_EQ(rc[0], dcclSuccess);
  ASSERT_EQ(rc[1], dcclSuccess);
  std::vector<dcclComm_t> kids(2, nullptr);
  on_ranks(2, [&](int r) {
    dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
    cfg.timeoutMs = 1200;
    ASSERT_EQ(dcclCommSplit(cs[static_cast<size_t>(r)], 0, r, &kids[static_cast<size_t>(r)], &cfg), dcclSuccess)
        << last_error();
  });
  float v = 1;
  const auto t0 = Clock::now();
  EXPECT_EQ(dcclAllReduce(&v, &v, 1, dcclFloat32, dcclSum, kids[0], nullptr), dcclTimeout);
  EXPECT_LT(seconds_since(t0), 8.0);
  EXPECT_NE(last_error().find("1.2 s"), std::string::npos) << last_error();
  on_ranks(2, [&](int r) { EXPECT_EQ(dcclCommAbort(kids[static_cast<size_t>(r)]), dcclSuccess); });
  expect_allreduce(cs);
  destroy_all(cs);
}

}  // namespace

namespace {
// A count that differs between ranks on the one-shot shared segment is an error on
// every rank (before: the slots carried no length, and the ranks reduced garbage).
TEST(ApiConfig, OneShotCountMismatchIsAnErrorOnEveryRank) {
  for (int n : {2, 3}) {
    std::vector<dcclResult_t> rc;
    auto cs = init_all(n, {}, &rc);
    for (int r = 0; r < n; ++r) ASSERT_EQ(rc[static_cast<size_t>(r)], dcclSuccess);
    std::vector<dcclResult_t> got(static_cast<size_t>(n), dcclSuccess);
    std::vector<std::string> why(static_cast<size_t>(n));
    on_ranks(n, [&](int r) {
      std::vector<float> x(64, 1.0f);
      const size_t count = r == 0 ? 16 : 20;
      got[static_cast<size_t>(r)] =
          dcclAllReduce(x.data(), x.data(), count, dcclFloat32, dcclSum, cs[static_cast<size_t>(r)], nullptr);
      why[static_cast<size_t>(r)] = last_error();
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_NE(got[static_cast<size_t>(r)], dcclSuccess) << "rank " << r;
      EXPECT_TRUE(why[static_cast<size_t>(r)].find("count differs") != std::string::npos ||
                  why[static_cast<size_t>(r)].find("stopped") != std::string::npos)
          << why[static_cast<size_t>(r)];
    }
    EXPECT_EQ(got[0], dcclInvalidUsage) << why[0];
    EXPECT_NE(why[0].find("rank 0"), std::string::npos) << why[0];
    on_ranks(n, [&](int r) { EXPECT_EQ(dcclCommAbort(cs[static_cast<size_t>(r)]), dcclSuccess); });
  }
}
}  // namespace
