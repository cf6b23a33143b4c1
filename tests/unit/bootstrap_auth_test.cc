// The store's challenge-response (bootstrap/wire.hpp): what a listener on the
// network sees of a rank's session (through a recording loopback proxy) holds
// no byte sequence of the secret, and replaying it on a new connection gets
// nothing: the HELLO is refused, no request of the session is carried out. A
// process that answers at the store's address without the secret (replaying a
// real store's CHALLENGE and WELCOME) is refused by the client.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "bootstrap/wire.hpp"
#include "catch_error.hpp"
#include "core/error.hpp"
#include "loopback_proxy.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using dccl::core::Error;
using Clock = std::chrono::steady_clock;

namespace {

// Frames in `bytes`, in order (a partial frame at the end is left out).
std::vector<wire::Frame> frames_of(const std::string& bytes, std::vector<std::string>* raw = nullptr) {
  std::vector<wire::Frame> out;
  size_t off = 0;
  for (;;) {
    auto r = wire::parse_frame(reinterpret_cast<const uint8_t*>(bytes.data()) + off, bytes.size() - off);
    if (r.status != wire::ParseStatus::Ok) break;
    if (raw) raw->push_back(bytes.substr(off, r.consumed));
    out.push_back(r.frame);
    off += r.consumed;
  }
  return out;
}

// Reads frames from fd until one that is not a CHALLENGE arrives, the peer
// closes, or 2 s pass; its type name ("closed" / "timeout" otherwise).
std::string answer(int fd, std::string* value = nullptr) {
  std::string got;
  char buf[4096];
  const auto end = Clock::now() + 2s;
  while (Clock::now() < end) {
    for (const auto& f : frames_of(got))
      if (f.type != wire::FrameType::Challenge) {
        if (value) *value = f.value;
        return wire::type_name(f.type);
      }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "closed";
    got.append(buf, static_cast<size_t>(n));
  }
  return "timeout";
}

bool contains(const std::string& hay, const std::array<uint8_t, 16>& secret) {
  return hay.find(std::string(reinterpret_cast<const char*>(secret.data()), secret.size())) != std::string::npos;
}

struct Session {
  std::string up, down;
};

// One rank's whole session through the proxy: HELLO, a SET, a LEASE and its
// release (what a failure report rides on), a GET.
Session sniffed_session(const UniqueIdData& id) {
  Proxy proxy(id.port);
  UniqueIdData via = id;
  via.port = proxy.port();
  {
    Bootstrap b(via, 0, 2, 5s, nullptr, "env0");
    b.set("k", "forged");
    b.lease("failed", "rank 0 failed (forged report)");
    b.unlease();
    EXPECT_EQ(b.get("k"), "forged");
  }
  return {proxy.up(), proxy.down()};
}

}  // namespace

TEST(StoreAuth, NoFrameCarriesTheSecret) {
  auto server = StoreServer::start("127.0.0.1", 0, random_secret());
  const UniqueIdData id = server->id();
  Session s = sniffed_session(id);
  ASSERT_FALSE(frames_of(s.up).empty());
  ASSERT_FALSE(frames_of(s.down).empty());
  EXPECT_EQ(frames_of(s.up)[0].type, wire::FrameType::Hello);
  EXPECT_FALSE(contains(s.up, id.secret)) << "the client sent the secret";
  EXPECT_FALSE(contains(s.down, id.secret)) << "the store sent the secret";
}

// The captured session, replayed on a new connection, is refused at its HELLO;
// its SET and its LEASE (a forged failure report) are never carried out.
TEST(StoreAuth, ReplayedSessionIsRefused) {
  auto server = StoreServer::start("127.0.0.1", 0, random_secret());
  const UniqueIdData id = server->id();
  Session s = sniffed_session(id);
  Bootstrap other(id, 1, 2, 5s, nullptr, "env0");
  other.set("k", "original");
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = connect_loopback(id.port);
    ASSERT_EQ(send(fd, s.up.data(), s.up.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.up.size()));
    std::string why;
    const std::string got = answer(fd, &why);
    EXPECT_EQ(got, "REFUSED") << "attempt " << attempt;
    EXPECT_NE(why.find("wrong job secret"), std::string::npos) << why;
    close(fd);
  }
  EXPECT_EQ(other.get("k"), "original");
  EXPECT_EQ(catch_error([&] { other.get("failed", 300ms); }).code(), dcclTimeout) << "a replayed LEASE fired";
}

// A HELLO collected by a process posing as the store (for a nonce of its
// choosing) does not open the real store either.
TEST(StoreAuth, CollectedHelloDoesNotOpenTheStore) {
  auto server = StoreServer::start("127.0.0.1", 0, random_secret());
  const UniqueIdData id = server->id();
  uint16_t fake_port = 0;
  int lfd = listen_loopback(&fake_port);
  std::string collected;
  std::thread fake([&] {
    int c = accept_within(lfd, 5s);
    if (c < 0) return;
    std::string ch;
    wire::append_challenge(ch, wire::fresh_nonce());
    (void)!send(c, ch.data(), ch.size(), MSG_NOSIGNAL);
    char buf[4096];
    pollfd p{c, POLLIN, 0};
    while (frames_of(collected).empty() && poll(&p, 1, 2000) > 0) {
      const ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) break;
      collected.append(buf, static_cast<size_t>(n));
    }
    close(c);  // no answer: the client gives up within its timeout
  });
  UniqueIdData at_fake = id;
  at_fake.port = fake_port;
  catch_error([&] { Bootstrap b(at_fake, 0, 2, 500ms); });
  fake.join();
  close(lfd);
  std::vector<std::string> raw;
  ASSERT_FALSE(frames_of(collected, &raw).empty());
  int fd = connect_loopback(id.port);
  ASSERT_EQ(send(fd, raw[0].data(), raw[0].size(), MSG_NOSIGNAL), static_cast<ssize_t>(raw[0].size()));
  EXPECT_EQ(answer(fd), "REFUSED");
  close(fd);
}

// A process at the store's address that replays a real store's CHALLENGE and
// WELCOME (captured from another rank's session) cannot prove it knows the
// secret: the client fails at once, naming the address.
TEST(StoreAuth, ImpostorStoreIsRefused) {
  auto server = StoreServer::start("127.0.0.1", 0, random_secret());
  const UniqueIdData id = server->id();
  Session s = sniffed_session(id);
  std::vector<std::string> raw;
  auto down = frames_of(s.down, &raw);
  ASSERT_GE(down.size(), 2u);
  ASSERT_EQ(down[0].type, wire::FrameType::Challenge);
  ASSERT_EQ(down[1].type, wire::FrameType::Welcome);
  uint16_t fake_port = 0;
  int lfd = listen_loopback(&fake_port);
  std::thread fake([&] {
    int c = accept_within(lfd, 5s);
    if (c < 0) return;
    (void)!send(c, raw[0].data(), raw[0].size(), MSG_NOSIGNAL);
    char buf[4096];
    pollfd p{c, POLLIN, 0};
    if (poll(&p, 1, 2000) > 0 && recv(c, buf, sizeof(buf), 0) > 0)
      (void)!send(c, raw[1].data(), raw[1].size(), MSG_NOSIGNAL);
    poll(&p, 1, 2000);  // until the client closes
    close(c);
  });
  UniqueIdData at_fake = id;
  at_fake.port = fake_port;
  Error e = catch_error([&] { Bootstrap b(at_fake, 0, 2, 5s, nullptr, "env0"); });
  fake.join();
  close(lfd);
  EXPECT_EQ(e.code(), dcclRemoteError) << e.what();
  EXPECT_NE(std::string(e.what()).find("did not prove"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(std::to_string(fake_port)), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
}
