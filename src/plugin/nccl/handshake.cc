#include "plugin/nccl/handshake.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <cstring>
#include <thread>

#include "bootstrap/bind_address.hpp"
#include "core/socket.hpp"
#include "core/error.hpp"
#include "core/hmac.hpp"
#include "core/log.hpp"
#include "plugin/nccl/nccl_net.h"

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

Listener::Listener(int dev, const Secret& secret, const std::string& op) : op_(op) {
  std::string host;
  try {
    host = boot::default_bind_host();
  } catch (const core::Error& e) {
    fail(e.code(), op, e.what());
  }
  sock::SockAddr a;
  std::string why;
  if (!sock::resolve(host, 0, &a, &why)) fail(dcclSystemError, op, "address " + host + ": " + why);
  fd_ = socket(a.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) fail(dcclSystemError, op, "socket: " + sock::errno_text(errno));
  if (bind(fd_, a.sa(), a.len) != 0 || ::listen(fd_, 16) != 0) {
    const int e = errno;
    close(fd_);
    fail(dcclSystemError, op, "bind/listen on " + host + ": " + sock::errno_text(e));
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

int Listener::try_accept(std::string* from) {
  sock::SockAddr peer;
  peer.len = sizeof(peer.ss);
  const int c = accept4(fd_, peer.sa(), &peer.len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (c >= 0) {
    if (from) *from = sock::host_of(peer) + ":" + std::to_string(sock::port_of(peer));
    return c;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return -1;
  fail(dcclSystemError, op_, "accept on " + std::string(handle_.ip) + ": " + sock::errno_text(errno));
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

int dial(const Handle& h, Clock::time_point until, const std::string& op_in) {
  const std::string op = op_in + " to " + h.ip + ":" + std::to_string(h.port);
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

void send_blob(int fd, const std::string& blob, const Secret& secret, bool from_dialer, Clock::time_point until,
               const std::string& op) {
  const uint32_t n = static_cast<uint32_t>(blob.size());
  const core::Digest d = seal(secret, from_dialer, blob);
  write_all(fd, &n, sizeof(n), until, op);
  write_all(fd, blob.data(), n, until, op);
  write_all(fd, d.data(), d.size(), until, op);
}

std::string recv_blob(int fd, const Secret& secret, bool from_dialer, Clock::time_point until, const std::string& op) {
  uint32_t n = 0;
  read_all(fd, &n, sizeof(n), until, op);
  if (n > kMaxBlob)
    fail(dcclRemoteError, op, "the peer announced a " + std::to_string(n) + "-byte blob (at most " +
                                  std::to_string(kMaxBlob) + "): not this plugin's handshake");
  std::string blob(n, '\0');
  read_all(fd, blob.data(), n, until, op);
  core::Digest d{};
  read_all(fd, d.data(), d.size(), until, op);
  if (d != seal(secret, from_dialer, blob))
    fail(dcclRemoteError, op, "the peer's blob is not sealed with this handle's secret (not the handle's holder)");
  return blob;
}

// -----------------------------------------------------------------------------
// Connection setup on threads (handshake.hpp).
// At most this many handshakes run at once on one listener; later connections
// wait in the kernel's backlog until one ends.
constexpr size_t kMaxPendingHandshakes = 16;

struct Setup {
  std::thread th;
  std::atomic<bool> done{false};
  std::atomic<bool> authenticated{false};  // the dialer proved it holds the handle
  std::unique_ptr<Link> link;
  dcclResult_t code = dcclSuccess;
  std::string error;
  int fd = -1;       // the handshake's connection: closed here, after the thread ended
  std::string from;  // the dialer's address (accept's side)
  ~Setup() {
    if (th.joinable()) th.join();
    if (fd >= 0) close(fd);
  }
};

namespace {

template <class F>
void run(Setup* s, const char* op, const Device* d, F&& f) {
  try {
    f();
  } catch (const core::Error& e) {
    s->code = e.code();
    s->error = e.what();
  } catch (const std::exception& e) {
    s->code = dcclInternalError;
    s->error = std::string("NET/dccl ") + op + " on " + d->name + ": " + e.what();
  }
  s->done.store(true, std::memory_order_release);
}

void run_dial(Setup* s, const Device* d, Handle h) {
  run(s, "connect", d, [&] {
    Secret secret;
    memcpy(secret.data(), h.secret, secret.size());
    auto link = std::make_unique<Link>(*d, 1, secret);
    const auto until = Clock::now() + link->timeout();
    const std::string op = "connect on " + d->name;
    s->fd = dial(h, until, op);
    const std::string to = op + " to " + h.ip + ":" + std::to_string(h.port);
    send_blob(s->fd, link->blob(), secret, true, until, to);
    const std::string peer = recv_blob(s->fd, secret, false, until, to);
    link->connect(peer, until);
    s->link = std::move(link);
  });
}

// The dialer's blob first: nothing is made for a dialer that is not the handle's holder.
void run_accept(Setup* s, const Device* d, Secret secret, Clock::time_point until) {
  run(s, "accept", d, [&] {
    const std::string op = "accept on " + d->name + " from " + s->from;
    const std::string peer = recv_blob(s->fd, secret, true, until, op);
    s->authenticated.store(true, std::memory_order_release);
    auto link = std::make_unique<Link>(*d, 0, secret);
    send_blob(s->fd, link->blob(), secret, false, until, op);
    link->connect(peer, until);
    s->link = std::move(link);
  });
}

core::LogLimiter g_dropped_log;  // a flood of stray connections is not a flood of lines

}  // namespace

Setup* start_dial(const Device& dev, const Handle& h) {
  auto s = std::make_unique<Setup>();
  s->th = std::thread(run_dial, s.get(), &dev, h);
  return s.release();
}

std::unique_ptr<Link> finish_dial(Setup*& s) {
  if (!s->done.load(std::memory_order_acquire)) return nullptr;
  std::unique_ptr<Setup> own(s);
  s = nullptr;
  own->th.join();
  if (!own->link) core::raise(own->code, own->error);
  return std::move(own->link);
}

Acceptor::Acceptor(const Device& dev, int index, const Secret& secret, SayFn say)
    : dev_(dev), secret_(secret), say_(say), listener_(index, secret, "listen on " + dev.name) {}

Acceptor::~Acceptor() {
  for (auto& s : pending_)
    if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);  // a handshake waiting on its dialer ends now
  pending_.clear();                              // joins
}

std::unique_ptr<Link> Acceptor::poll() {
  const auto now = Clock::now();
  if (!started_) {
    started_ = true;
    deadline_ = now + setup_timeout();
  }
  while (pending_.size() < kMaxPendingHandshakes) {
    std::string from;
    const int fd = listener_.try_accept(&from);
    if (fd < 0) break;
    auto s = std::make_unique<Setup>();
    s->fd = fd;
    s->from = from;
    s->th = std::thread(run_accept, s.get(), &dev_, secret_, now + setup_timeout());
    pending_.push_back(std::move(s));
  }
  bool holder = false;  // a handshake past authentication is still running
  for (size_t i = 0; i < pending_.size();) {
    Setup* s = pending_[i].get();
    if (!s->done.load(std::memory_order_acquire)) {
      holder = holder || s->authenticated.load(std::memory_order_acquire);
      ++i;
      continue;
    }
    std::unique_ptr<Setup> own = std::move(pending_[i]);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    own->th.join();
    if (own->link) {
      started_ = false;  // a later accept on this listener waits a timeout of its own
      return std::move(own->link);
    }
    if (own->authenticated.load(std::memory_order_acquire)) core::raise(own->code, own->error);
    ++dropped_;
    uint64_t held = 0;
    if (g_dropped_log.allow(&held))
      say_(kNcclLogWarn, own->error + "; dropped that connection, still waiting for the handle's holder" +
                             (held ? " (" + std::to_string(held) + " similar lines suppressed)" : ""));
  }
  if (!holder && Clock::now() > deadline_)
    core::raise(dcclTimeout, "NET/dccl accept on " + dev_.name + ": no peer holding this listen handle connected within " +
                                 timeout_text() +
                                 (dropped_ ? "; " + std::to_string(dropped_) +
                                                 " connections that were not the holder's were dropped"
                                           : ""));
  return nullptr;
}

}  // namespace dccl::plugin
