// The one set of TCP socket helpers: the bootstrap store and its clients, and the
// socket path of net/ (net/sock/) use these, so that both connect, accept, send and
// receive alike and their errors read alike: "<operation> <peer>: <cause> (errno N)".
#pragma once
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace dccl::sock {

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

// A numeric "ip:port" or "[ip]:port" (no name lookup). False when malformed.
bool parse_hostport(const std::string& text, SockAddr* out);
// The numeric address of a sockaddr's bytes (as fi_getname returns them), or "".
std::string ip_of_bytes(const std::string& name);
// IPv4 address of interface `name`, else a non-link-local IPv6 one; "" if none.
std::string iface_address(const std::string& name);
// DCCL_SOCKET_IFNAME's check at init (and dccl-info's): an interface named that this
// host does not have raises dcclInvalidArgument; "" (none named) passes.
void check_socket_ifname(const std::string& name);

void set_nonblocking(int fd);
void set_nodelay(int fd);
// TCP keepalive probes after 10 s of silence, every 3 s, 3 unanswered end it:
// a peer whose host vanished (no FIN) is noticed within about 20 s.
void set_keepalive(int fd);
// The connection's TCP congestion control (TCP_CONGESTION): 0, or the errno the
// kernel refused it with (ENOENT: not in this kernel; EPERM: not in
// net.ipv4.tcp_allowed_congestion_control for an unprivileged process).
int set_congestion(int fd, const std::string& name);
// The congestion control a connection uses, "" when unknown.
std::string congestion(int fd);

// Milliseconds left until `deadline`, rounded up, for poll(); 0 when past.
int ms_until(Clock::time_point deadline);

// "<op> <peer>: <strerror> (errno N)", e.g. "connect to rank 3 (10.0.0.2:4001):
// Connection refused (errno 111)"; `peer` may be empty.
std::string error_text(const std::string& op, const std::string& peer, int err);
// Whether a failed connect is worth trying again (nobody listening yet, a lost SYN).
bool retryable_connect_error(int err);

// A non-blocking, close-on-exec TCP socket for `a`, with connect() started. Returns
// 0 (connected), EINPROGRESS (poll for POLLOUT, then connect_result), or the errno of
// socket()/connect(); *out holds the socket unless socket() failed.
int start_connect(const SockAddr& a, Fd* out);
// The outcome of a connect that was in progress once its socket is writable: 0 or an errno.
int connect_result(int fd);
// Connects to `a` by `deadline`, trying again with growing pauses (10 ms to 500 ms)
// while the error is retryable. Returns the connected socket (TCP_NODELAY set), or an
// empty Fd with *err the last cause (ETIMEDOUT when the deadline passed mid-attempt)
// and *attempts how many were made.
Fd connect_until(const SockAddr& a, Clock::time_point deadline, int* err, int* attempts);
// One waiting connection from `listener` (non-blocking, close-on-exec), its address in
// *from; -1 with errno set when none (EAGAIN) or on failure.
int accept(int listener, SockAddr* from);

// Waits until `fd` has `events` (POLLIN / POLLOUT) by `deadline`. Returns 0 when it
// has, ETIMEDOUT when the deadline passed, ECANCELED when `wake_fd` (>= 0, e.g. an
// eventfd) turned readable first, or poll's errno.
int wait(int fd, short events, Clock::time_point deadline, int wake_fd = -1);
// Sends [buf, buf+n) on a non-blocking socket by `deadline` (MSG_NOSIGNAL). Returns 0
// once every byte is with the kernel; else the cause as wait() gives it, or send's
// errno (EPIPE / ECONNRESET: the peer closed). *sent: bytes sent (also on failure).
int send_all(int fd, const void* buf, size_t n, Clock::time_point deadline, size_t* sent = nullptr,
             int wake_fd = -1);
// Receives up to n bytes (at least one) on a non-blocking socket by `deadline`.
// Returns the count; 0 when the peer closed; -cause as wait() gives it, or recv's errno.
long recv_some(int fd, void* buf, size_t n, Clock::time_point deadline, int wake_fd = -1);

}  // namespace dccl::sock
