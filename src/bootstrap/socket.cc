#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::boot::sock {

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

namespace {

// IPv4 address of interface `name`, else a non-link-local IPv6 one; "" if none.
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

// Interface of the default route with the lowest metric, from /proc/net/route.
std::string default_route_iface() {
  std::ifstream f("/proc/net/route");
  std::string line, best;
  long best_metric = -1;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string iface, dest, gw, flags, refcnt, use, metric, mask;
    if (!(s >> iface >> dest >> gw >> flags >> refcnt >> use >> metric >> mask)) continue;
    if (dest != "00000000" || mask != "00000000") continue;
    if ((std::strtoul(flags.c_str(), nullptr, 16) & 0x1) == 0) continue;  // RTF_UP
    long m = std::strtol(metric.c_str(), nullptr, 10);
    if (best_metric < 0 || m < best_metric) {
      best = iface;
      best_metric = m;
    }
  }
  return best;
}

}  // namespace

std::string default_bind_host() {
  const std::string ifname_text = core::setting_text("DCCL_SOCKET_IFNAME");
  const char* ifname = ifname_text.c_str();
  if (*ifname) {
    std::string a = iface_address(ifname);
    if (a.empty())
      core::raise(dcclInvalidArgument,
                  core::describe(-1, "choose bootstrap address",
                                 std::string("DCCL_SOCKET_IFNAME=") + ifname +
                                     ": no such interface, or it has no usable IP address"));
    DCCL_INFO("bootstrap: store address %s from DCCL_SOCKET_IFNAME=%s", a.c_str(), ifname);
    return a;
  }
  std::string iface = default_route_iface();
  if (!iface.empty()) {
    std::string a = iface_address(iface);
    if (!a.empty()) {
      DCCL_INFO("bootstrap: store address %s of default-route interface %s", a.c_str(), iface.c_str());
      return a;
    }
  }
  DCCL_INFO("bootstrap: no default route with an address; the store uses 127.0.0.1 (set "
            "DCCL_SOCKET_IFNAME to reach other hosts)");
  return "127.0.0.1";
}

void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    core::raise(dcclSystemError, core::describe(-1, "bootstrap socket", "fcntl(O_NONBLOCK): " + errno_text(errno)));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // best effort
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

}  // namespace dccl::boot::sock
