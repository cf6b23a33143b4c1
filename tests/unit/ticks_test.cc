// The recorder's clock (core/ticks.hpp): a tick taken now converts to within a
// couple of milliseconds of CLOCK_REALTIME (read around it), a later one to a
// time at least the nap between them later, and 0 stays "not yet".
#include <gtest/gtest.h>
#include <time.h>

#include <string>

#include "core/ticks.hpp"

namespace ticks = dccl::core::ticks;

namespace {
int64_t realtime() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

TEST(Ticks, ConvertToTheRealtimeClock) {
  ticks::init();
  const std::string src = ticks::source();
  EXPECT_TRUE(src == "tsc" || src == "cntvct" || src == "clock_gettime") << src;
  // Each tick bracketed by clock reads: a preemption anywhere widens a bracket, never
  // the conversion's error, which is all the bounds below allow for (2 ms).
  const int64_t b0 = realtime();
  const uint64_t t0 = ticks::now();
  const int64_t a0 = realtime();
  timespec nap{0, 20 * 1000 * 1000};
  nanosleep(&nap, nullptr);
  const int64_t b1 = realtime();
  const uint64_t t1 = ticks::now();
  const int64_t a1 = realtime();
  const ticks::Scale sc = ticks::scale();
  const int64_t n0 = sc.to_ns(t0), n1 = sc.to_ns(t1);
  constexpr int64_t kTol = 2000000;
  EXPECT_GT(t1, t0);
  EXPECT_GE(n0, b0 - kTol) << "source " << src;
  EXPECT_LE(n0, a0 + kTol) << "source " << src;
  EXPECT_GE(n1, b1 - kTol) << "source " << src;
  EXPECT_LE(n1, a1 + kTol) << "source " << src;
  EXPECT_GE(n1 - n0, 20000000 - kTol);  // the nap, at least
  EXPECT_EQ(sc.to_ns(0), 0);
  EXPECT_EQ(ticks::to_ns(0), 0);
}
