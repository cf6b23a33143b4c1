// Store server plumbing: one thread, non-blocking sockets, poll(). An eventfd
// wakes the thread for shutdown; the destructor then drains briefly and joins.
// A connection closed for any reason but that shutdown fires its lease.
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "bootstrap/store_server.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::boot::detail {

void Server::run() {
  try {
    loop();
  } catch (const std::exception& e) {
    DCCL_WARN("%s: server thread stopped: %s", where_.c_str(), e.what());
  }
  std::vector<uint64_t> ids;
  for (auto& [id, c] : conns_) ids.push_back(id);
  for (uint64_t id : ids) close_conn(id, /*shutdown=*/!conns_[id].dead);  // dead: closed by the peer or a fault
}

void Server::loop() {
  std::vector<pollfd> pfds;
  std::vector<uint64_t> ids;
  for (;;) {
    auto now = Clock::now();
    pfds.clear();
    ids.clear();
    pfds.push_back({wake_.get(), POLLIN, 0});
    const bool poll_listen = listen_ && now >= listen_pause_until_;
    if (poll_listen) pfds.push_back({listen_.get(), POLLIN, 0});
    const size_t first_conn = pfds.size();
    int timeout = -1;
    for (auto& [id, c] : conns_) {
      short ev = POLLIN;
      if (c.out_off < c.out.size()) ev |= POLLOUT;
      pfds.push_back({c.fd.get(), ev, 0});
      ids.push_back(id);
      if (!c.authed) {
        int t = sock::ms_until(c.hello_deadline);
        if (timeout < 0 || t < timeout) timeout = t;
      }
    }
    if (listen_ && !poll_listen) timeout = timeout < 0 ? 100 : std::min(timeout, 100);
    timeout = timeout < 0 ? 1000 : std::min(timeout, 1000);  // reports suppressed warnings within a second
    if (draining_) timeout = timeout < 0 ? 20 : std::min(timeout, 20);

    int n = ::poll(pfds.data(), pfds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      DCCL_WARN("%s: poll failed: %s", where_.c_str(), sock::errno_text(errno).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (pfds[0].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof(v));
      if (!draining_) {
        draining_ = true;
        drain_start_ = Clock::now();
        listen_.reset();  // no new connections
      }
    }
    // Existing connections first, so that closes are seen before the limit is checked.
    for (size_t i = first_conn; i < pfds.size(); ++i) {
      auto it = conns_.find(ids[i - first_conn]);
      if (it == conns_.end() || it->second.dead) continue;
      const short re = pfds[i].revents;
      if (re & (POLLIN | POLLHUP | POLLERR)) read_conn(it->first, it->second);
      if ((re & POLLOUT) && !it->second.dead) flush(it->second);
    }
    settle(Clock::now());
    if (poll_listen && listen_ && (pfds[1].revents & POLLIN)) {
      accept_all();
      settle(Clock::now());
    }
    if (const uint64_t n = unauth_log_.take_suppressed())
      DCCL_WARN("%s: %llu more warnings about unauthenticated connections suppressed", where_.c_str(),
                static_cast<unsigned long long>(n));
    if (draining_ && drained(Clock::now())) return;
  }
}

void Server::settle(Clock::time_point now) {
  for (uint64_t id : dirty_) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    it->second.dirty = false;
    if (!it->second.dead) flush(it->second);
  }
  dirty_.clear();
  std::vector<uint64_t> ids;
  for (auto& [id, c] : conns_) {
    if (!c.authed && !c.dead && now >= c.hello_deadline)
      kill(c, "no HELLO within " + std::to_string(lim_.hello_timeout.count()) + " ms", true);
    if (c.dead) ids.push_back(id);
  }
  for (uint64_t id : ids) close_conn(id);
  if (dropped_ > 0) {
    DCCL_WARN_LIMITED(unauth_log_,
                      "%s: closed %llu unauthenticated connection(s), the oldest first, to admit new ones: "
                      "more than %zu connections have not presented HELLO (a flood, or a port scan?)",
                      where_.c_str(), static_cast<unsigned long long>(dropped_), lim_.max_pending);
    dropped_ = 0;
  }
}

// Ends the drain when nobody is connected, when every connection has been idle
// for 100 ms (no parked GET but a failure watcher's, nothing to send or parse),
// or at drain_timeout.
bool Server::drained(Clock::time_point now) {
  if (conns_.empty() || now - drain_start_ >= lim_.drain_timeout) return true;
  for (auto& [id, c] : conns_)
    if (!c.idle() && !(c.authed && !c.claims && c.out_off == c.out.size())) {  // a watcher's GET waits for ever
      idle_seen_ = false;
      return false;
    }
  if (!idle_seen_) {
    idle_seen_ = true;
    idle_since_ = now;
  }
  return now - idle_since_ >= std::chrono::milliseconds(100);
}

// Accepts what is waiting (a bounded number per turn) and reads each new
// connection at once: a rank's HELLO is usually there already, so a rank is
// authenticated before any flood of silent connections can push it out.
void Server::accept_all() {
  for (int n = 0; n < 256; ++n) {
    sock::SockAddr a;
    int fd = sock::accept(listen_.get(), &a);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return;
      if ((errno == EMFILE || errno == ENFILE) && drop_oldest_pending()) continue;  // make room
      DCCL_WARN_LIMITED(unauth_log_, "%s: accept failed: %s; pausing accepts for 100 ms", where_.c_str(),
                        sock::errno_text(errno).c_str());
      listen_pause_until_ = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    sock::set_nodelay(fd);
    sock::set_keepalive(fd);
    const uint64_t cid = next_conn_++;
    Conn& c = conns_[cid];
    c.fd = sock::Fd(fd);
    c.peer = sock::addr_to_string(a);
    c.since = Clock::now();
    c.hello_deadline = c.since + lim_.hello_timeout;
    c.pending = true;
    ++npending_;
    pending_.push_back(cid);
    DCCL_TRACE("%s: connection from %s", where_.c_str(), c.peer.c_str());
    c.nonce = wire::fresh_nonce();  // the challenge, answered by HELLO's proof
    wire::append_challenge(c.out, c.nonce);
    flush(c);
    read_conn(cid, c);
    if (c.dead) close_conn(cid);
    enforce_pending_cap();
  }
}

void Server::enforce_pending_cap() {
  while (npending_ > lim_.max_pending && drop_oldest_pending()) {
  }
}

bool Server::drop_oldest_pending() {
  while (!pending_.empty()) {
    const uint64_t id = pending_.front();
    pending_.pop_front();
    auto it = conns_.find(id);
    if (it == conns_.end() || !it->second.pending) continue;  // gone, or authenticated since
    kill(it->second, "dropped: the oldest of more than " + std::to_string(lim_.max_pending) +
                         " connections waiting to present HELLO", false);
    close_conn(id);
    ++dropped_;
    return true;
  }
  return false;
}

void Server::read_conn(uint64_t cid, Conn& c) {
  size_t total = 0;
  while (total < (size_t{1} << 20) && !c.dead) {
    ssize_t n = ::recv(c.fd.get(), buf_.data(), buf_.size(), 0);
    if (n > 0) {
      c.in.append(buf_.data(), static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      process(cid, c);
    } else if (n == 0) {
      if (c.in_off < c.in.size())
        kill(c, "peer closed the connection in the middle of a frame (" +
                    std::to_string(c.in.size() - c.in_off) + " bytes pending)", true);
      else
        kill(c, "peer closed the connection", false);
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else if (errno == ECONNRESET && c.in_off == c.in.size()) {
      // A peer that exits with a reply still unread (a rank's failure watcher, whose
      // GET is parked until the job ends) resets instead of closing: between frames
      // that is a close, not a fault worth a warning.
      kill(c, "peer reset the connection between frames", false);
    } else {
      kill(c, "recv: " + sock::errno_text(errno), c.authed);
    }
  }
}

void Server::flush(Conn& c) {
  while (c.out_off < c.out.size() && !c.dead) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      kill(c, "send: " + sock::errno_text(errno), c.authed);
    }
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  } else if (c.out_off > (size_t{1} << 20) && 2 * c.out_off > c.out.size()) {
    c.out.erase(0, c.out_off);
    c.out_off = 0;
  }
}

void Server::close_conn(uint64_t cid, bool shutdown) {
  auto it = conns_.find(cid);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  for (auto& [key, cnt] : c.parked_keys) {
    auto w = waiting_.find(key);
    if (w == waiting_.end()) continue;
    std::erase_if(w->second, [cid](const Waiter& x) { return x.conn == cid; });
    if (w->second.empty()) waiting_.erase(w);
  }
  if (c.dead && c.warn && c.authed)
    DCCL_WARN_LIMITED(log_, "%s: closing connection from %s: %s", where_.c_str(), who(c).c_str(), c.why.c_str());
  else if (c.dead && c.warn)
    DCCL_WARN_LIMITED(unauth_log_, "%s: closing unauthenticated connection from %s: %s", where_.c_str(),
                      c.peer.c_str(), c.why.c_str());
  else
    DCCL_TRACE("%s: closing connection from %s: %s", where_.c_str(), who(c).c_str(),
               c.dead ? c.why.c_str() : "store shutting down");
  if (c.leased) {
    lease_bytes_ -= c.lease_bytes();  // the reservation now becomes the value, if it is stored
    c.leased = false;
    if (!shutdown) fire_lease(c);
  }
  if (c.pending) --npending_;
  if (c.authed) {
    --nauthed_;
    release_claim(cid, c);
  }
  conns_.erase(it);
  if (pending_.size() > 4 * (npending_ + 16)) {  // drop ids of connections long gone
    std::deque<uint64_t> keep;
    for (uint64_t id : pending_) {
      auto p = conns_.find(id);
      if (p != conns_.end() && p->second.pending) keep.push_back(id);
    }
    pending_.swap(keep);
  }
}


}  // namespace dccl::boot::detail
