// Bootstrap failure leases (LEASE/UNLEASE), get() with its own timeout, interrupt().
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "bootstrap/wire.hpp"
#include "catch_error.hpp"
#include "core/error.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using dccl::core::Error;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<StoreServer> local_server(const StoreLimits& lim = {}) {
  return StoreServer::start("127.0.0.1", 0, random_secret(), lim);
}

// Async-signal-safe pieces only (usable in a forked child of a threaded process).
int raw_connect(const UniqueIdData& id) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(id.port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}
bool send_raw(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
bool recv_raw(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Connects to the store and reads its CHALLENGE; *greet gets the HELLO that
// answers it and a LEASE(key, value), *answer_bytes how many bytes of the
// answers to wait for (the start of WELCOME). -1 when the store did not answer.
int connect_and_greet(const UniqueIdData& id, const std::string& key, const std::string& value,
                      std::string* greet, size_t* answer_bytes) {
  int fd = raw_connect(id);
  char ch[5 + wire::kChallengePayload];
  if (fd < 0 || !recv_raw(fd, ch, sizeof(ch))) return -1;
  auto r = wire::parse_frame(reinterpret_cast<const uint8_t*>(ch), sizeof(ch));
  if (r.status != wire::ParseStatus::Ok || r.frame.type != wire::FrameType::Challenge) return -1;
  greet->clear();
  wire::append_hello(*greet, id.secret, r.frame.nonce, 1, 2);
  wire::append_lease(*greet, 1, key, value);
  *answer_bytes = 5 + 4 + wire::kProofBytes;
  return fd;
}

}  // namespace

TEST(WireLease, RoundTripAndBounds) {
  std::string s;
  wire::append_lease(s, 77, "dead", std::string("r\0x", 3));
  for (size_t n = 0; n < s.size(); ++n)
    EXPECT_EQ(wire::parse_frame(reinterpret_cast<const uint8_t*>(s.data()), n).status, wire::ParseStatus::NeedMore);
  auto r = wire::parse_frame(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  ASSERT_EQ(r.status, wire::ParseStatus::Ok) << r.error;
  EXPECT_EQ(r.consumed, s.size());
  EXPECT_EQ(r.frame.type, wire::FrameType::Lease);
  EXPECT_EQ(r.frame.req, 77u);
  EXPECT_EQ(r.frame.key, "dead");
  EXPECT_EQ(r.frame.value, std::string("r\0x", 3));
  EXPECT_TRUE(wire::is_client_frame(wire::FrameType::Lease));
  EXPECT_STREQ(wire::type_name(wire::FrameType::Lease), "LEASE");

  s.clear(), wire::append_unlease(s, 5);
  r = wire::parse_frame(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  ASSERT_EQ(r.status, wire::ParseStatus::Ok) << r.error;
  EXPECT_EQ(r.consumed, 13u);
  EXPECT_EQ(r.frame.type, wire::FrameType::Unlease);
  EXPECT_EQ(r.frame.req, 5u);
  EXPECT_TRUE(wire::is_client_frame(wire::FrameType::Unlease));
  EXPECT_STREQ(wire::type_name(wire::FrameType::Unlease), "UNLEASE");

  // UNLEASE carries exactly a request id; LEASE's key length must fit the frame.
  std::string bad = std::string("\0\0\0\x0a\x0b", 5) + std::string(9, '\0');
  EXPECT_EQ(wire::parse_frame(reinterpret_cast<const uint8_t*>(bad.data()), bad.size()).status,
            wire::ParseStatus::Malformed);
  bad = std::string("\0\0\0\x11\x0a", 5) + std::string(8, '\0') + std::string("\0\0\0\x05", 4) + "abcd";
  auto m = wire::parse_frame(reinterpret_cast<const uint8_t*>(bad.data()), bad.size());
  EXPECT_EQ(m.status, wire::ParseStatus::Malformed);
  EXPECT_NE(m.error.find("LEASE"), std::string::npos) << m.error;
  EXPECT_EQ(catch_error([] { std::string o; wire::append_lease(o, 1, std::string(1025, 'k'), ""); }).code(),
            dcclInvalidArgument);
}

TEST(Lease, FiresWhenTheConnectionCloses) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap watcher(id, 1, 2, 5s, nullptr, "c1/");
  std::string got;
  std::thread t([&] { got = watcher.get("failed", 10s); });
  auto leaser = std::make_unique<Bootstrap>(id, 0, 2, 5s, nullptr, "c1/");
  leaser->lease("failed", "rank 0 died");
  std::this_thread::sleep_for(100ms);  // the watcher's GET is parked by now
  auto t0 = Clock::now();
  leaser.reset();  // the destructor does not unlease
  t.join();
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(got, "rank 0 died");
  Bootstrap other(id, 0, 1, 2s);  // the key carries the namespace, and stays set
  EXPECT_EQ(other.get("c1/failed"), "rank 0 died");
}

TEST(Lease, UnleaseThenCloseDoesNotFire) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  {
    Bootstrap a(id, 0, 2, 2s);
    a.lease("K", "V");
    a.unlease();
    a.unlease();  // idempotent
  }
  Bootstrap b(id, 1, 2, 2s);
  auto t0 = Clock::now();
  Error e = catch_error([&] { b.get("K", 300ms); });
  EXPECT_EQ(e.code(), dcclTimeout) << e.what();
  EXPECT_GE(Clock::now() - t0, 250ms);
  EXPECT_NE(std::string(e.what()).find("300 ms"), std::string::npos) << e.what();
}

TEST(Lease, FiresWhenAProcessDiesMidFrame) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  size_t answer_bytes = 0;
  std::string greet;
  const int fd = connect_and_greet(id, "K", "child died", &greet, &answer_bytes);
  ASSERT_GE(fd, 0);
  std::string half;
  wire::append_set(half, 2, "partial", std::string(100, 'x'));
  half.resize(half.size() / 2);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: syscalls only, then dies in the middle of a frame
    char answers[64];
    if (!send_raw(fd, greet.data(), greet.size()) || !recv_raw(fd, answers, answer_bytes) ||
        !send_raw(fd, half.data(), half.size()))
      _exit(1);
    char one = 1;
    (void)!write(ready[1], &one, 1);
    _exit(0);
  }
  close(ready[1]);
  close(fd);  // the child's copy is the one that dies mid-frame
  char one = 0;
  EXPECT_EQ(read(ready[0], &one, 1), 1);
  close(ready[0]);
  Bootstrap b(id, 0, 2, 2s);
  auto t0 = Clock::now();
  EXPECT_EQ(b.get("K", 1s), "child died");
  EXPECT_LT(Clock::now() - t0, 1s);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Lease, FiresWhenAProcessIsKilled) {
  // Fork while this process has no other thread; the child then uses a real
  // Bootstrap, leases, and is SIGKILLed while blocked.
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    dcclUniqueId raw;
    if (read(to_child[0], &raw, sizeof(raw)) != static_cast<ssize_t>(sizeof(raw))) _exit(1);
    try {
      Bootstrap b(decode_id(raw), 1, 2, 5s);
      b.lease("K", "killed");
      char one = 1;
      (void)!write(from_child[1], &one, 1);
      for (;;) pause();
    } catch (...) {
      _exit(2);
    }
  }
  close(to_child[0]);
  close(from_child[1]);
  struct Reaper {  // however this test ends, the child does not outlive it
    pid_t pid;
    bool armed = true;
    ~Reaper() {
      if (armed && pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reaper{pid};
  auto server = local_server();
  dcclUniqueId raw;
  encode_id(server->id(), &raw);
  ASSERT_EQ(write(to_child[1], &raw, sizeof(raw)), static_cast<ssize_t>(sizeof(raw)));
  char one = 0;
  EXPECT_EQ(read(from_child[0], &one, 1), 1);
  Bootstrap b(server->id(), 0, 2, 2s);
  std::string got;
  std::thread t([&] { got = b.get("K", 5s); });
  std::this_thread::sleep_for(50ms);
  auto t0 = Clock::now();
  kill(pid, SIGKILL);
  t.join();
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(got, "killed");
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  reaper.armed = false;  // reaped already
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  close(to_child[1]);
  close(from_child[0]);
}

TEST(Lease, FiresWhenTheStoreDropsAMalformedClient) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  size_t answer_bytes = 0;
  std::string s;
  int fd = connect_and_greet(id, "K", "garbled", &s, &answer_bytes);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_raw(fd, s.data(), s.size()));
  char answers[64];
  ASSERT_TRUE(recv_raw(fd, answers, answer_bytes));
  ASSERT_TRUE(send_raw(fd, "\0\0\0\x09\x63xxxxxxxx", 13));  // unknown frame type: the store closes us
  Bootstrap b(id, 0, 2, 2s);
  EXPECT_EQ(b.get("K", 1s), "garbled");
  close(fd);
}

TEST(Lease, NewLeaseReplacesTheOld) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  {
    Bootstrap a(id, 0, 2, 2s);
    a.lease("K1", "first");
    a.lease("K2", "second");
    a.lease("K2", "third");  // same key, new value
  }
  Bootstrap b(id, 1, 2, 2s);
  EXPECT_EQ(b.get("K2", 1s), "third");
  EXPECT_EQ(catch_error([&] { b.get("K1", 300ms); }).code(), dcclTimeout);
}

TEST(Lease, DoesNotOverwriteAnExistingKey) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap b(id, 1, 2, 2s);
  b.set("K", "announced first");
  {
    Bootstrap a(id, 0, 2, 2s);
    a.lease("K", "lease");
    a.lease("sync", "a closed");  // replaces the lease on K
    a.lease("K", "lease");
  }
  {
    Bootstrap c(id, 0, 2, 2s);  // closed after a: once its lease fired, a's has been handled
    c.lease("sync2", "c closed");
  }
  EXPECT_EQ(b.get("sync2", 1s), "c closed");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(b.get("K"), "announced first");
}

TEST(Lease, CountsAgainstTheStoreLimit) {
  StoreLimits lim;
  lim.max_total_bytes = 1 << 20;
  auto server = local_server(lim);
  Bootstrap a(server->id(), 0, 1, 2s);
  a.lease("big", std::string(600 << 10, 'l'));
  Error e = catch_error([&] { a.set("x", std::string(600 << 10, 's')); });
  EXPECT_EQ(e.code(), dcclRemoteError);
  EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
  e = catch_error([&] { a.lease("big2", std::string(1100 << 10, 'l')); });
  EXPECT_EQ(e.code(), dcclRemoteError);
  a.lease("big", std::string(800 << 10, 'l'));  // replacing: only the difference counts
  a.unlease();
  a.set("x", std::string(600 << 10, 's'));  // the reservation is gone
  EXPECT_EQ(a.get("x").size(), size_t{600} << 10);
}

TEST(Lease, GetWithItsOwnTimeout) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap b(id, 0, 2, 100ms);  // short default; the overload's timeout wins
  std::thread t([&] {
    std::this_thread::sleep_for(300ms);
    Bootstrap a(id, 1, 2, 2s);
    a.set("late", "v");
    a.set("later", "w");
  });
  EXPECT_EQ(b.get("late", std::chrono::hours(24 * 365)), "v");
  EXPECT_EQ(b.get("later", std::chrono::milliseconds::max()), "w");
  t.join();
  EXPECT_EQ(catch_error([&] { b.get("missing"); }).code(), dcclTimeout);
  EXPECT_EQ(catch_error([&] { b.get("late", 0ms); }).code(), dcclInvalidArgument);
  EXPECT_EQ(catch_error([&] { b.get("late", -5ms); }).code(), dcclInvalidArgument);
  EXPECT_EQ(b.get("late", 1s), "v");
}

TEST(Interrupt, UnblocksAGetPromptly) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap b(id, 0, 2, 5s);
  b.lease("failed", "rank 0");
  std::atomic<bool> threw{false};
  Clock::time_point thrown{};
  Error err(dcclSuccess, "");
  std::thread t([&] {
    try {
      b.get("failed", std::chrono::hours(24));
    } catch (const Error& e) {
      thrown = Clock::now();
      err = e;
      threw = true;
    }
  });
  std::this_thread::sleep_for(150ms);
  const auto t0 = Clock::now();
  b.interrupt();
  t.join();
  ASSERT_TRUE(threw.load());
  EXPECT_LT(thrown - t0, 1000ms);
  EXPECT_EQ(err.code(), dcclRemoteError);
  EXPECT_NE(std::string(err.what()).find("interrupted"), std::string::npos) << err.what();
  EXPECT_NE(std::string(err.what()).find("rank 0"), std::string::npos) << err.what();

  // Sticky for waits; the connection stays usable for the calls the store answers at once.
  Error again = catch_error([&] { b.get("failed", 10s); });
  EXPECT_EQ(again.code(), dcclRemoteError);
  EXPECT_NE(std::string(again.what()).find("interrupted"), std::string::npos) << again.what();
  EXPECT_EQ(catch_error([&] { b.barrier(); }).code(), dcclRemoteError);
  b.set("still", "works");
  b.unlease();  // graceful exit after the watcher was interrupted
  b.interrupt();  // repeated: harmless
  Bootstrap c(id, 1, 2, 2s);
  EXPECT_EQ(c.get("still"), "works");
  EXPECT_EQ(catch_error([&] { c.get("failed", 300ms); }).code(), dcclTimeout);  // the lease was released
}

TEST(Interrupt, BeforeTheGetStartsIsNotLost) {
  auto server = local_server();
  Bootstrap b(server->id(), 0, 1, 5s);
  std::thread t([&] { b.interrupt(); });
  t.join();
  auto t0 = Clock::now();
  EXPECT_EQ(catch_error([&] { b.get("k", std::chrono::hours(1)); }).code(), dcclRemoteError);
  EXPECT_LT(Clock::now() - t0, 1000ms);
}

TEST(Interrupt, RacesWithReplies) {
  // Many short rounds where a value and an interrupt arrive together: the get
  // either returns the value or throws "interrupted"; nothing hangs or races.
  auto server = local_server();
  const UniqueIdData id = server->id();
  Bootstrap setter(id, 1, 2, 5s);
  for (int i = 0; i < 30; ++i) {
    Bootstrap b(id, 0, 2, 5s);
    std::string key = std::to_string(i);  // no "lit" + string: GCC 12 -Wrestrict false positive
    key += 'k';
    std::thread t([&] {
      try {
        EXPECT_EQ(b.get(key, 10s), "v");
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("interrupted"), std::string::npos) << e.what();
      }
    });
    if (i % 3 == 0) std::this_thread::sleep_for(1ms);
    setter.set(key, "v");
    b.interrupt();
    t.join();
  }
}
