// sched::Stream: synchronize() waits for a long queue that makes progress, fails one
// that stalls, and reports the first error of its items.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "sched/stream.hpp"

using dccl::sched::Stream;
using namespace std::chrono_literals;

// 40 items of 15 ms: 600 ms of work, each finishing well inside a 200 ms bound
// (before: one bound for the whole queue, a timeout after 200 ms).
TEST(StreamQueue, SynchronizeWaitsForAQueueThatProgresses) {
  Stream s;
  std::atomic<int> ran{0};
  for (int i = 0; i < 40; ++i)
    s.enqueue([&] {
      std::this_thread::sleep_for(15ms);
      ran.fetch_add(1);
    });
  EXPECT_NO_THROW(s.synchronize(200));
  EXPECT_EQ(ran.load(), 40);
}

TEST(StreamQueue, SynchronizeFailsWhenNothingFinishes) {
  Stream s;
  s.enqueue([] { std::this_thread::sleep_for(700ms); });
  s.enqueue([] {});
  const auto t = std::chrono::steady_clock::now();
  try {
    s.synchronize(150);
    FAIL() << "no timeout";
  } catch (const dccl::core::Error& e) {
    EXPECT_EQ(e.code(), dcclTimeout);
    EXPECT_NE(std::string(e.what()).find("no queued call finished"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 still pending"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t, 600ms);
  EXPECT_NO_THROW(s.synchronize(2000));  // then it drains
}

TEST(StreamQueue, SynchronizeReportsTheFirstErrorOnce) {
  Stream s;
  s.enqueue([] { throw dccl::core::Error(dcclRemoteError, "first"); });
  s.enqueue([] { throw dccl::core::Error(dcclTimeout, "second"); });
  try {
    s.synchronize(2000);
    FAIL() << "no error";
  } catch (const dccl::core::Error& e) {
    EXPECT_EQ(e.code(), dcclRemoteError);
    EXPECT_STREQ(e.what(), "first");
  }
  EXPECT_NO_THROW(s.synchronize(2000));
  EXPECT_TRUE(s.query());
}
