// The socket path's introduction (net/sock/sock_intro.hpp) between real SockPaths:
// ranks with the same secret connect, with different secrets they do not; what
// a listener on the wire sees holds no byte sequence of the secret; a captured
// introduction replayed on a second connection to the same listener is refused
// while the genuine one goes through; an impostor that knows everything but the
// secret is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "core/error.hpp"
#include "loopback_proxy.hpp"
#include "net/sock/sock_intro.hpp"
#include "net/sock/sock_path.hpp"

namespace dccl::net {
namespace {

using namespace std::chrono_literals;
using Secret = std::array<uint8_t, 16>;

// "sock2 LIMIT NONCE FLOWS ip:port" -> the nonce and the port.
void parse_address(const std::string& a, uint64_t* nonce, uint16_t* port) {
  unsigned long long lim = 0, n = 0;
  char ip[64] = {};
  unsigned p = 0;
  ASSERT_EQ(sscanf(a.c_str(), "sock2 %llu %llx %*d %63[0-9.]:%u", &lim, &n, ip, &p), 4) << a;
  *nonce = n;
  *port = static_cast<uint16_t>(p);
}

std::string with_port(const std::string& a, uint16_t port) {
  return a.substr(0, a.rfind(':') + 1) + std::to_string(port);
}

// Connects rank 0 (`a`) and rank 1 (`b`), rank 0 reaching rank 1 at `b_addr`;
// each side's error text, "" when it connected.
// The addresses are read before either side connects: a path stops listening, and
// its address lists no listener, once its peers are connected.
std::pair<std::string, std::string> connect_pair(SockPath& a, SockPath& b, const std::string& b_addr) {
  std::string ea, eb;
  const std::string a_addr = a.address(), b_own = b.address();
  std::thread t([&] {
    try {
      b.connect({{0, a_addr}, {0, b_own}});
    } catch (const core::Error& e) {
      eb = e.what();
    }
  });
  try {
    a.connect({{0, a_addr}, {0, b_addr}});
  } catch (const core::Error& e) {
    ea = e.what();
  }
  t.join();
  return {ea, eb};
}

bool contains(const std::string& hay, const Secret& s) {
  return hay.find(std::string(reinterpret_cast<const char*>(s.data()), s.size())) != std::string::npos;
}

TEST(SockIntro, SameSecretConnectsOtherSecretDoesNot) {
  const Secret s = boot::random_secret();
  {
    SockPath a(0, 1 << 20, 5000ms, {"127.0.0.1"}, {}, s), b(1, 1 << 20, 5000ms, {"127.0.0.1"}, {}, s);
    auto [ea, eb] = connect_pair(a, b, b.address());
    EXPECT_EQ(ea, "");
    EXPECT_EQ(eb, "");
    EXPECT_EQ(a.limit(1), 1u << 20);
  }
  Secret other = s;
  other[9] ^= 0x40;
  SockPath a(0, 1 << 20, 600ms, {"127.0.0.1"}, {}, s), b(1, 1 << 20, 600ms, {"127.0.0.1"}, {}, other);
  auto [ea, eb] = connect_pair(a, b, b.address());
  EXPECT_NE(ea.find("did not prove that it knows the job secret"), std::string::npos) << ea;
  EXPECT_NE(eb.find("no connection with rank(s) 0"), std::string::npos) << eb;
}

// Rank 0 reaches rank 1 through a recording proxy: they connect, and neither
// direction carries the secret.
TEST(SockIntro, NothingOnTheWireCarriesTheSecret) {
  const Secret s = boot::random_secret();
  SockPath a(0, 1 << 20, 5000ms, {"127.0.0.1"}, {}, s), b(1, 1 << 20, 5000ms, {"127.0.0.1"}, {}, s);
  uint64_t nonce = 0;
  uint16_t port = 0;
  parse_address(b.address(), &nonce, &port);
  Proxy proxy(port);
  auto [ea, eb] = connect_pair(a, b, with_port(b.address(), proxy.port()));
  EXPECT_EQ(ea, "");
  EXPECT_EQ(eb, "");
  const std::string up = proxy.up(), down = proxy.down();
  EXPECT_EQ(up.size(), kIntroHelloBytes + kIntroProofBytes);
  EXPECT_EQ(down.size(), kIntroAnswerBytes);
  EXPECT_FALSE(contains(up, s));
  EXPECT_FALSE(contains(down, s));
}

// A rank-0 impostor that captured the genuine rank 0's hello and proof replays
// them on a connection of its own while rank 1 still waits: rank 1 refuses it
// (its challenge differs) and takes the genuine connection.
TEST(SockIntro, ReplayedIntroductionIsRefused) {
  const Secret s = boot::random_secret();
  SockPath a(0, 1 << 20, 5000ms, {"127.0.0.1"}, {}, s);  // only its published number is used
  SockPath b(1, 1 << 20, 5000ms, {"127.0.0.1"}, {}, s);
  uint64_t nonce_a = 0, nonce_b = 0;
  uint16_t port_a = 0, port_b = 0;
  parse_address(a.address(), &nonce_a, &port_a);
  parse_address(b.address(), &nonce_b, &port_b);
  std::string eb = "running";
  std::atomic<bool> finished{false};
  std::thread t([&] {
    try {
      b.connect({{0, a.address()}, {0, b.address()}});
      eb = "";
    } catch (const core::Error& e) {
      eb = e.what();
    }
    finished = true;
  });
  const IntroKey key{s, 2};
  const IntroPair pair{0, 1, nonce_a, nonce_b};
  auto read_n = [](int fd, char* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      pollfd pf{fd, POLLIN, 0};
      if (poll(&pf, 1, 5000) <= 0) return false;
      const ssize_t k = recv(fd, p + got, n - got, 0);
      if (k <= 0) return false;
      got += static_cast<size_t>(k);
    }
    return true;
  };
  // The genuine rank 0, up to its proof (held back).
  const int genuine = connect_loopback(port_b);
  const IntroNonce nc = IntroNonce::fresh();
  char hello[kIntroHelloBytes], answer[kIntroAnswerBytes], proof[kIntroProofBytes];
  intro_hello(hello, pair, nc);
  ASSERT_EQ(send(genuine, hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
  ASSERT_TRUE(read_n(genuine, answer, sizeof(answer)));
  ASSERT_TRUE(intro_check_answer(answer, key, pair, nc, proof));
  // The replay: the same hello and proof on a second connection.
  const int replay = connect_loopback(port_b);
  ASSERT_EQ(send(replay, hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
  char answer2[kIntroAnswerBytes];
  ASSERT_TRUE(read_n(replay, answer2, sizeof(answer2)));
  EXPECT_NE(std::string(answer2 + 8, 16), std::string(answer + 8, 16)) << "the challenge repeated";
  ASSERT_EQ(send(replay, proof, sizeof(proof), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(proof)));
  pollfd pf{replay, POLLIN, 0};
  char byte;
  EXPECT_TRUE(poll(&pf, 1, 5000) == 1 && recv(replay, &byte, 1, 0) <= 0) << "rank 1 kept the replayed connection";
  EXPECT_FALSE(finished.load()) << "rank 1 finished on the replay";
  // The genuine proof completes rank 1's connect.
  ASSERT_EQ(send(genuine, proof, sizeof(proof), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(proof)));
  t.join();
  EXPECT_EQ(eb, "");
  EXPECT_EQ(b.limit(0), 1u << 20);
  close(replay);
  close(genuine);
}

// A process that read rank 1's connection blob (the store's traffic is not
// encrypted) introduces itself as rank 0 without the job secret: rank 1 does
// not take it (before, the blob's number was all it took).
TEST(SockIntro, ImpostorWithoutTheSecretIsRefused) {
  const Secret s = boot::random_secret();
  SockPath b(1, 1 << 20, 1000ms, {"127.0.0.1"}, {}, s);
  uint64_t nonce_b = 0;
  uint16_t port_b = 0;
  parse_address(b.address(), &nonce_b, &port_b);
  std::string err = "accepted";
  std::thread t([&] {
    try {
      b.connect({{0, "sock2 1024 1 0 127.0.0.1:1"}, {0, b.address()}});
    } catch (const core::Error& e) {
      err = e.what();
    }
  });
  Secret guess = s;
  guess[0] ^= 1;
  const IntroKey key{guess, 2};
  const IntroPair pair{0, 1, 1, nonce_b};
  const int fd = connect_loopback(port_b);
  const IntroNonce nc = IntroNonce::fresh();
  char hello[kIntroHelloBytes], answer[kIntroAnswerBytes], proof[kIntroProofBytes];
  intro_hello(hello, pair, nc);
  ASSERT_EQ(send(fd, hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
  size_t got = 0;
  pollfd pf{fd, POLLIN, 0};
  while (got < sizeof(answer) && poll(&pf, 1, 2000) > 0) {
    const ssize_t k = recv(fd, answer + got, sizeof(answer) - got, 0);
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  ASSERT_EQ(got, sizeof(answer));
  EXPECT_FALSE(intro_check_answer(answer, key, pair, nc, proof)) << "the answer verified under another secret";
  memset(proof, 0x5a, sizeof(proof));  // the best an impostor can send
  ASSERT_EQ(send(fd, proof, sizeof(proof), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(proof)));
  t.join();
  close(fd);
  EXPECT_NE(err.find("no connection with rank(s) 0"), std::string::npos) << err;
}

}  // namespace
}  // namespace dccl::net
