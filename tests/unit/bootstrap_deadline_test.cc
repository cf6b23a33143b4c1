// One deadline for the phases of a call: Bootstrap::limit() caps every wait of a
// connection, the constructor's connect included; set() with a timeout of its
// own; local_host(), the address a split child's store listens on.
#include <gtest/gtest.h>

#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "catch_error.hpp"
#include "core/error.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
std::unique_ptr<StoreServer> local_server() { return StoreServer::start("127.0.0.1", 0, random_secret()); }
}  // namespace

// Waits of an hour end at the cap, one after the other: a call's phases share it.
TEST(Deadline, LimitCapsEveryLaterWait) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap b(id, 0, 2, std::chrono::hours(1));
  EXPECT_EQ(b.limit(), Clock::time_point{});
  const auto until = Clock::now() + 300ms;
  b.limit(until);
  EXPECT_EQ(b.limit(), until);
  EXPECT_EQ(catch_error([&] { b.get("missing"); }).code(), dcclTimeout);
  EXPECT_EQ(catch_error([&] { b.get("missing", std::chrono::hours(1)); }).code(), dcclTimeout);
  EXPECT_EQ(catch_error([&] { b.allgather("x"); }).code(), dcclTimeout);  // rank 1 never comes
  EXPECT_GE(Clock::now(), until);
  EXPECT_LT(Clock::now(), until + 30min);  // not the hour of the waits' own timeouts
  // Lifted: a key that exists is still read (the connection stayed usable).
  b.limit({});
  b.set("k", "v");
  EXPECT_EQ(b.get("k"), "v");
}

// The connect, too: a store that is not there is given up at the cap.
TEST(Deadline, ConstructorConnectEndsAtTheCap) {
  UniqueIdData id;
  {
    auto server = local_server();
    id = server->id();
  }  // gone: nothing listens on its port
  const auto until = Clock::now() + 300ms;
  const auto e = catch_error([&] { Bootstrap b(id, 1, 2, std::chrono::hours(1), nullptr, "", Bootstrap::Role::Rank, until); });
  EXPECT_EQ(e.code(), dcclTimeout) << e.what();
  EXPECT_LT(Clock::now(), until + 30min);
}

TEST(Deadline, SetWithItsOwnTimeout) {
  auto server = local_server();
  Bootstrap b(server->id(), 0, 1, 5s);
  b.set("k", "v", 100ms);
  EXPECT_EQ(b.get("k"), "v");
  EXPECT_EQ(catch_error([&] { b.set("k", "v", 0ms); }).code(), dcclInvalidArgument);
}

// The address of this end of the connection: the store on 127.0.0.1 is reached from 127.0.0.1.
TEST(Deadline, LocalHostIsThisEndOfTheConnection) {
  auto server = local_server();
  Bootstrap b(server->id(), 0, 1, 5s);
  EXPECT_EQ(b.local_host(), "127.0.0.1");
}
