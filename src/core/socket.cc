#include "core/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.hpp"

namespace dccl::sock {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errno_text(int err) { return std::string(strerror(err)) + " (errno " + std::to_string(err) + ")"; }

std::string host_of(const SockAddr& a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr, buf, sizeof(buf));
  } else if (a.ss.ss_family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&a.ss);
    inet_ntop(AF_INET6, &s6->sin6_addr, buf, sizeof(buf));
    if (s6->sin6_scope_id != 0) {
      char ifn[IF_NAMESIZE] = {0};
      std::string scope = if_indextoname(s6->sin6_scope_id, ifn) ? ifn : std::to_string(s6->sin6_scope_id);
      return std::string(buf) + "%" + scope;
    }
  } else {
    return "?";
  }
  return buf;
}

uint16_t port_of(const SockAddr& a) {
  if (a.ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_port);
  if (a.ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_port);
  return 0;
}

std::string addr_to_string(const SockAddr& a) {
  std::string h = host_of(a);
  if (a.ss.ss_family == AF_INET6) h = "[" + h + "]";
  return h + ":" + std::to_string(port_of(a));
}

bool is_wildcard(const SockAddr& a) {
  if (a.ss.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a.ss.ss_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr);
  return false;
}

bool resolve(const std::string& host, uint16_t port, SockAddr* out, std::string* why) {
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(h.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    *why = "cannot resolve '" + host + "': " + (rc == EAI_SYSTEM ? errno_text(errno) : gai_strerror(rc));
    return false;
  }
  const addrinfo* pick = res;
  for (const addrinfo* ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  std::memcpy(&out->ss, pick->ai_addr, pick->ai_addrlen);
  out->len = pick->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

void check_socket_ifname(const std::string& name) {
  if (!name.empty() && if_nametoindex(name.c_str()) == 0)
    core::raise(dcclInvalidArgument, "DCCL_SOCKET_IFNAME=" + name + ": no such network interface on this host");
}

std::string iface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string v4, v6;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || name != i->ifa_name) continue;
    SockAddr a;
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) {
      std::memcpy(&a.ss, i->ifa_addr, sizeof(sockaddr_in));
      v4 = host_of(a);
    } else if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      const auto* s6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;
      std::memcpy(&a.ss, i->ifa_addr, sizeof(sockaddr_in6));
      v6 = host_of(a);
    }
  }
  freeifaddrs(list);
  return v4.empty() ? v6 : v4;
}

bool parse_hostport(const std::string& text, SockAddr* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return false;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) return false;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  const long p = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p <= 0 || p > 65535) return false;
  *out = SockAddr{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(p));
    out->len = sizeof(sockaddr_in);
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(p));
    out->len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

std::string ip_of_bytes(const std::string& name) {
  SockAddr a;
  if (name.size() >= sizeof(sockaddr_in6)) {
    std::memcpy(&a.ss, name.data(), sizeof(sockaddr_in6));
    if (a.ss.ss_family == AF_INET6) return host_of(a);
  }
  if (name.size() >= sizeof(sockaddr_in)) {
    a = SockAddr{};
    std::memcpy(&a.ss, name.data(), sizeof(sockaddr_in));
    if (a.ss.ss_family == AF_INET) return host_of(a);
  }
  return "";
}

void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    core::raise(dcclSystemError, core::describe(-1, "socket", error_text("fcntl(O_NONBLOCK)", "", errno)));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // best effort
}

int set_congestion(int fd, const std::string& name) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0 ? 0
                                                                                                               : errno;
}

std::string congestion(int fd) {
  char name[32] = {};
  socklen_t len = sizeof(name) - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, strnlen(name, len));
}

void set_keepalive(int fd) {  // best effort
  int one = 1, idle = 10, intvl = 3, cnt = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int ms_until(Clock::time_point deadline) {
  auto now = Clock::now();
  if (now >= deadline) return 0;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
  long long ms = (us + 999) / 1000;
  return ms > 0x7fffffff ? 0x7fffffff : static_cast<int>(ms);
}

std::string error_text(const std::string& op, const std::string& peer, int err) {
  return op + (peer.empty() ? "" : " " + peer) + ": " + errno_text(err);
}

bool retryable_connect_error(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH || e == ECONNRESET ||
         e == ECONNABORTED || e == EAGAIN;
}

int start_connect(const SockAddr& a, Fd* out) {
  out->reset(::socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!*out) return errno;
  if (::connect(out->get(), a.sa(), a.len) == 0) return 0;
  return errno == EINTR ? EINPROGRESS : errno;
}

int connect_result(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

Fd connect_until(const SockAddr& a, Clock::time_point deadline, int* err, int* attempts) {
  auto pause = std::chrono::milliseconds(10);
  *err = ETIMEDOUT;
  *attempts = 0;
  while (Clock::now() < deadline) {
    ++*attempts;
    Fd s;
    int e = start_connect(a, &s);
    if (e == EINPROGRESS) {
      e = wait(s.get(), POLLOUT, deadline);
      if (e == 0) e = connect_result(s.get());
    }
    if (e == 0) {
      set_nodelay(s.get());
      return s;
    }
    *err = e;
    if (!retryable_connect_error(e)) return Fd();
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, left));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  return Fd();
}

int accept(int listener, SockAddr* from) {
  from->len = sizeof(from->ss);
  for (;;) {
    const int fd = ::accept4(listener, from->sa(), &from->len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

int wait(int fd, short events, Clock::time_point deadline, int wake_fd) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    // ms_until caps at ~24 days: a longer wait polls again until its deadline.
    const int n = ::poll(p, wake_fd >= 0 ? 2 : 1, ms_until(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (p[0].revents != 0) return 0;
    if (n > 0) return ECANCELED;
    if (Clock::now() >= deadline) return ETIMEDOUT;
  }
}

int send_all(int fd, const void* buf, size_t n, Clock::time_point deadline, size_t* sent, int wake_fd) {
  size_t off = 0;
  int rc = 0;
  while (off < n) {
    const ssize_t k = ::send(fd, static_cast<const char*>(buf) + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      off += static_cast<size_t>(k);
      continue;
    }
    const int e = k < 0 ? errno : EIO;
    if (e == EINTR) continue;
    if (e != EAGAIN && e != EWOULDBLOCK) {
      rc = e;
      break;
    }
    rc = wait(fd, POLLOUT, deadline, wake_fd);
    if (rc != 0) break;
  }
  if (sent) *sent = off;
  return rc;
}

long recv_some(int fd, void* buf, size_t n, Clock::time_point deadline, int wake_fd) {
  for (;;) {
    const ssize_t k = ::recv(fd, buf, n, MSG_DONTWAIT);
    if (k >= 0) return static_cast<long>(k);
    const int e = errno;
    if (e == EINTR) continue;
    if (e != EAGAIN && e != EWOULDBLOCK) return -e;
    const int w = wait(fd, POLLIN, deadline, wake_fd);
    if (w != 0) return -w;
  }
}

}  // namespace dccl::sock
