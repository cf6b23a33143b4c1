// The store's identity checks: one live process per (namespace, rank), one world
// size per namespace, both refused at once with both claims named; watcher
// connections; who hosts the store (WELCOME) and the watchdog that reports its loss.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "catch_error.hpp"
#include "core/error.hpp"
#include "comm/watchdog.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using dccl::core::Error;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<StoreServer> local_server() { return StoreServer::start("127.0.0.1", 0, random_secret()); }

bool has(const Error& e, const std::string& s) { return std::string(e.what()).find(s) != std::string::npos; }

const std::string kPid = "pid " + std::to_string(getpid());

}  // namespace

// While the namespace is still forming, a second claim of a rank fails it: the
// newcomer is refused, the rank already in waits no longer, and a late rank is
// refused too, each naming both claims.
TEST(Identity, DuplicateRankFailsAFormingNamespace) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap first(id, 1, 3, 10s, nullptr, "job");
  auto t0 = Clock::now();
  Error dup = catch_error([&] { Bootstrap second(id, 1, 3, 10s, nullptr, "job"); });
  EXPECT_EQ(dup.code(), dcclInvalidUsage) << dup.what();
  EXPECT_TRUE(has(dup, "rank 1 in namespace 'job' claimed twice")) << dup.what();
  EXPECT_TRUE(has(dup, "held by " + kPid)) << dup.what();
  EXPECT_TRUE(has(dup, "now claimed by " + kPid)) << dup.what();
  Error waiting = catch_error([&] { first.allgather("x"); });
  EXPECT_EQ(waiting.code(), dcclInvalidUsage) << waiting.what();
  EXPECT_TRUE(has(waiting, "claimed twice")) << waiting.what();
  Error late = catch_error([&] { Bootstrap r0(id, 0, 3, 10s, nullptr, "job"); });
  EXPECT_EQ(late.code(), dcclInvalidUsage) << late.what();
  EXPECT_TRUE(has(late, "claimed twice")) << late.what();
  EXPECT_LT(Clock::now() - t0, 2s) << "refusals must not wait for the timeout";
  Bootstrap other(id, 1, 3, 2s, nullptr, "another");  // other namespaces are unaffected
  other.set("k", "v");
}

// Once every rank has joined, a duplicate is refused alone; the job goes on.
TEST(Identity, DuplicateAfterFormationIsRefusedAlone) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  std::unique_ptr<Bootstrap> r1;
  std::thread t([&] { r1 = std::make_unique<Bootstrap>(id, 1, 2, 5s); });
  Bootstrap r0(id, 0, 2, 5s);
  t.join();
  Error dup = catch_error([&] { Bootstrap again(id, 0, 2, 5s); });
  EXPECT_EQ(dup.code(), dcclInvalidUsage);
  EXPECT_TRUE(has(dup, "rank 0 claimed twice")) << dup.what();
  std::thread t2([&] { EXPECT_EQ(r1->allgather("one")[0], "zero"); });
  EXPECT_EQ(r0.allgather("zero")[1], "one");
  t2.join();
  // A rank whose holder left may be claimed again.
  r1.reset();
  auto until = Clock::now() + 2s;
  for (;;) {
    try {
      Bootstrap back(id, 1, 2, 1s);
      break;
    } catch (const Error& e) {
      if (Clock::now() > until) FAIL() << e.what();
      std::this_thread::sleep_for(20ms);
    }
  }
}

// A world size that differs fails every rank of the namespace at once.
TEST(Identity, WorldSizeMismatchFailsEveryRank) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  std::vector<Error> errors(2, Error(dcclSuccess, ""));
  std::vector<Clock::duration> took(2);
  std::atomic<int> joined{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      Bootstrap b(id, r, 3, 10s, nullptr, "w");
      ++joined;
      auto t0 = Clock::now();
      errors[static_cast<size_t>(r)] = catch_error([&] { b.allgather("x"); });
      took[static_cast<size_t>(r)] = Clock::now() - t0;
    });
  while (joined < 2) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(50ms);
  Error wrong = catch_error([&] { Bootstrap b(id, 2, 4, 10s, nullptr, "w"); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.code(), dcclInvalidUsage);
  EXPECT_TRUE(has(wrong, "world size mismatch in namespace 'w'")) << wrong.what();
  EXPECT_TRUE(has(wrong, "says 4 ranks")) << wrong.what();
  EXPECT_TRUE(has(wrong, "says 3")) << wrong.what();
  for (int r = 0; r < 2; ++r) {
    const Error& e = errors[static_cast<size_t>(r)];
    EXPECT_EQ(e.code(), dcclInvalidUsage) << e.what();
    EXPECT_TRUE(has(e, "rank 2 (" + kPid)) << e.what();
    EXPECT_TRUE(has(e, "says 4 ranks")) << e.what();
    EXPECT_LT(took[static_cast<size_t>(r)], 2s);
  }
}

// Claims are per namespace; watcher connections claim nothing but must agree on the size.
TEST(Identity, NamespacesAndWatchers) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap a(id, 0, 2, 2s, nullptr, "a");
  Bootstrap b(id, 0, 3, 2s, nullptr, "b");  // same rank, other size, other namespace
  Bootstrap watch(id, 0, 2, 2s, nullptr, "a", Bootstrap::Role::Watch);
  watch.set("k", "v");
  EXPECT_EQ(a.get("k"), "v");
  Error e = catch_error([&] { Bootstrap w(id, 1, 5, 2s, nullptr, "a", Bootstrap::Role::Watch); });
  EXPECT_EQ(e.code(), dcclInvalidUsage);
  EXPECT_TRUE(has(e, "says 5 ranks")) << e.what();
}

// WELCOME says who hosts the store: the rank whose Bootstrap owns it, else the process.
TEST(Identity, WelcomeNamesTheHostRank) {
  auto bare = local_server();
  Bootstrap c(bare->id(), 0, 1, 2s);
  EXPECT_EQ(c.store_host().rfind(kPid + " on ", 0), 0u) << c.store_host();
  auto server = local_server();
  const UniqueIdData id = server->id();
  std::unique_ptr<Bootstrap> r1;
  std::thread t([&] { r1 = std::make_unique<Bootstrap>(id, 1, 2, 5s); });
  Bootstrap r0(id, 0, 2, 5s, std::move(server));
  t.join();
  Bootstrap late(id, 1, 2, 2s, nullptr, "", Bootstrap::Role::Watch);
  EXPECT_EQ(late.store_host().rfind("rank 0 (" + kPid + " on ", 0), 0u) << late.store_host();
}

// The watcher's connection is a lease on the store's host: when the store goes,
// every watcher reports it at once, naming the rank that hosted it.
TEST(Watchdog, StoreLossIsAFailureNamingItsHost) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  std::unique_ptr<Bootstrap> r1;
  std::thread t([&] { r1 = std::make_unique<Bootstrap>(id, 1, 2, 5s); });
  auto r0 = std::make_unique<Bootstrap>(id, 0, 2, 5s, std::move(server));
  t.join();
  std::mutex mu, boot_mu;
  std::condition_variable cv;
  std::string text;
  dcclResult_t code = dcclSuccess;
  {
    dccl::comm::Watchdog quiet(id, 1, "rank 1", 2, "", *r1, boot_mu, [&](dcclResult_t, const std::string& s) {
      ADD_FAILURE() << "a watchdog stopped at destroy reported " << s;
    });
  }
  dccl::comm::Watchdog wd(id, 1, "rank 1", 2, "", *r1, boot_mu, [&](dcclResult_t c, const std::string& s) {
    std::lock_guard<std::mutex> lk(mu);
    code = c;
    text = s;
    cv.notify_all();
  });
  auto t0 = Clock::now();
  r0.reset();  // rank 0 goes, and its store with it
  std::unique_lock<std::mutex> lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, 3s, [&] { return !text.empty(); })) << "no report within 3 s";
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(code, dcclRemoteError);
  EXPECT_NE(text.find("hosted by rank 0 (" + kPid), std::string::npos) << text;
  EXPECT_NE(text.find("lost the bootstrap store at 127.0.0.1:" + std::to_string(id.port)), std::string::npos)
      << text;
}

// A split communicator's ranks are named as its parent names them (the hierarchy's
// sub-communicators number their ranks from 0): the store a rank hosts and the
// lease of a rank whose process dies carry those names, so that every report of
// one failure names the same rank whichever communicator saw it first.
TEST(Watchdog, ASplitChildNamesItsRanksAsItsParentDoes) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // rank 1 of the child communicator, rank 3 of its parent: dies holding its lease
    close(ready[0]);
    Bootstrap r1(id, 1, 2, 5s);
    std::mutex mu;
    dccl::comm::Watchdog wd(id, 1, "rank 3", 2, "", r1, mu, [](dcclResult_t, const std::string&) {});
    const char one = 1;
    if (write(ready[1], &one, 1) != 1) _exit(2);
    _exit(0);  // without destroying: the store fires the lease
  }
  close(ready[1]);
  Bootstrap r0(id, 0, 2, 5s, std::move(server));
  r0.name_host("rank 2");
  Bootstrap late(id, 0, 2, 2s, nullptr, "", Bootstrap::Role::Watch);
  EXPECT_EQ(late.store_host().rfind("rank 2 (" + kPid + " on ", 0), 0u) << late.store_host();
  std::mutex mu, boot_mu;
  std::condition_variable cv;
  std::string text;
  dccl::comm::Watchdog wd(id, 0, "rank 2", 2, "", r0, boot_mu, [&](dcclResult_t, const std::string& s) {
    std::lock_guard<std::mutex> lk(mu);
    text = s;
    cv.notify_all();
  });
  char got = 0;
  ASSERT_EQ(read(ready[0], &got, 1), 1);
  close(ready[0]);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  std::unique_lock<std::mutex> lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, 3s, [&] { return !text.empty(); })) << "no report within 3 s";
  EXPECT_EQ(text.rfind("rank 3 (pid " + std::to_string(child) + " on ", 0), 0u) << text;
}
