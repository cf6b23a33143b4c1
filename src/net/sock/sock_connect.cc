// SockPath's setup: listening sockets, the published address, and the collective
// connect() that makes one authenticated connection per pair (net/sock/sock_path.hpp).
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/socket.hpp"
#include "net/sock/sock_intro.hpp"
#include "net/sock/sock_path.hpp"
#include "net/sock/spray.hpp"

namespace dccl::net {

using Clock = std::chrono::steady_clock;

std::string sockaddr_ip(const std::string& name) { return sock::ip_of_bytes(name); }

SockPath::SockPath(int rank, uint64_t max_bytes, std::chrono::milliseconds timeout,
                   const std::vector<std::string>& ips, std::vector<std::string> rails,
                   const std::array<uint8_t, 16>& secret, const std::string& congestion)
    : rank_(rank), max_bytes_(max_bytes), timeout_(timeout), secret_(secret), rails_(std::move(rails)) {
  rails_.resize(std::max<size_t>(ips.size(), 1));
  rail_sent_.assign(rails_.size(), 0);
  rail_recvd_.assign(rails_.size(), 0);
  std::random_device rd;
  nonce_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  set_congestion(congestion);
  for (const std::string& ip : ips) {
    sock::SockAddr sa;
    const bool v6 = ip.find(':') != std::string::npos;
    if (!sock::parse_hostport((v6 ? "[" + ip + "]" : ip) + ":1", &sa))
      core::raise(dcclInvalidArgument, core::describe(rank, "socket path", "bad address '" + ip + "'"));
    reinterpret_cast<sockaddr_in*>(&sa.ss)->sin_port = 0;  // the same offset in sockaddr_in6
    const int fd = socket(sa.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    // Bound now (the port goes into the connection blob), listening only in connect().
    if (fd < 0 || bind(fd, sa.sa(), sa.len) != 0) {
      const std::string why = sock::error_text(fd < 0 ? "socket" : "bind", "", errno);
      if (fd >= 0) close(fd);
      for (auto& [l, a] : listeners_) close(l);
      core::raise(dcclSystemError, core::describe(rank, "socket path", "cannot listen on " + ip + ": " + why));
    }
    sa.len = sizeof(sa.ss);
    getsockname(fd, sa.sa(), &sa.len);
    listeners_.emplace_back(fd, (v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(sock::port_of(sa)));
  }
}

SockPath::~SockPath() {
  for (auto& [fd, a] : listeners_) close(fd);
  close_gracefully();
  if (epfd_ >= 0) close(epfd_);
}

std::string SockPath::address() const {
  std::ostringstream out;
  out << "sock2 " << max_bytes_ << " " << std::hex << nonce_ << std::dec << " " << flows_;
  for (const auto& [fd, a] : listeners_) out << " " << a;
  return out.str();
}

// The address part of "ip:port" or "[ip]:port", as inet_ntop writes it ("" if malformed).
static std::string ip_of(const std::string& hostport) {
  sock::SockAddr sa;
  return sock::parse_hostport(hostport, &sa) ? sock::host_of(sa) : "";
}

// Whether "ip:port" is on a loopback address.
static bool loopback(const std::string& hostport) {
  const std::string ip = ip_of(hostport);
  return ip.rfind("127.", 0) == 0 || ip == "::1";
}

// A connection's introduction names the connecting rank and the flow it is: rank +
// flow * 2^24 (ranks are below 2^24, DCCL_RANK), bound into both proofs.
static int intro_id(int rank, int flow) { return rank + (flow << 24); }

void SockPath::connect(const std::vector<std::pair<int, std::string>>& peers, bool loop_self, Clock::time_point until,
                       const std::vector<bool>& local) {
  struct Pending {
    int fd = -1;
    int flow = 0;
    int peer = -1;  // -1: accepted, not yet introduced
    int rail = 0;   // the listener that accepted it, or the rail connected over
    bool outgoing = false;
    bool connecting = false;  // outgoing: connect() in progress
    // The introduction (net/sock/sock_intro.hpp): the message being read, and how long it is.
    char in[kIntroAnswerBytes];
    size_t got = 0, want = kIntroHelloBytes;
    bool answered = false;  // accepted: the answer went out, the connector's proof is due
    IntroNonce nc, na;
    Clock::time_point retry_at{};
    Clock::time_point hello_by{};  // accepted: closed unless introduced by then
    sock::SockAddr sa;
    // The peer for error texts: "rank 3 (10.0.0.2:4001)".
    std::string who() const { return "rank " + std::to_string(peer) + " (" + sock::addr_to_string(sa) + ")"; }
  };
  const auto deadline =
      until == Clock::time_point{} ? Clock::now() + timeout_ : std::min(until, Clock::now() + timeout_);
  const IntroKey key{secret_, static_cast<int>(peers.size())};
  by_peer_.assign(peers.size(), nullptr);
  if (loop_self && rank_ >= 0 && static_cast<size_t>(rank_) < peers.size()) {
    self_ = std::make_unique<Conn>();
    self_->peer = rank_;
    self_->limit = max_bytes_;
    by_peer_[static_cast<size_t>(rank_)] = self_.get();
  }
  std::vector<uint64_t> limits(peers.size(), 0), nonces(peers.size(), 0);
  std::vector<std::vector<Conn*>> slots(peers.size());  // per rank, its flows' connections
  std::vector<bool> near_pair(peers.size(), false);      // per rank: on this host or over loopback
  auto complete_pair = [&](size_t r) {
    return !slots[r].empty() && std::all_of(slots[r].begin(), slots[r].end(), [](Conn* c) { return c != nullptr; });
  };
  std::vector<Pending> pend;
  std::vector<std::string> allowed;  // addresses of the ranks that connect to this one
  size_t expected_in = 0, refused = 0;
  std::vector<std::string> warned;
  for (size_t r = 0; r < peers.size(); ++r) {
    const auto& [rail, addr] = peers[r];
    if (rail < 0 || addr.empty() || static_cast<int>(r) == rank_) continue;
    std::istringstream in(addr);
    std::string magic, nonce_hex;
    uint64_t lim = 0;
    std::vector<std::string> eps;
    int their_flows = -1;
    in >> magic >> lim >> nonce_hex >> their_flows;
    for (std::string a; in >> a;) eps.push_back(a);
    const std::string whose = "rank " + std::to_string(r) + "'s socket address '" + addr + "'";
    if (magic != "sock2" || nonce_hex.empty() || static_cast<size_t>(rail) >= eps.size() || their_flows < 0 ||
        their_flows > spray::kMaxFlows)
      core::raise(dcclInvalidArgument, core::describe(rank_, "socket path", "malformed " + whose));
    nonces[r] = strtoull(nonce_hex.c_str(), nullptr, 16);
    limits[r] = std::min(lim, max_bytes_);
    const bool near = (r < local.size() && local[r]) || loopback(eps[static_cast<size_t>(rail)]);
    near_pair[r] = near;
    const int nflows = spray::pair_flows(flows_, their_flows, near);
    slots[r].assign(static_cast<size_t>(nflows), nullptr);
    if (static_cast<int>(r) < rank_) {
      expected_in += static_cast<size_t>(nflows);
      for (const std::string& e : eps) allowed.push_back(ip_of(e));
      continue;
    }
    Pending p;
    p.peer = static_cast<int>(r);
    p.rail = rail;
    p.outgoing = true;
    if (!sock::parse_hostport(eps[static_cast<size_t>(rail)], &p.sa))
      core::raise(dcclInvalidArgument, core::describe(rank_, "socket path", "malformed " + whose));
    for (int f = 0; f < nflows; ++f) {
      p.flow = f;
      pend.push_back(p);
    }
  }
  // Listen only while the ranks that connect to this one do so (and not at all when
  // none does); until then their connects are refused and retried.
  auto stop_listening = [&] {
    for (auto& [fd, a] : listeners_) close(fd);
    listeners_.clear();
  };
  if (expected_in == 0) stop_listening();
  for (auto& [fd, a] : listeners_)
    if (::listen(fd, 64) != 0)
      core::raise(dcclSystemError, core::describe(rank_, "socket path", sock::error_text("listen on", a, errno)));
  auto ready = [&](Pending& p) {
    auto c = std::make_unique<Conn>();
    c->fd = p.fd;
    c->peer = p.peer;
    c->rail = p.rail < static_cast<int>(rails_.size()) ? p.rail : 0;
    c->limit = limits[static_cast<size_t>(p.peer)];
    c->flow = p.flow;
    c->stage.resize(c->flow == 0 ? 64 << 10 : 64);
    sock::set_nodelay(c->fd);
    apply_congestion(c->fd, near_pair[static_cast<size_t>(p.peer)]);
    slots[static_cast<size_t>(p.peer)][static_cast<size_t>(p.flow)] = c.get();
    conns_.push_back(std::move(c));
    p.fd = -1;
  };
  auto drop = [](Pending& p) {
    if (p.fd >= 0) close(p.fd);
    p.fd = -1;
  };
  size_t done_in = 0;
  std::string last_error;
  try {
    while (true) {
      const size_t outstanding = std::count_if(pend.begin(), pend.end(), [](const Pending& p) {
        return p.outgoing && p.peer >= 0;
      });
      if (outstanding == 0 && done_in == expected_in) break;
      const auto now = Clock::now();
      if (now >= deadline) {
        std::string missing;
        for (size_t r = 0; r < peers.size(); ++r)
          if (peers[r].first >= 0 && !peers[r].second.empty() && static_cast<int>(r) != rank_ && !complete_pair(r))
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        core::raise(dcclTimeout, core::describe(rank_, "socket path",
                                                "no connection with rank(s) " + missing + " within " +
                                                    std::to_string(timeout_.count()) + " ms" +
                                                    (last_error.empty() ? "" : " (last error: " + last_error + ")") +
                                                    (refused == 0 ? "" : "; refused " + std::to_string(refused) +
                                                     " connection(s) from addresses of no rank expected")));
      }
      // Start (or restart) outgoing connections.
      for (Pending& p : pend) {
        if (!p.outgoing || p.peer < 0 || p.fd >= 0 || now < p.retry_at) continue;
        sock::Fd s;
        const int e = sock::start_connect(p.sa, &s);
        if (!s) core::raise(dcclSystemError, core::describe(rank_, "socket path", sock::error_text("socket", "", e)));
        p.fd = s.release();
        p.connecting = true;
        p.got = 0;
        if (e != 0 && e != EINPROGRESS) {
          last_error = sock::error_text("connect to", p.who(), e);
          drop(p);
          p.retry_at = now + std::chrono::milliseconds(20);
        }
      }
      // Accepted connections that did not introduce themselves in time are closed.
      for (Pending& p : pend)
        if (!p.outgoing && p.fd >= 0 && now >= p.hello_by) drop(p);
      std::vector<pollfd> fds;
      const size_t nl = listeners_.size();
      for (const auto& [fd, a] : listeners_) fds.push_back(pollfd{fd, POLLIN, 0});
      for (const Pending& p : pend)
        fds.push_back(pollfd{p.fd, static_cast<short>(p.connecting ? POLLOUT : POLLIN), 0});
      poll(fds.data(), fds.size(), 20);
      const size_t npend = pend.size();  // those polled; accepted ones join after them
      for (size_t i = 0; i < nl; ++i) {
        if (!(fds[i].revents & POLLIN)) continue;
        sock::SockAddr from;
        for (;;) {
          const int fd = sock::accept(listeners_[i].first, &from);
          if (fd < 0) break;
          const std::string ip = sock::host_of(from);
          if (std::find(allowed.begin(), allowed.end(), ip) == allowed.end()) {
            close(fd);
            ++refused;
            if (warned.size() < 8 && std::find(warned.begin(), warned.end(), ip) == warned.end()) {
              warned.push_back(ip);
              DCCL_WARN("net: rank %d socket path: refused a connection from %s, the address of no rank that "
                        "connects to this one", rank_, ip.c_str());
            }
            continue;
          }
          // At most kMaxUnidentified waiting for their introduction: the oldest goes
          // (a peer's own connection introduces itself at once, and retries if closed).
          size_t waiting = 0;
          for (const Pending& q : pend) waiting += !q.outgoing && q.fd >= 0 && q.peer < 0;
          if (waiting >= kMaxUnidentified)
            for (Pending& q : pend)
              if (!q.outgoing && q.fd >= 0 && q.peer < 0) {
                drop(q);
                break;
              }
          Pending p;
          p.fd = fd;
          p.rail = static_cast<int>(i);
          p.hello_by = Clock::now() + std::min<Clock::duration>(kHelloWithin, timeout_);
          pend.push_back(p);
        }
      }
      for (size_t i = 0; i < npend && nl + i < fds.size(); ++i) {
        Pending& p = pend[i];
        const short ev = fds[nl + i].revents;
        if (p.fd < 0 || fds[nl + i].fd != p.fd || !ev) continue;
        if (p.connecting) {
          const int err = sock::connect_result(p.fd);
          if (err != 0) {
            last_error = sock::error_text("connect to", p.who(), err);
            drop(p);
            p.retry_at = Clock::now() + std::chrono::milliseconds(20);
            continue;
          }
          p.connecting = false;
          p.nc = IntroNonce::fresh();
          p.want = kIntroAnswerBytes;
          char hello[kIntroHelloBytes];
          intro_hello(hello, {intro_id(rank_, p.flow), p.peer, nonce_, nonces[static_cast<size_t>(p.peer)]}, p.nc);
          if (const int e = sock::send_all(p.fd, hello, sizeof(hello), deadline)) {
            last_error = sock::error_text("send to", p.who(), e);
            drop(p);
            p.retry_at = Clock::now() + std::chrono::milliseconds(20);
          }
          continue;
        }
        const long n = sock::recv_some(p.fd, p.in + p.got, p.want - p.got, Clock::now());
        if (n <= 0) {
          if (n == -ETIMEDOUT) continue;
          if (p.outgoing) {
            last_error = n == 0 ? p.who() + " closed the connection before answering"
                                : sock::error_text("recv from", p.who(), static_cast<int>(-n));
            drop(p);
            p.retry_at = Clock::now() + std::chrono::milliseconds(20);
          } else {
            drop(p);
          }
          continue;
        }
        p.got += static_cast<size_t>(n);
        if (p.got < p.want) continue;
        p.got = 0;
        if (p.outgoing) {
          // The answer: the peer proves it knows the job secret; then this rank does.
          char proof[kIntroProofBytes];
          if (!intro_check_answer(p.in, key,
                                  {intro_id(rank_, p.flow), p.peer, nonce_, nonces[static_cast<size_t>(p.peer)]}, p.nc,
                                  proof)) {
            last_error = "the process answering for rank " + std::to_string(p.peer) +
                         " did not prove that it knows the job secret";
            drop(p);
            p.retry_at = Clock::now() + std::chrono::milliseconds(20);
            continue;
          }
          if (const int e = sock::send_all(p.fd, proof, sizeof(proof), deadline)) {
            last_error = sock::error_text("send to", p.who(), e);
            drop(p);
            p.retry_at = Clock::now() + std::chrono::milliseconds(20);
            continue;
          }
          ready(p);
          p.peer = -1;
          continue;
        }
        if (!p.answered) {
          // The hello: a rank that should connect to us, for this listener; answer the challenge.
          const int id = intro_hello_from(p.in, nonce_, &p.nc);
          const int from = id & 0xffffff, flow = id >> 24;
          const bool known = id >= 0 && static_cast<size_t>(from) < peers.size() && from < rank_ &&
                             peers[static_cast<size_t>(from)].first >= 0 &&
                             !peers[static_cast<size_t>(from)].second.empty() &&
                             static_cast<size_t>(flow) < slots[static_cast<size_t>(from)].size() &&
                             !slots[static_cast<size_t>(from)][static_cast<size_t>(flow)];
          if (!known) {
            DCCL_WARN("net: rank %d socket path: refused a connection with a wrong introduction", rank_);
            drop(p);
            continue;
          }
          p.peer = from;
          p.flow = flow;
          p.na = IntroNonce::fresh();
          char answer[kIntroAnswerBytes];
          intro_answer(answer, key, {id, rank_, nonces[static_cast<size_t>(from)], nonce_}, p.nc, p.na);
          if (sock::send_all(p.fd, answer, sizeof(answer), deadline) != 0) {
            drop(p);
            continue;
          }
          p.answered = true;
          p.want = kIntroProofBytes;
          continue;
        }
        if (!intro_check_proof(p.in, key, {intro_id(p.peer, p.flow), rank_, nonces[static_cast<size_t>(p.peer)], nonce_},
                               p.nc, p.na) ||
            slots[static_cast<size_t>(p.peer)][static_cast<size_t>(p.flow)]) {
          DCCL_WARN("net: rank %d socket path: refused a connection claiming to be rank %d: it did not prove that it "
                    "knows the job secret", rank_, p.peer);
          drop(p);
          continue;
        }
        ready(p);
        p.peer = -1;
        ++done_in;
      }
      if (done_in == expected_in && !listeners_.empty()) {  // every rank that connects to this one did
        stop_listening();
        for (Pending& p : pend)
          if (!p.outgoing) drop(p);
      }
      pend.erase(std::remove_if(pend.begin(), pend.end(),
                                [](const Pending& p) { return p.fd < 0 && !(p.outgoing && p.peer >= 0); }),
                 pend.end());
    }
  } catch (...) {
    for (Pending& p : pend) drop(p);
    throw;
  }
  for (Pending& p : pend) drop(p);
  stop_listening();  // every pair is connected: nothing more to accept
  for (size_t r = 0; r < slots.size(); ++r) {
    if (!complete_pair(r)) continue;
    Conn* lead = slots[r][0];
    lead->flows = slots[r];
    for (Conn* f : slots[r]) f->lead = lead;
    by_peer_[r] = lead;
  }
  if (conns_.size() > 1) {
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) core::raise(dcclSystemError, core::describe(rank_, "socket path", sock::error_text("epoll_create1", "", errno)));
    for (auto& c : conns_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = c.get();
      if (epoll_ctl(epfd_, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        core::raise(dcclSystemError, core::describe(rank_, "socket path", sock::error_text("epoll_ctl", "", errno)));
    }
  }
}

}  // namespace dccl::net
