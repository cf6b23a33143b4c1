// Unit tests' loopback plumbing: a listener, a connection, an accept with a
// deadline, and a proxy that relays one connection and keeps a copy of each
// direction, as a listener on the network would see it.
#pragma once
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

namespace {

inline int listen_loopback(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(fd, 8), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// Tries for up to 3 s: a socket path listens only once its connect() runs, which
// may be a moment after the test reached this point.
inline int connect_loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    const bool refused = errno == ECONNREFUSED;
    close(fd);
    if (!refused || std::chrono::steady_clock::now() >= until) {
      ADD_FAILURE() << "connect to 127.0.0.1:" << port << " failed";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

inline int accept_within(int lfd, std::chrono::milliseconds t) {
  pollfd p{lfd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(t.count())) <= 0) return -1;
  return accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
}

// Relays one connection to 127.0.0.1:target and keeps a copy of each direction,
// as a listener on the network would.
class Proxy {
 public:
  explicit Proxy(uint16_t target) {
    lfd_ = listen_loopback(&port_);
    thread_ = std::thread([this, target] { run(target); });
  }
  ~Proxy() {
    stop();
    close(lfd_);
  }
  uint16_t port() const { return port_; }
  // After the session: what the client sent and what the store sent.
  std::string up() {
    stop();
    return up_;
  }
  std::string down() {
    stop();
    return down_;
  }

 private:
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void run(uint16_t target) {
    int c = accept_within(lfd_, std::chrono::seconds(5));
    if (c < 0) return;
    int s = connect_loopback(target);
    char buf[65536];
    bool open_c = true, open_s = true;
    while (!stop_ && (open_c || open_s)) {
      pollfd p[2] = {{open_c ? c : -1, POLLIN, 0}, {open_s ? s : -1, POLLIN, 0}};
      if (poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!p[i].revents) continue;
        const ssize_t n = recv(p[i].fd, buf, sizeof(buf), 0);
        if (n <= 0) {
          shutdown(i == 0 ? s : c, SHUT_WR);
          (i == 0 ? open_c : open_s) = false;
          continue;
        }
        (i == 0 ? up_ : down_).append(buf, static_cast<size_t>(n));
        (void)!send(i == 0 ? s : c, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
    close(c);
    close(s);
  }
  int lfd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::string up_, down_;
};

}  // namespace
