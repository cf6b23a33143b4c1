#include "plugin/nccl/handshake.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap/bind_address.hpp"
#include "core/socket.hpp"
#include "core/error.hpp"
#include "core/hmac.hpp"

namespace dccl::plugin {

namespace sock = dccl::sock;

namespace {

constexpr char kMagic[8] = {'d', 'c', 'c', 'l', 'n', 'e', 't', '1'};
constexpr uint32_t kMaxBlob = 1 << 20;

[[noreturn]] void fail(dcclResult_t code, const std::string& op, const std::string& cause) {
  core::raise(code, "NET/dccl " + op + ": " + cause);
}

// Waits for fd to become readable (or writable) by `until`.
void await(int fd, short events, Clock::time_point until, const std::string& op) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = sock::ms_until(until);
    const int rc = poll(&p, 1, ms);
    if (rc > 0) return;
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) fail(dcclSystemError, op, "poll: " + sock::errno_text(errno));
    fail(dcclTimeout, op, "no answer from the peer within the timeout (DCCL_TIMEOUT_S)");
  }
}

void write_all(int fd, const void* p, size_t n, Clock::time_point until, const std::string& op) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      await(fd, POLLOUT, until, op);
    } else {
      fail(dcclRemoteError, op, "the peer closed the connection: " + sock::errno_text(errno));
    }
  }
}

void read_all(int fd, void* p, size_t n, Clock::time_point until, const std::string& op) {
  char* c = static_cast<char*>(p);
  while (n) {
    const ssize_t r = recv(fd, c, n, MSG_DONTWAIT);
    if (r > 0) {
      c += r;
      n -= static_cast<size_t>(r);
    } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      await(fd, POLLIN, until, op);
    } else {
      fail(dcclRemoteError, op, r == 0 ? "the peer closed the connection" : "recv: " + sock::errno_text(errno));
    }
  }
}

core::Digest seal(const Secret& secret, bool from_dialer, const std::string& blob) {
  core::Hmac h(secret.data(), secret.size());
  h.update(from_dialer ? "dccl-net dialer" : "dccl-net listener");
  h.update(blob);
  return h.finish();
}

}  // namespace

Listener::Listener(int dev, const Secret& secret) {
  const std::string host = boot::default_bind_host();
  sock::SockAddr a;
  std::string why;
  if (!sock::resolve(host, 0, &a, &why)) fail(dcclSystemError, "listen", "address " + host + ": " + why);
  fd_ = socket(a.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) fail(dcclSystemError, "listen", "socket: " + sock::errno_text(errno));
  if (bind(fd_, a.sa(), a.len) != 0 || ::listen(fd_, 16) != 0) {
    const int e = errno;
    close(fd_);
    fail(dcclSystemError, "listen", "bind/listen on " + host + ": " + sock::errno_text(e));
  }
  sock::SockAddr bound;
  bound.len = sizeof(bound.ss);
  getsockname(fd_, bound.sa(), &bound.len);
  memcpy(handle_.magic, kMagic, sizeof(kMagic));
  handle_.dev = dev;
  handle_.port = sock::port_of(bound);
  snprintf(handle_.ip, sizeof(handle_.ip), "%s", sock::host_of(bound).c_str());
  memcpy(handle_.secret, secret.data(), secret.size());
}

Listener::~Listener() {
  if (fd_ >= 0) close(fd_);
}

int Listener::try_accept() {
  const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (c >= 0) return c;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return -1;
  fail(dcclSystemError, "accept", "accept on " + std::string(handle_.ip) + ": " + sock::errno_text(errno));
}

Handle parse_handle(const void* bytes) {
  if (!bytes) fail(dcclInvalidArgument, "connect", "the handle is null");
  Handle h;
  memcpy(&h, bytes, sizeof(h));
  if (memcmp(h.magic, kMagic, sizeof(kMagic)) != 0)
    fail(dcclInvalidArgument, "connect", "the handle was not made by this plugin's listen()");
  h.ip[sizeof(h.ip) - 1] = 0;
  return h;
}

int dial(const Handle& h, Clock::time_point until) {
  const std::string op = std::string("connect to ") + h.ip + ":" + std::to_string(h.port);
  sock::SockAddr a;
  std::string why;
  if (!sock::resolve(h.ip, h.port, &a, &why)) fail(dcclInvalidArgument, op, why);
  for (;;) {
    sock::Fd fd(socket(a.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) fail(dcclSystemError, op, "socket: " + sock::errno_text(errno));
    int rc = ::connect(fd.get(), a.sa(), a.len);
    if (rc != 0 && errno == EINPROGRESS) {
      await(fd.get(), POLLOUT, until, op);
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err ? -1 : 0;
      errno = err;
    }
    if (rc == 0) {
      sock::set_nodelay(fd.get());
      return fd.release();
    }
    if (errno != ECONNREFUSED || sock::ms_until(until) == 0) fail(dcclRemoteError, op, sock::errno_text(errno));
    usleep(10000);  // the listener may not be listening yet; retry until the deadline
  }
}

std::string swap_blobs(int fd, const std::string& mine, const Secret& secret, bool dialer, Clock::time_point until) {
  const std::string op = dialer ? "connect" : "accept";
  auto put = [&] {
    const uint32_t n = static_cast<uint32_t>(mine.size());
    const core::Digest d = seal(secret, dialer, mine);
    write_all(fd, &n, sizeof(n), until, op);
    write_all(fd, mine.data(), n, until, op);
    write_all(fd, d.data(), d.size(), until, op);
  };
  auto get = [&] {
    uint32_t n = 0;
    read_all(fd, &n, sizeof(n), until, op);
    if (n > kMaxBlob) fail(dcclRemoteError, op, "the peer announced a " + std::to_string(n) + "-byte blob");
    std::string blob(n, '\0');
    read_all(fd, blob.data(), n, until, op);
    core::Digest d{};
    read_all(fd, d.data(), d.size(), until, op);
    if (d != seal(secret, !dialer, blob))
      fail(dcclRemoteError, op, "the peer's blob is not sealed with this handle's secret (not the handle's holder)");
    return blob;
  };
  if (dialer) {
    put();
    return get();
  }
  std::string peer = get();
  put();
  return peer;
}

}  // namespace dccl::plugin
