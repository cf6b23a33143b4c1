// Small socket helpers shared by the store server and the bootstrap client.
#pragma once
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace dccl::boot::sock {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&ss); }
};

std::string errno_text(int err);
// "1.2.3.4:5" or "[::1]:5".
std::string addr_to_string(const SockAddr& a);
std::string host_of(const SockAddr& a);  // numeric host only
uint16_t port_of(const SockAddr& a);
bool is_wildcard(const SockAddr& a);
// Numeric addresses are parsed directly; names go through getaddrinfo (IPv4
// preferred). Returns false and sets *why on failure.
bool resolve(const std::string& host, uint16_t port, SockAddr* out, std::string* why);

// The address the store binds when no host is given: the IPv4 (else IPv6)
// address of DCCL_SOCKET_IFNAME if set (throws dcclInvalidArgument if that
// interface has none), else of the default-route interface, else 127.0.0.1.
std::string default_bind_host();

void set_nonblocking(int fd);
void set_nodelay(int fd);
// TCP keepalive probes after 10 s of silence, every 3 s, 3 unanswered end it:
// a peer whose host vanished (no FIN) is noticed within about 20 s.
void set_keepalive(int fd);

// Milliseconds left until `deadline`, rounded up, for poll(); 0 when past.
int ms_until(Clock::time_point deadline);

}  // namespace dccl::boot::sock
