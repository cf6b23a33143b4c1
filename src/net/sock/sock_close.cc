// SockPath's close (net/sock/sock_path.hpp): every connection is handed over whole
// before its socket goes.
//
// A send completes once the kernel holds its bytes, not once the peer has them: a
// rank that closes right after its last send completed may still have that
// message's tail in its kernel. close() then sends it and the end of stream after
// it, unless data from the peer lies unread: then the kernel resets the connection
// instead, and whatever the peer's kernel had not yet acknowledged is lost (what it
// had is still read, then the reset). So, for each connection, within the timeout:
//  1. what is still queued is written (the requests are not touched: the caller
//     gave them up when it destroyed the path), then an end frame (spray::kEnd):
//     the receiver tells a flow closed so from one that was lost, and waits for the
//     pair's other flows, which may still hold the rest of what was sent, instead
//     of failing the pair at the first flow that ends;
//  2. shutdown(SHUT_WR): the end of stream follows the last byte;
//  3. what arrives is read and dropped (no receive will take it), so that the
//     socket holds nothing unread, until the peer's kernel acknowledged every byte
//     (SIOCOUTQ 0), or the peer closed its side or the connection failed;
//  4. close().
// Step 3 does not wait for the peer to read, only for its kernel to take the bytes
// (it waits for the peer's reading only when the peer's receive buffer is full),
// so two ranks closing toward each other never wait on one another.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "core/log.hpp"
#include "net/sock/sock_path.hpp"
#include "net/sock/spray.hpp"

namespace dccl::net {

namespace {

using Clock = std::chrono::steady_clock;

// Reads and drops what the peer sent. false: the peer closed its side or the
// connection failed (nothing more to wait for).
bool drain(int fd) {
  char scratch[16384];
  for (;;) {
    const ssize_t r = recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT);
    if (r > 0) continue;
    if (r == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

}  // namespace

void SockPath::close_gracefully() {
  std::lock_guard<std::mutex> lk(mu_);
  const auto until = Clock::now() + timeout_;
  std::vector<Conn*> open;
  for (auto& c : conns_) {
    if (c->fd < 0) continue;
    if (c->dead.empty()) {
      Tx end{nullptr, {}, nullptr, 0, 0, 0};
      put_header(end.hdr, 0, spray::kEnd);
      c->txq.push_back(end);
    }
    open.push_back(c.get());
  }
  while (!open.empty()) {
    std::vector<pollfd> fds;
    for (size_t i = 0; i < open.size();) {
      Conn& c = *open[i];
      bool done = !c.dead.empty();  // failed, or the peer closed: nothing is handed over any more
      if (!done && !c.txq.empty()) done = !write_locked(c, false);
      if (!done && c.txq.empty()) {
        if (!c.shut) {
          shutdown(c.fd, SHUT_WR);
          c.shut = true;
        }
        done = !drain(c.fd) || unacked_bytes(c.fd) == 0;
      }
      if (done) {
        close(c.fd);
        c.fd = -1;
        open[i] = open.back();
        open.pop_back();
        continue;
      }
      fds.push_back(pollfd{c.fd, static_cast<short>(POLLIN | (c.txq.empty() ? 0 : POLLOUT)), 0});
      ++i;
    }
    if (open.empty()) break;
    if (Clock::now() >= until) {
      for (Conn* c : open) {
        DCCL_WARN("rank %d: socket path: closing the connection to rank %d after %lld ms with %zu bytes the peer "
                  "did not take and %zu messages not written",
                  rank_, c->peer, static_cast<long long>(timeout_.count()), unacked_bytes(c->fd), c->txq.size());
        close(c->fd);
        c->fd = -1;
      }
      break;
    }
    // An acknowledgement wakes no poll: short naps between the checks.
    const timespec nap{0, 1000 * 1000};
    ppoll(fds.data(), fds.size(), &nap, nullptr);
  }
}

}  // namespace dccl::net
