// SockPath's data path: tagged messages over one TCP connection per pair
// (net/sock/sock_path.hpp).
#include "net/sock/sock_path.hpp"

#include <algorithm>

#include <linux/sockios.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/socket.hpp"
#include "net/sock/spray.hpp"
#include "net/transport.hpp"

namespace dccl::net {

void put_header(char* h, uint64_t a, uint64_t b) {
  memcpy(h, &a, 8);
  memcpy(h + 8, &b, 8);
}

size_t unacked_bytes(int fd) {
  int n = 0;
  return fd >= 0 && ioctl(fd, SIOCOUTQ, &n) == 0 && n > 0 ? static_cast<size_t>(n) : 0;
}

namespace {

// Payloads at least this long are read straight into their buffer.
constexpr size_t kDirectReadBytes = 4096;

// Whether a message of msg_len bytes may complete a receive posted for posted_len:
// the same length, or at most it when the receive takes up to its length.
bool fits(const Request* req, size_t posted_len, size_t msg_len) {
  return msg_len == posted_len || (req->up_to && msg_len < posted_len);
}

// Whether a message (msg_tag, msg_len) is the one a send/recv receive of `tag` waits
// for, with another length (net::has_size_mark: its size mark or its length differs).
bool size_clash(const Request* req, uint64_t tag, size_t posted_len, uint64_t msg_tag, size_t msg_len) {
  return has_size_mark(tag) && (tag | kSizeMarkBits) == (msg_tag | kSizeMarkBits) &&
         !(tag == msg_tag && fits(req, posted_len, msg_len));
}

std::string clash_text(int peer, size_t sent, size_t expected) {
  return "count mismatch: rank " + std::to_string(peer) + " sent " + std::to_string(sent) +
         " bytes for it (this rank expects " + std::to_string(expected) + " bytes)";
}

void complete(Request* req, size_t bytes) {
  req->bytes.store(bytes, std::memory_order_relaxed);
  req->parts_done();
}

void fail(Request* req, const std::string& why, bool calls_differ = false) {
  req->fail(why, calls_differ);
  req->parts_done();
}

}  // namespace

uint64_t SockPath::limit(int peer) const {
  const Conn* c = conn_of(peer);
  return c ? c->limit : 0;
}

SockPath::Conn* SockPath::conn_of(int peer) const {
  if (peer < 0 || static_cast<size_t>(peer) >= by_peer_.size()) return nullptr;
  return by_peer_[static_cast<size_t>(peer)];
}

void SockPath::post(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req) {
  Conn* c = conn_of(peer);
  if (!c)
    core::raise(dcclInternalError,
                core::describe(rank_, send ? "isend" : "irecv", "rank " + std::to_string(peer) + " is not on the socket path"));
  req->pending_parts.store(1, std::memory_order_release);
  std::lock_guard<std::mutex> lk(mu_);
  if (!c->dead.empty() && send) return fail(req, c->dead);
  if (send && c == self_.get()) return send_self_locked(*c, static_cast<const char*>(buf), len, tag, req);
  if (send && c->flows.size() > 1 && len >= spray::kSprayMinBytes)
    return post_spray_locked(*c, static_cast<const char*>(buf), len, tag, req);
  if (send) {
    Tx t{req, {}, static_cast<const char*>(buf), len, 0, len};
    put_header(t.hdr, tag, len);
    c->txq.push_back(t);
    c->tx_bytes += len;
    if (c->txq.size() == 1) write_locked(*c);
    return;
  }
  char* dst = static_cast<char*>(buf);
  // An unexpected message with this tag and length, complete or still arriving?
  for (auto it = c->unexpected.begin(); it != c->unexpected.end(); ++it) {
    if (size_clash(req, tag, len, it->tag, it->len)) return fail(req, clash_text(c->peer, it->len, len), true);
    if (it->tag != tag || !fits(req, len, it->len)) continue;
    if (!it->complete) {
      // Still arriving (only the message being read can be): what came so far moves
      // to the receive's buffer and the rest is read straight into it.
      if (c->filling != &*it) {
        // A sprayed message: its chunks go on into the unexpected buffer, copied to
        // the receive's once every byte arrived.
        if (!take_arriving_locked(*c, *it, req, dst)) continue;
        drop_unexpected_locked(*c, it);
        return;
      }
      if (c->got) memcpy(dst, it->data.p.get(), c->got);
      c->filling = nullptr;
      c->req = req;
      c->dst = dst;
      drop_unexpected_locked(*c, it);
      return;
    }
    const size_t got = it->len;
    if (got) memcpy(dst, it->data.p.get(), got);
    drop_unexpected_locked(*c, it);
    return complete(req, got);
  }
  if (!c->dead.empty()) return fail(req, c->dead);  // what arrived before the end was looked at first
  if (c->held) return release_held_locked(*c, req, dst, tag, len);
  c->posted.push_back(Posted{req, dst, len, tag});
}

void SockPath::send_self_locked(Conn& c, const char* buf, size_t len, uint64_t tag, Request* req) {
  for (auto it = c.posted.begin(); it != c.posted.end(); ++it) {
    if (size_clash(it->req, it->tag, it->len, tag, len)) {
      fail(it->req, clash_text(c.peer, len, it->len), true);
      c.posted.erase(it);
      break;
    }
    if (it->tag != tag || !fits(it->req, it->len, len)) continue;
    if (len) memcpy(it->buf, buf, len);
    Request* r = it->req;
    c.posted.erase(it);
    complete(r, len);
    return complete(req, len);
  }
  Unexpected& u = c.unexpected.emplace_back();
  u.tag = tag;
  u.len = len;
  u.data = take_buf_locked(len);
  if (len) memcpy(u.data.p.get(), buf, len);
  u.complete = true;
  c.ux_bytes += len;
  complete(req, len);
}

// A receive was posted on a connection whose next message is held: that message
// goes to it, or (another tag or length) to an unexpected entry with the receive
// queued behind it; then reading resumes, starting with what was read already.
void SockPath::release_held_locked(Conn& c, Request* req, char* dst, uint64_t tag, size_t len) {
  c.held = false;
  if (c.tag == tag && fits(req, len, c.len)) {
    c.req = req;
    c.dst = dst;
    c.in_payload = true;
  } else {
    buffer_unexpected_locked(c);
    if (size_clash(req, tag, len, c.tag, c.len)) fail(req, clash_text(c.peer, c.len, len), true);
    else c.posted.push_back(Posted{req, dst, len, tag});
  }
  watch_locked(c, true);
  int done = 0;
  if (c.spray) start_spray_locked(c);
  else if (c.got == c.len) finish_message_locked(c, &done);
  std::vector<char> rest = std::move(c.leftover);
  c.leftover.clear();
  if (!rest.empty()) consume_locked(c, rest.data(), rest.size(), &done);
}

void SockPath::watch_locked(Conn& c, bool readable) {
  if (epfd_ < 0 || c.fd < 0) return;
  epoll_event ev{};
  ev.events = readable && !c.ended ? static_cast<uint32_t>(EPOLLIN) : 0u;
  ev.data.ptr = &c;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
}

int SockPath::progress(bool block) {
  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  if (block) lk.lock();
  else if (!lk.try_lock()) return 0;
  int done = 0;
  for (auto& c : conns_)
    if (!c->txq.empty() && c->dead.empty()) {
      const size_t before = c->txq.size();
      if (write_locked(*c)) done += static_cast<int>(before - c->txq.size());
    }
  for (auto& c : conns_)
    if (!c->spray_q.empty()) schedule_locked(*c);
  if (conns_.empty()) return done;  // only this rank's own pair: nothing to read
  if (conns_.size() == 1) {
    Conn& c = *conns_[0];
    if (c.dead.empty()) read_locked(c, &done);
    return done;
  }
  epoll_event ev[16];
  const int n = epoll_wait(epfd_, ev, 16, 0);
  for (int i = 0; i < n; ++i) {
    Conn& c = *static_cast<Conn*>(ev[i].data.ptr);
    if (c.dead.empty()) read_locked(c, &done);
  }
  return done;
}

void SockPath::nap(int64_t ns) {
  std::vector<pollfd> fds;
  {
    std::lock_guard<std::mutex> lk(mu_);
    // With several connections, the epoll set stands for every one that is read
    // (watch_locked): one descriptor to poll however many peers and flows. A poll
    // registers on each descriptor it is given: one that sleeps on 24 TCP sockets
    // (3 peers x 8 flows) costs ~1 us more than on the epoll descriptor (6.3 against
    // 5.2 us with a 2 us timeout on this 2-core VM), and a small call naps a few times.
    if (epfd_ >= 0) fds.push_back(pollfd{epfd_, POLLIN, 0});
    for (auto& c : conns_) {
      // Chunks wait for room in a flow's kernel buffer, which no poll reports: look again soon.
      if (!c->spray_q.empty()) ns = std::min<int64_t>(ns, 100000);
      const bool in = epfd_ < 0 && !c->held && !c->ended;
      const short ev = static_cast<short>((in ? POLLIN : 0) | (c->txq.empty() ? 0 : POLLOUT));
      if (c->dead.empty() && ev) fds.push_back(pollfd{c->fd, ev, 0});
    }
  }
  const timespec ts{0, static_cast<long>(ns)};
  ppoll(fds.data(), fds.size(), &ts, nullptr);
}

bool SockPath::write_locked(Conn& c, bool complete_sends) {
  while (!c.txq.empty()) {
    Tx& t = c.txq.front();
    iovec iov[2];
    int n = 0;
    if (t.off < sizeof(t.hdr)) iov[n++] = iovec{t.hdr + t.off, sizeof(t.hdr) - t.off};
    const size_t poff = t.off > sizeof(t.hdr) ? t.off - sizeof(t.hdr) : 0;
    if (t.len > poff) iov[n++] = iovec{const_cast<char*>(t.buf) + poff, t.len - poff};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = sendmsg(c.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      fail_conn_locked(c, sock::error_text("send to", "rank " + std::to_string(c.peer), errno));
      return false;
    }
    t.off += static_cast<size_t>(w);
    if (t.off < sizeof(t.hdr) + t.len) return true;  // the kernel's buffer is full
    const size_t len = t.len, report = t.report;
    Request* req = t.req;
    c.txq.pop_front();  // t is gone from here on
    c.tx_bytes -= len;
    c.sent += len;
    sent_ += len;
    rail_sent_[static_cast<size_t>(c.rail)] += len;
    if (req && complete_sends) complete(req, report);
  }
  return true;
}

bool SockPath::flows_ended(const Conn& lead) {
  if (lead.flows.empty()) return lead.ended || !lead.dead.empty();
  for (const Conn* f : lead.flows)
    if (!f->ended && f->dead.empty()) return false;
  return true;
}

void SockPath::end_flow_locked(Conn& c) {
  c.hdr_got = 0;
  c.ended = true;
  watch_locked(c, false);
  if (flows_ended(*c.lead)) fail_conn_locked(c, "rank " + std::to_string(c.peer) + " closed its connection");
}

bool SockPath::read_locked(Conn& c, int* done) {
  if (c.held || c.ended || c.fd < 0) return true;  // held: until a receive is posted
  for (;;) {
    char* to;
    size_t room;
    const bool direct = c.in_payload && c.len - c.got >= kDirectReadBytes;
    // A flow past the lead carries only chunks: read each header alone, its payload in place.
    const bool header_only = !c.in_payload && (c.lead != &c || large_posted(c));
    if (direct) {
      to = c.dst + c.got;
      room = c.len - c.got;
    } else {
      // Through stage. While a large receive is posted, only the header's missing
      // bytes: its payload then goes straight into the receive's buffer, not
      // through stage and a copy.
      to = c.stage.data();
      room = header_only ? sizeof(c.hdr) - c.hdr_got : c.stage.size();
    }
    const ssize_t r = recv(c.fd, to, room, MSG_DONTWAIT);
    if (r == 0) {
      std::string why = "rank " + std::to_string(c.peer) + " closed its connection";
      if (c.in_payload || c.hdr_got)
        why += " in the middle of a message (" +
               (c.in_payload ? std::to_string(c.got) + " of its " + std::to_string(c.len) + " bytes received)"
                             : "its header incomplete)");
      fail_conn_locked(c, why);  // no end frame first: lost (the peer died, or the flow was cut)
      return false;
    }
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      fail_conn_locked(c, sock::error_text("recv from", "rank " + std::to_string(c.peer), errno));
      return false;
    }
    if (direct) {
      c.got += static_cast<size_t>(r);
      recvd_ += static_cast<size_t>(r);
      rail_recvd_[static_cast<size_t>(c.rail)] += static_cast<size_t>(r);
      if (c.got == c.len) finish_message_locked(c, done);
      if (static_cast<size_t>(r) < room) return true;  // drained: see below
      continue;
    }
    consume_locked(c, c.stage.data(), static_cast<size_t>(r), done);
    if (!c.dead.empty()) return false;
    if (c.held || c.ended) return true;  // held: what it read past the header waits in leftover
    // A short read took all the kernel held: another recv() would only say EAGAIN
    // (one system call of each small message's ~2). What arrives later is read on
    // the next pass (the connections are level-triggered in epoll).
    if (static_cast<size_t>(r) < room) return true;
  }
}

bool SockPath::large_posted(const Conn& c) {
  for (const Posted& p : c.posted)
    if (p.len >= kDirectReadBytes) return true;
  return false;
}

void SockPath::consume_locked(Conn& c, const char* p, size_t n, int* done) {
  while (n > 0) {
    if (!c.in_payload) {
      const size_t take = std::min(n, sizeof(c.hdr) - c.hdr_got);
      memcpy(c.hdr + c.hdr_got, p, take);
      c.hdr_got += take;
      p += take;
      n -= take;
      if (c.hdr_got < sizeof(c.hdr)) return;
      begin_message_locked(c);
      if (!c.dead.empty() || c.ended) return;
      if (c.held) {  // what follows its header waits with it
        c.leftover.assign(p, p + n);
        return;
      }
      if (c.spray) {  // an announcement: the payload comes in chunks
        start_spray_locked(c);
        continue;
      }
      if (c.len == 0) finish_message_locked(c, done);
      continue;
    }
    const size_t take = std::min(n, c.len - c.got);
    memcpy(c.dst + c.got, p, take);
    c.got += take;
    recvd_ += take;
    rail_recvd_[static_cast<size_t>(c.rail)] += take;
    p += take;
    n -= take;
    if (c.got == c.len) finish_message_locked(c, done);
  }
}

void SockPath::begin_message_locked(Conn& c) {
  uint64_t tag = 0, len = 0;
  memcpy(&tag, c.hdr, 8);
  memcpy(&len, c.hdr + 8, 8);
  if ((len & spray::kEnd) == spray::kEnd) return end_flow_locked(c);
  if (len & spray::kChunk) return begin_chunk_locked(c, tag, len);
  if (c.lead != &c) {
    fail_conn_locked(c, "rank " + std::to_string(c.peer) + " sent a message header on a flow that carries only chunks");
    return;
  }
  c.spray = (len & spray::kAnnounce) != 0;
  len &= ~spray::kAnnounce;
  if (len > c.limit) {
    fail_conn_locked(c, "rank " + std::to_string(c.peer) + " sent a " + std::to_string(len) +
                            "-byte message where this pair's socket path carries at most " + std::to_string(c.limit));
    return;
  }
  c.hdr_got = 0;
  c.tag = tag;
  c.len = static_cast<size_t>(len);
  c.got = 0;
  c.req = nullptr;
  c.filling = nullptr;
  for (auto it = c.posted.begin(); it != c.posted.end(); ++it) {
    if (size_clash(it->req, it->tag, it->len, tag, c.len)) {
      fail(it->req, clash_text(c.peer, c.len, it->len), true);
      c.posted.erase(it);
      break;  // the message itself waits as unexpected
    }
    if (it->tag != tag || !fits(it->req, it->len, c.len)) continue;
    c.in_payload = true;
    c.req = it->req;
    c.dst = it->buf;
    c.posted.erase(it);
    return;
  }
  // Nothing asked for it. Past the bound, and with no receive posted that a later
  // message could be for, stop reading this peer until one is.
  if (c.posted.empty() && c.ux_bytes + c.len > kMaxUnexpectedBytes) {
    c.held = true;
    watch_locked(c, false);
    return;
  }
  buffer_unexpected_locked(c);
}

void SockPath::buffer_unexpected_locked(Conn& c) {
  c.unexpected.emplace_back();
  c.filling = &c.unexpected.back();
  c.filling->tag = c.tag;
  c.filling->len = c.len;
  c.filling->data = take_buf_locked(c.len);
  c.ux_bytes += c.len;
  c.dst = c.filling->data.p.get();
  c.in_payload = true;
}

SockPath::Buf SockPath::take_buf_locked(size_t len) {
  for (auto it = spare_.begin(); it != spare_.end(); ++it)
    if (it->cap >= len) {
      Buf b = std::move(*it);
      spare_.erase(it);
      return b;
    }
  Buf b;
  b.cap = std::max<size_t>(len, 1);
  b.p.reset(new char[b.cap]);  // no zero fill: the payload overwrites it
  return b;
}

void SockPath::drop_unexpected_locked(Conn& c, std::list<Unexpected>::iterator it) {
  // At most 8 kept, of at most 4 MiB each (pipeline chunks are smaller): a 64 MiB
  // message's buffer is not held for the life of the connection.
  constexpr size_t kSpares = 8, kSpareMaxBytes = size_t{4} << 20;
  if (it->data.p && it->data.cap <= kSpareMaxBytes && spare_.size() < kSpares) spare_.push_back(std::move(it->data));
  c.ux_bytes -= it->len;
  c.unexpected.erase(it);
}

void SockPath::finish_message_locked(Conn& c, int* done) {
  if (c.chunk_of) return finish_chunk_locked(c, done);
  c.in_payload = false;
  if (c.req) {
    Request* req = c.req;
    c.req = nullptr;
    ++*done;
    return complete(req, c.len);
  }
  c.filling->complete = true;
  c.filling = nullptr;
}

void SockPath::fail_flow_locked(Conn& c, const std::string& why, bool keep_arrived) {
  if (!c.dead.empty()) {
    if (!keep_arrived) c.unexpected.clear(), c.ux_bytes = 0;  // cancelled after the peer closed
    return;
  }
  c.dead = why;
  for (Tx& t : c.txq)
    if (t.req) fail(t.req, why);
  c.tx_bytes = 0;
  c.chunk_of = nullptr;
  c.wait_seq = -1;
  c.txq.clear();
  for (Posted& p : c.posted) fail(p.req, why);
  c.posted.clear();
  if (c.req) fail(c.req, why);
  c.req = nullptr;
  // What arrived whole stays for the receives posted later (a peer that sent and
  // closed at once); the message cut off by the end does not.
  for (auto it = c.unexpected.begin(); it != c.unexpected.end();) {
    auto next = std::next(it);
    if (!keep_arrived || !it->complete) drop_unexpected_locked(c, it);
    it = next;
  }
  c.filling = nullptr;
  c.in_payload = false;
  c.held = false;
  c.leftover.clear();
  if (epfd_ >= 0 && c.fd >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
}

void SockPath::cancel_all() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& c : conns_) fail_conn_locked(*c, "cancelled", false);
  if (self_) fail_conn_locked(*self_, "cancelled", false);
}

std::vector<std::string> SockPath::counters() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> out;
  for (size_t i = 0; i < rails_.size(); ++i)
    if (!rails_[i].empty())
      out.push_back("socket path on " + rails_[i] + ": sent " + std::to_string(rail_sent_[i]) + " bytes, received " +
                    std::to_string(rail_recvd_[i]) + " bytes");
  if (out.empty())
    out.push_back("socket path: sent " + std::to_string(sent_) + " bytes, received " + std::to_string(recvd_) +
                  " bytes");
  return out;
}

std::string SockPath::mismatch_note(const Request& r) {
  Conn* c = conn_of(r.peer);
  if (!c) return "";
  std::lock_guard<std::mutex> lk(mu_);
  if (c->dead.empty()) {
    int done = 0;
    read_locked(*c, &done);
  }
  if (c->held && c->tag == r.tag && c->len != r.len)
    return "; count mismatch: rank " + std::to_string(r.peer) + " sent " + std::to_string(c->len) +
           " bytes for it (this rank expects " + std::to_string(r.len) + " bytes)";
  for (const Unexpected& u : c->unexpected)
    if (u.tag == r.tag && u.len != r.len)
      return "; count mismatch: rank " + std::to_string(r.peer) + " sent " + std::to_string(u.len) +
             " bytes for it (this rank expects " + std::to_string(r.len) + " bytes)";
  if (has_call_mark(r.tag))
    for (const Unexpected& u : c->unexpected)
      if ((u.tag | kCallMarkBits) == (r.tag | kCallMarkBits)) return call_mismatch_note(r, u.len);
  return "";
}

}  // namespace dccl::net
