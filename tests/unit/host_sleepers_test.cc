// The busy mark's count of the job's runnable ranks (core/contention.hpp,
// core/host_sleepers.hpp): the texts it reads from /proc, the inequality, and the
// board of sleepers with real threads and a second process, whose state the kernel
// reports.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "core/contention.hpp"
#include "core/host_sleepers.hpp"

namespace dccl::core {
namespace {

using std::chrono::milliseconds;

TEST(HostSleepers, StateFollowsTheLastParenthesis) {
  const char plain[] = "1234 (dccl_rank) S 1 1234 1234 0 -1";
  EXPECT_EQ(HostSleepers::parse_state(plain, sizeof(plain) - 1), 'S');
  const char odd[] = "77 (a) R (b) D 1 77";  // a thread named "a) R (b"
  EXPECT_EQ(HostSleepers::parse_state(odd, sizeof(odd) - 1), 'D');
  const char cut[] = "77 (name)";
  EXPECT_EQ(HostSleepers::parse_state(cut, sizeof(cut) - 1), 0);
  const char none[] = "no parenthesis here";
  EXPECT_EQ(HostSleepers::parse_state(none, sizeof(none) - 1), 0);
}

TEST(Contention, RunnableTasksFromLoadavg) {
  const char text[] = "8.09 3.39 2.12 11/166 22844\n";
  EXPECT_EQ(Contention::parse_nr_running(text, sizeof(text) - 1), 11);
  const char cut[] = "8.09 3.39 2.12 11";
  EXPECT_EQ(Contention::parse_nr_running(cut, sizeof(cut) - 1), -1);
  const char few[] = "8.09 3.39\n";
  EXPECT_EQ(Contention::parse_nr_running(few, sizeof(few) - 1), -1);
  EXPECT_GE(Contention::nr_running(), 1);  // this host's own file: at least this thread runs
}

TEST(Contention, OtherWorkIsRunnableTasksBeyondTheJobsAwakeRanks) {
  // 4 ranks over TCP on 2 quiet cores: 3 awake (the reader and the 2 on the cores), 1 asleep.
  EXPECT_FALSE(Contention::others_runnable(3, 4, 1));
  EXPECT_FALSE(Contention::others_runnable(4, 4, 0));  // all 4 runnable, nothing else
  // 4 ranks on the shared segment beside 2 spinners: 2 asleep on the futex, 2 awake.
  EXPECT_TRUE(Contention::others_runnable(4, 4, 2));
  EXPECT_TRUE(Contention::others_runnable(5, 4, 0));
  // The reader runs: at least one of the job's tasks is runnable, whatever the board says.
  EXPECT_FALSE(Contention::others_runnable(1, 4, 4));
  EXPECT_TRUE(Contention::others_runnable(2, 4, 7));
  EXPECT_TRUE(Contention::others_runnable(2, 1, 0));   // one rank: anything else is other work
  EXPECT_TRUE(Contention::others_runnable(-1, 4, 0));  // unknown: as before the check
}

// Polls cond() for up to 10 s (a loaded machine may take long to schedule a thread).
template <class F>
bool eventually(F cond) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

int taken(const HostSleepers::Page& page) {
  int n = 0;
  for (const auto& t : page.tid) n += t.load() != 0 ? 1 : 0;
  return n;
}

TEST(HostSleepers, CountsThreadsTheKernelHasAsleepNotTheOnesThatRun) {
  HostSleepers::Page page{};
  HostSleepers::use(&page, 4);
  EXPECT_EQ(HostSleepers::local_ranks(), 4);
  std::atomic<bool> stop{false};
  std::thread sleeper([&] {
    const HostSleepers::Asleep asleep;
    while (!stop.load()) std::this_thread::sleep_for(milliseconds(5));
  });
  // Took its slot but still runs: a rank woken from its sleep that has not cleared it.
  std::thread woken([&] {
    const HostSleepers::Asleep asleep;
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  EXPECT_TRUE(eventually([&] { return taken(page) == 2; }));  // (the threads are joined below either way)
  bool between = false;
  // The sleeper spends almost all its time in the kernel: seen asleep before and after.
  EXPECT_TRUE(eventually([&] { return HostSleepers::asleep_around([&] { between = true; }) == 1; }));
  EXPECT_TRUE(between);
  stop = true;
  sleeper.join();
  woken.join();
  EXPECT_EQ(taken(page), 0);  // both cleared their slots
  EXPECT_EQ(HostSleepers::asleep_around([] {}), 0);
  HostSleepers::use(nullptr, 1);
  EXPECT_EQ(HostSleepers::local_ranks(), 1);
}

TEST(HostSleepers, AFullBoardLeavesTheRestRunnable) {
  HostSleepers::Page page{};
  for (auto& t : page.tid) t.store(1);  // every slot taken
  HostSleepers::use(&page, 2);
  {
    const HostSleepers::Asleep asleep;  // finds no slot, changes nothing
    for (const auto& t : page.tid) EXPECT_EQ(t.load(), 1);
  }
  HostSleepers::use(nullptr, 1);
}

TEST(HostSleepers, TheBoardIsSharedByTheJobsProcessesOnTheHost) {
  HostSleepers::use(nullptr, 1);
  const std::string name = HostSleepers::board_name("job-" + std::to_string(getpid()), "host");
  EXPECT_FALSE(HostSleepers::join(name, 1));  // one rank here: no board
  ASSERT_TRUE(HostSleepers::join(name, 2));
  EXPECT_EQ(HostSleepers::local_ranks(), 2);
  EXPECT_FALSE(HostSleepers::join(name, 2));  // as wide as the present one
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A rank of the job in another process: maps the board by name and sleeps.
    HostSleepers::use(nullptr, 1);
    const bool joined = HostSleepers::join(name, 2);
    const char c = joined ? '1' : '0';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    if (!joined) _exit(1);
    const HostSleepers::Asleep asleep;
    char go = 0;
    _exit(read(done[0], &go, 1) == 1 ? 0 : 3);  // asleep in read() until the parent has counted
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(c, '1');
  HostSleepers::unlink(name);  // both mapped it
  EXPECT_TRUE(eventually([] { return HostSleepers::asleep_around([] {}) == 1; }));
  ASSERT_EQ(write(done[1], "x", 1), 1);
  close(done[0]);
  close(done[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(HostSleepers::asleep_around([] {}), 0);  // it cleared its slot
  HostSleepers::use(nullptr, 1);
}

}  // namespace
}  // namespace dccl::core
