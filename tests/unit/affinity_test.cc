// A one-CPU binding left for large calls while the host is busy (core/affinity.hpp):
// the CPU lists it reads, and real threads whose affinity the kernel reports.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "core/affinity.hpp"
#include "core/contention.hpp"

namespace dccl::core {
namespace {

std::vector<int> cpus_of(const cpu_set_t& s) {
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) out.push_back(c);
  return out;
}

std::vector<int> my_cpus() {
  cpu_set_t s;
  EXPECT_EQ(sched_getaffinity(0, sizeof(s), &s), 0);
  return cpus_of(s);
}

TEST(Affinity, ParsesKernelCpuLists) {
  cpu_set_t s;
  ASSERT_TRUE(Affinity::parse_cpu_list("0-3,8,10-11\n", &s));
  EXPECT_EQ(cpus_of(s), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  ASSERT_TRUE(Affinity::parse_cpu_list("5", &s));
  EXPECT_EQ(cpus_of(s), std::vector<int>{5});
  EXPECT_FALSE(Affinity::parse_cpu_list("", &s));
  EXPECT_FALSE(Affinity::parse_cpu_list("a-b", &s));
  EXPECT_FALSE(Affinity::parse_cpu_list("3-1", &s));
  EXPECT_FALSE(Affinity::parse_cpu_list("2x", &s));
  EXPECT_FALSE(Affinity::parse_cpu_list("0-99999", &s));
  ASSERT_TRUE(Affinity::parse_cpu_list("0-3,8,10-11", &s));
  EXPECT_EQ(Affinity::cpu_list_text(s), "0-3,8,10-11");
  CPU_ZERO(&s);
  EXPECT_EQ(Affinity::cpu_list_text(s), "");
}

TEST(Affinity, WideSetIsTheAllowedCpusOfTheNode) {
  EXPECT_EQ(cpus_of(Affinity::wide_set(2, "0-7", "0-3")), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cpus_of(Affinity::wide_set(5, "0-7", "4-7")), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(cpus_of(Affinity::wide_set(2, "0-7", "")), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(cpus_of(Affinity::wide_set(2, "0,2", "0-3")), (std::vector<int>{0, 2}));
  // Unreadable lists leave the thread where it is.
  EXPECT_EQ(cpus_of(Affinity::wide_set(3, "garbage", "")), std::vector<int>{3});
}

// Runs f on a new thread bound to the first CPU this process may use (affinity and
// the module's state are per thread). Needs two CPUs to widen to.
template <class F>
void on_bound_thread(F f) {
  const std::vector<int> all = my_cpus();
  ASSERT_GE(all.size(), 2u) << "this test needs a process allowed on two CPUs";
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(all[0], &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    f(all);
  });
  t.join();
}

TEST(Affinity, LargeCallsLeaveTheCpuOnlyWhileBusy) {
  on_bound_thread([](const std::vector<int>& all) {
    Contention::reset();
    Affinity::before_call(1 << 20, 64 << 10);  // quiet: stays bound
    EXPECT_FALSE(Affinity::widened());
    EXPECT_EQ(my_cpus(), std::vector<int>{all[0]});

    Contention::mark(Contention::Clock::now());
    Affinity::before_call(1 << 20, 64 << 10);  // busy and large: every CPU it may use
    EXPECT_TRUE(Affinity::widened());
    const std::vector<int> wide = my_cpus();
    EXPECT_GE(wide.size(), 2u);
    for (int c : wide) EXPECT_NE(std::find(all.begin(), all.end(), c), all.end()) << "CPU " << c;

    Affinity::before_call(8, 64 << 10);  // busy but small: back on its CPU
    EXPECT_FALSE(Affinity::widened());
    EXPECT_EQ(my_cpus(), std::vector<int>{all[0]});

    Affinity::before_call(64 << 10, 64 << 10);  // the threshold itself counts as large
    EXPECT_TRUE(Affinity::widened());
    Contention::reset();
    Affinity::before_call(1 << 20, 64 << 10);  // quiet again: back on its CPU
    EXPECT_FALSE(Affinity::widened());
    EXPECT_EQ(my_cpus(), std::vector<int>{all[0]});
  });
}

TEST(Affinity, AMarkInsideALargeCallWidensAtOnce) {
  on_bound_thread([](const std::vector<int>& all) {
    Contention::reset();
    Affinity::before_call(4 << 20, 64 << 10);
    EXPECT_FALSE(Affinity::widened());
    Contention::marked_in_wait(Contention::Clock::now());  // what a long yield in its wait does
    EXPECT_TRUE(Affinity::widened());
    EXPECT_GE(my_cpus().size(), 2u);
    Affinity::before_call(100, 64 << 10);
    EXPECT_EQ(my_cpus(), std::vector<int>{all[0]});
    Contention::marked_in_wait(Contention::Clock::now());  // small call: stays
    EXPECT_FALSE(Affinity::widened());
    Contention::reset();
  });
}

TEST(Affinity, ZeroThresholdAndUnboundThreadsAreLeftAlone) {
  on_bound_thread([](const std::vector<int>& all) {
    Contention::mark(Contention::Clock::now());
    Affinity::before_call(64 << 20, 0);  // DCCL_BUSY_WIDEN_BYTES=0
    EXPECT_FALSE(Affinity::widened());
    EXPECT_EQ(my_cpus(), std::vector<int>{all[0]});
    Contention::reset();
  });
  const std::vector<int> before = my_cpus();
  std::thread t([&] {  // inherits the process's CPUs: not the launcher's one-CPU binding
    Contention::mark(Contention::Clock::now());
    Affinity::before_call(64 << 20, 64 << 10);
    EXPECT_FALSE(Affinity::widened());
    EXPECT_EQ(my_cpus(), before);
    Contention::reset();
  });
  t.join();
}

}  // namespace
}  // namespace dccl::core
