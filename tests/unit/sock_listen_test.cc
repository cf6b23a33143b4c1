// The socket path's listeners against outsiders (net/sock/sock_path.hpp): nothing listens
// before connect(); while a rank waits in connect() for the ranks that connect to
// it, a connection from an address none of them published is closed at once, and
// silent ones from an expected address are closed (at most kMaxUnidentified held,
// none past kHelloWithin); the expected rank still connects, and afterwards
// nothing listens. Loopback only (127.0.0.1 the ranks, 127.0.0.2 the stranger).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "net/sock/sock_path.hpp"

namespace dccl::net {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kTimeout{20000};

// The port of the one listener in a SockPath's address ("sock2 LIMIT NONCE FLOWS ip:port").
int port_of(const SockPath& s) {
  const std::string a = s.address();
  return std::stoi(a.substr(a.rfind(':') + 1));
}

// A TCP connection to 127.0.0.1:port from `from` (an address of lo); -1 if refused.
int dial(int port, const char* from = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in src{}, dst{};
  src.sin_family = dst.sin_family = AF_INET;
  inet_pton(AF_INET, from, &src.sin_addr);
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  dst.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the other end closed fd, waiting for that up to `within`.
bool closed_by_peer(int fd, std::chrono::milliseconds within) {
  const auto end = Clock::now() + within;
  do {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      char c;
      const ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    }
  } while (Clock::now() < end);
  return false;
}

TEST(SockListen, NothingListensBeforeConnect) {
  SockPath b(1, 1 << 20, kTimeout, {"127.0.0.1"});
  const int fd = dial(port_of(b));
  EXPECT_EQ(fd, -1) << "connected to a socket path that has not begun connect()";
  if (fd >= 0) close(fd);
}

TEST(SockListen, StrangersAndSilentConnectionsAreClosed) {
  SockPath a(0, 1 << 20, kTimeout, {"127.0.0.1"});
  SockPath b(1, 1 << 20, kTimeout, {"127.0.0.1"});
  const int port = port_of(b);
  std::string b_error;
  std::thread tb([&] {
    try {
      b.connect({{0, a.address()}, {-1, ""}});
    } catch (const core::Error& e) {
      b_error = e.what();
    }
  });
  // b listens once inside connect(), waiting for rank 0.
  int probe = -1;
  for (int i = 0; i < 200 && (probe = dial(port)) < 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(probe, 0) << "rank 1 never listened";
  // Not an address rank 0 published: closed at once.
  const int stranger = dial(port, "127.0.0.2");
  ASSERT_GE(stranger, 0);
  EXPECT_TRUE(closed_by_peer(stranger, std::chrono::milliseconds(1000))) << "a stranger's connection was kept";
  // From rank 0's address but silent: more than kMaxUnidentified of them, all closed
  // within kHelloWithin (and a margin for a loaded machine).
  std::vector<int> silent{probe};
  for (size_t i = 0; i < SockPath::kMaxUnidentified + 8; ++i) {
    const int fd = dial(port);
    ASSERT_GE(fd, 0);
    silent.push_back(fd);
  }
  size_t kept = 0;
  const auto deadline = Clock::now() + SockPath::kHelloWithin + std::chrono::milliseconds(3000);
  for (int fd : silent)
    kept += !closed_by_peer(fd, std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                           deadline - Clock::now())));
  EXPECT_EQ(kept, 0u) << "silent connections still open after the introduction's bound";
  // Rank 0 connects as usual.
  a.connect({{-1, ""}, {0, b.address()}});
  tb.join();
  EXPECT_EQ(b_error, "");
  EXPECT_GT(a.limit(1), 0u);
  EXPECT_GT(b.limit(0), 0u);
  // Every expected rank connected: nothing listens any more.
  const int late = dial(port);
  EXPECT_EQ(late, -1) << "rank 1 still listens after every rank connected";
  if (late >= 0) close(late);
  for (int fd : silent) close(fd);
  close(stranger);
}

}  // namespace
}  // namespace dccl::net
