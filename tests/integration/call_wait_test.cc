// A call's wait (coll/call_context.cc wait_any) over the socket path, ranks as
// threads: a receive whose message already sits in the socket completes through
// the wait's own progress, with no idle step (yield or nap) after it. Without a
// spin budget (DCCL_SPIN_US=0, as for ranks that share a CPU or on busy CPUs)
// such a step was a whole nap, up to 1 ms, per message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/backoff.hpp"
#include "dccl/dccl.h"
#include "rank_threads.hpp"

namespace {

void wait_until(const std::atomic<int>& a, int v) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (a.load() < v) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the other rank did not get to round " << v;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

TEST(CallWait, ReceiveOfAMessageThatArrivedTakesNoIdleStep) {
  setenv("DCCL_PROVIDER", "tcp", 1);  // the socket path
  setenv("DCCL_SPIN_US", "0", 1);
  setenv("DCCL_TIMEOUT_S", "20", 1);
  dcclUniqueId id;
  ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
  std::vector<dcclComm_t> cs(2, nullptr);
  on_ranks(2, [&](int r) { EXPECT_EQ(dcclCommInitRank(&cs[r], 2, id, r), dcclSuccess) << last_error(); });
  ASSERT_TRUE(cs[0] && cs[1]);
  const int rounds = 20;
  std::atomic<int> sent{-1}, received{-1};
  on_ranks(2, [&](int r) {
    for (int k = 0; k < rounds; ++k) {
      uint64_t v = 1000 + static_cast<uint64_t>(k);
      if (r == 0) {
        EXPECT_EQ(dcclSend(&v, 1, dcclUint64, 1, cs[0], nullptr), dcclSuccess) << last_error(cs[0]);
        sent.store(k);
        wait_until(received, k);
        continue;
      }
      wait_until(sent, k);
      usleep(2000);  // loopback has long delivered it
      v = 0;
      const uint64_t before = dccl::core::Backoff::idle_steps();
      EXPECT_EQ(dcclRecv(&v, 1, dcclUint64, 0, cs[1], nullptr), dcclSuccess) << last_error(cs[1]);
      EXPECT_EQ(v, 1000 + static_cast<uint64_t>(k));
      EXPECT_EQ(dccl::core::Backoff::idle_steps(), before) << "round " << k;
      received.store(k);
    }
  });
  destroy_all(cs);
  unsetenv("DCCL_PROVIDER");
  unsetenv("DCCL_SPIN_US");
}

}  // namespace
