// Waits: core::Backoff's phases (spin, yield, naps) on a quiet and on a busy
// machine (core::Contention), the busy spin that follows recent waits, the naps' growth, and the shared segment's futex
// (a sleeper is woken by a raised flag long before its nap ends), the seats
// (each rank's last CPU) and the segment waits' spin budget from them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coll/segment_wait.hpp"
#include "core/backoff.hpp"
#include "core/contention.hpp"
#include "core/host_sleepers.hpp"
#include "net/shared_segment.hpp"

namespace dccl::core {
namespace {

using Clock = Backoff::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

struct Naps {
  std::vector<int64_t> ns;
  auto fn() {
    return [this](int64_t n) { ns.push_back(n); };
  }
};

TEST(Backoff, QuietSpinsThenYieldsThenNaps) {
  Contention::reset();
  const auto t0 = Clock::now();
  Backoff b(50, t0);
  Naps naps;
  EXPECT_FALSE(b.idle(t0 + microseconds(10), false, naps.fn()));  // in the spin budget
  EXPECT_TRUE(b.idle(t0 + microseconds(100), false, naps.fn()));  // a yield
  EXPECT_TRUE(naps.ns.empty());
  for (int i = 0; i < 8; ++i) b.idle(t0 + microseconds(600), false, naps.fn());
  ASSERT_EQ(naps.ns.size(), 8u);
  EXPECT_EQ(naps.ns[0], 1000);
  EXPECT_EQ(naps.ns[1], 2000);
  EXPECT_EQ(naps.ns.back(), Backoff::kMaxNapNs);  // capped early in a wait
  // Seconds into a wait the naps grow to 1 ms (a 64th of the time waited, capped).
  for (int i = 0; i < 8; ++i) b.idle(t0 + std::chrono::seconds(2), false, naps.fn());
  EXPECT_EQ(naps.ns.back(), Backoff::kMaxWakeNapNs);
}

TEST(Backoff, NapsThatWakeAreLong) {
  Contention::reset();
  const auto t0 = Clock::now();
  Backoff b(0, t0);
  Naps naps;
  b.idle(t0 + milliseconds(1), true, naps.fn());
  ASSERT_EQ(naps.ns.size(), 1u);
  EXPECT_EQ(naps.ns[0], Backoff::kMaxWakeNapNs);
}

TEST(Backoff, BusyMachineSleepsAfterTheSpin) {
  const auto t0 = Clock::now();
  Contention::mark(t0);
  Backoff b(50, t0);
  Naps naps;
  EXPECT_FALSE(b.idle(t0 + microseconds(1), true, naps.fn()));  // spins
  EXPECT_TRUE(b.idle(t0 + microseconds(60), true, naps.fn()));  // then sleeps: no yield
  EXPECT_EQ(naps.ns.size(), 1u);
  Contention::reset();
}

TEST(Backoff, BusyMachineSpinsOnWhileRecentWaitsWereShort) {
  const auto t0 = Clock::now();
  Contention::mark(t0);
  Backoff::reset_waits();
  for (int i = 0; i < 20; ++i) Backoff::note_wait(microseconds(400));  // the average nears 400 us
  EXPECT_GT(Backoff::recent_wait(), microseconds(390));
  {
    Backoff b(50, t0);
    Naps naps;
    EXPECT_FALSE(b.idle(t0 + microseconds(60), true, naps.fn()));   // past the 50 us: spins on
    EXPECT_FALSE(b.idle(t0 + microseconds(700), true, naps.fn()));  // up to twice the average
    EXPECT_TRUE(b.idle(t0 + microseconds(900), true, naps.fn()));   // then sleeps
    EXPECT_EQ(naps.ns.size(), 1u);
  }  // this wait (900 us) joins the average
  EXPECT_GT(Backoff::recent_wait(), microseconds(500));
  for (int i = 0; i < 12; ++i) Backoff::note_wait(milliseconds(40));  // long waits: a late peer
  {
    Backoff b(50, t0);
    Naps naps;
    EXPECT_TRUE(b.idle(t0 + microseconds(60), true, naps.fn()));  // sleeps after its own spin
    EXPECT_EQ(naps.ns.size(), 1u);
  }
  for (int i = 0; i < 40; ++i) Backoff::note_wait(milliseconds(1));
  {
    Backoff b(50, t0);  // however short the waits were, at most kMaxBusySpin
    Naps naps;
    EXPECT_FALSE(b.idle(t0 + microseconds(1900), true, naps.fn()));
    EXPECT_TRUE(b.idle(t0 + microseconds(2100), true, naps.fn()));
  }
  {
    Backoff none(0, t0);  // no spin budget: never spins
    Naps naps;
    EXPECT_TRUE(none.idle(t0, true, naps.fn()));
  }
  Contention::reset();
  {
    Backoff quiet(50, t0);  // a quiet machine keeps its configured spin, then yields
    Naps naps;
    EXPECT_TRUE(quiet.idle(t0 + microseconds(60), true, naps.fn()));
    EXPECT_TRUE(naps.ns.empty());
  }
  Backoff::reset_waits();
}

TEST(Backoff, BusyMachineSleepsWithoutASpinBudget) {
  // Ranks outnumber cores (no spin): a busy machine still skips the yields.
  const auto t0 = Clock::now();
  Contention::mark(t0);
  Backoff b(0, t0);
  Naps naps;
  EXPECT_TRUE(b.idle(t0, false, naps.fn()));
  EXPECT_EQ(naps.ns.size(), 1u);
  Contention::reset();
  Backoff quiet(0, t0);
  Naps none;
  EXPECT_TRUE(quiet.idle(t0, false, none.fn()));  // a quiet machine yields first
  EXPECT_TRUE(none.ns.empty());
}

TEST(Contention, LongYieldsMarkTheMachineBusyForAWhile) {
  Contention::reset();
  HostSleepers::use(nullptr, 1);  // one rank on this host: any other runnable task is other work
  const auto t0 = Clock::now();
  Contention::yielded(t0, t0 + microseconds(20));  // a peer rank handed the core back
  EXPECT_FALSE(Contention::busy(t0 + microseconds(30)));
  // A long yield while another thread spins: at least 2 tasks runnable (that one and
  // this reader) where the job has 1 rank.
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  const auto t1 = Clock::now();
  Contention::yielded(t1, t1 + milliseconds(4));
  stop = true;
  spinner.join();
  EXPECT_TRUE(Contention::busy(t1 + milliseconds(5)));
  EXPECT_FALSE(Contention::busy(t1 + milliseconds(4) + Contention::kHold + milliseconds(1)));
  Contention::reset();
}

}  // namespace
}  // namespace dccl::core

namespace dccl::net {
namespace {

TEST(SharedSegmentSleep, RaisedFlagWakesASleeper) {
  std::string name;
  SharedSegment seg(0, 1, 64, 0, [&](const std::string& n) { name = n; }, [&] { return name; }, [] {});
  std::atomic<uint64_t>& flag = seg.seq(0, 0);
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flag.store(1, std::memory_order_release);
    seg.wake();
  });
  const auto t0 = std::chrono::steady_clock::now();
  // One nap of up to 20 s: ends when the flag is raised (a lost wake-up would take it all).
  while (flag.load(std::memory_order_acquire) == 0)
    seg.sleep(20'000'000'000, [&] { return flag.load(std::memory_order_acquire) != 0; });
  const auto waited = std::chrono::steady_clock::now() - t0;
  raiser.join();
  EXPECT_LT(waited, std::chrono::seconds(10));
  // Nobody sleeps now: wake() costs a load.
  seg.wake();
}

TEST(SharedSegmentSeat, EachRankHasItsOwnCpuWordApartFromFlagsAndSlots) {
  std::string name;
  // Rank 0 of 3 (the others never map it here): the seats of all 3 are zeroed pages.
  SharedSegment seg(0, 3, 64, 128, [&](const std::string& n) { name = n; }, [&] { return name; }, [] {});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(seg.cpu_of(r), -1) << "rank " << r;
  seg.set_cpu(0);
  EXPECT_EQ(seg.cpu_of(0), 0);
  seg.set_cpu(5);
  EXPECT_EQ(seg.cpu_of(0), 5);
  EXPECT_EQ(seg.cpu_of(1), -1);
  EXPECT_EQ(seg.cpu_of(2), -1);
  // No flag, one-shot word or slot byte of any rank moved.
  for (int r = 0; r < 3; ++r) {
    for (int id = 0; id < SharedSegment::kFlags; ++id) EXPECT_EQ(seg.flag(r, id).v.load(), 0u);
    for (int p = 0; p < 2; ++p) {
      EXPECT_EQ(seg.seq(r, p).load(), 0u);
      for (size_t b = 0; b < 128; ++b) ASSERT_EQ(seg.chunk_slot(r, p)[b], 0) << r << " " << p << " " << b;
    }
  }
  // Writing every flag and slot of every rank leaves the seats alone.
  for (int r = 0; r < 3; ++r) {
    for (int id = 0; id < SharedSegment::kFlags; ++id) seg.flag(r, id).v.store(~uint64_t{0});
    for (int p = 0; p < 2; ++p) {
      seg.seq(r, p).store(~uint64_t{0});
      std::memset(seg.slot(r, p), 0xff, seg.slot_bytes());
      std::memset(seg.chunk_slot(r, p), 0xff, seg.chunk_bytes());
    }
  }
  EXPECT_EQ(seg.cpu_of(0), 5);
  EXPECT_EQ(seg.cpu_of(1), -1);
}

}  // namespace
}  // namespace dccl::net

namespace dccl::coll {
namespace {

TEST(SegmentSpin, NoSpinForARankOnThisCpu) {
  EXPECT_EQ(segment_spin_us(50, 1, 1), 0);  // the rank waited for cannot run while this one spins
  EXPECT_EQ(segment_spin_us(50, 0, 0), 0);
  EXPECT_EQ(segment_spin_us(50, 0, 1), 50);  // another CPU: it answers within the spin
  EXPECT_EQ(segment_spin_us(50, 1, -1), 50);  // not seen yet
  EXPECT_EQ(segment_spin_us(50, -1, -1), 50);  // sched_getcpu failed, nobody seen: both unknown
  EXPECT_EQ(segment_spin_us(0, 0, 1), 0);  // no budget stays none
}

}  // namespace
}  // namespace dccl::coll
