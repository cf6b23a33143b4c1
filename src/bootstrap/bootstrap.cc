// Bootstrap client: one TCP connection to the store; requests are pipelined and
// replies matched by request id, so a reply that arrives after its GET timed
// out (or was interrupted) is recognised and dropped. interrupt() sets a flag
// and an eventfd that the waits of get/allgather/barrier poll next to the socket.
#include "bootstrap/bootstrap.hpp"
#include "core/host.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <unordered_map>

#include "core/socket.hpp"
#include "bootstrap/wire.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::boot {

using sock::Clock;
using wire::FrameType;

namespace {

struct AwaitedReply {
  std::string* dest;  // VALUE lands here; null when an OK is expected
  std::string label;  // what we wait for, for the timeout message
};

// now + t, saturating: a timeout of years must not overflow the clock.
Clock::time_point deadline_after(std::chrono::milliseconds t) {
  const auto now = Clock::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
  return t >= room ? Clock::time_point::max() : now + t;
}

std::string ms_text(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

// What a wait is bounded by: its deadline, the timeout it came from (for
// messages), and whether interrupt() ends it.
struct Wait {
  Clock::time_point dl;
  std::chrono::milliseconds timeout;
  bool interruptible = false;
};

}  // namespace

using AppendKeyed = void (*)(std::string&, uint64_t, std::string_view, std::string_view);

struct Bootstrap::Impl {
  void send_keyed(const char* verb, const std::string& key, const std::string& value, AppendKeyed append,
                  const Wait& w);
  std::unique_ptr<StoreServer> server;  // declared first: destroyed after the connection
  int rank = 0;
  std::chrono::milliseconds timeout{0};
  std::string ns, where, store_host;
  bool peer_closed = false;  // the store closed or reset the connection
  Clock::time_point cap{};   // limit(): no wait goes past it (default: none)
  sock::Fd fd;
  sock::Fd wake;                         // eventfd: readable once interrupt() was called
  std::atomic<bool> interrupted{false};  // the only state interrupt() touches, with `wake`
  std::string in;
  size_t in_off = 0;
  uint64_t next_req = 1;
  uint64_t round = 0;
  dcclResult_t broken_code = dcclSuccess;  // set when the stream can no longer be trusted
  std::string broken_why;

  [[noreturn]] void fail(dcclResult_t code, const std::string& op, const std::string& cause,
                         bool breaks = true) {
    std::string msg = core::describe(rank, op, cause);
    if (breaks && broken_code == dcclSuccess) {
      broken_code = code;
      broken_why = msg;
    }
    core::raise(code, msg);
  }
  void check_usable(const std::string& op) {
    if (broken_code != dcclSuccess)
      core::raise(broken_code, core::describe(rank, op, "connection to the store at " + where +
                                                            " is unusable after an earlier error (" +
                                                            broken_why + ")"));
  }
  // A wait of `t` (a default: the constructor's timeout), ending by the cap.
  Wait bounded(std::chrono::milliseconds t, bool interruptible) const {
    Clock::time_point dl = deadline_after(t);
    if (cap != Clock::time_point{} && cap < dl) dl = cap;
    return {dl, t, interruptible};
  }
  Wait plain_wait() const { return bounded(timeout, false); }

  void connect(const UniqueIdData& id, Clock::time_point dl);
  // True when welcomed; false (with *retry_why) when the store asks us to come
  // back (busy) or closed the connection before answering; throws when refused.
  // The challenge-response: reads the store's CHALLENGE, answers with HELLO and
  // its proof, checks WELCOME's proof. The secret itself is never sent.
  bool handshake(const std::array<uint8_t, 16>& secret, wire::Hello hello, const Wait& w, std::string* retry_why);
  // connect + handshake until welcomed or the deadline.
  void join(const UniqueIdData& id, const wire::Hello& hello, const Wait& w);
  // Polls fd for `events` until ready (true) or the deadline (false); throws
  // when interrupted (if w.interruptible) or when poll fails.
  bool wait_fd(short events, const Wait& w, const std::string& op, const std::string& what, bool breaks);
  void send_all(const std::string& buf, const Wait& w, const std::string& op);
  // Reads one frame; times out with a message naming `waiting_for`.
  wire::Frame recv_frame(const Wait& w, const std::string& op, const std::string& waiting_for);
  void exchange(const std::string& out, std::unordered_map<uint64_t, AwaitedReply>& want, const std::string& op,
                const Wait& w);
  void check_key(const std::string& key, const std::string& op) {
    if (key.size() > wire::kMaxKey)
      fail(dcclInvalidArgument, op, "key of " + std::to_string(key.size()) + " bytes (namespace included) exceeds " +
                                        std::to_string(wire::kMaxKey), false);
  }
  std::vector<std::string> allgather(const std::string& mine, int nranks, const std::string& op);
};

void Bootstrap::Impl::connect(const UniqueIdData& id, Clock::time_point dl) {
  const std::string op = "bootstrap connect";
  sock::SockAddr a;
  std::string why;
  if (!sock::resolve(id.host, id.port, &a, &why)) fail(dcclInvalidArgument, op, why);
  where = sock::addr_to_string(a) + (id.origin.empty() ? "" : " (" + id.origin + ")");
  int err = 0, attempts = 0;
  sock::Fd s = sock::connect_until(a, dl, &err, &attempts);
  if (s) {
    sock::set_keepalive(s.get());
    fd = std::move(s);
    DCCL_TRACE("rank %d: connected to the bootstrap store at %s after %d attempt(s)", rank, where.c_str(), attempts);
    return;
  }
  if (!sock::retryable_connect_error(err))
    fail(dcclSystemError, op, sock::error_text("connect to", "the store at " + where, err));
  fail(dcclTimeout, op, "the store at " + where + " was not reachable within " + ms_text(timeout) + " (" +
                            std::to_string(attempts) + " attempts, last error: " + sock::errno_text(err) +
                            "); is the root rank running, and is the address (DCCL_SOCKET_IFNAME) right?");
}

bool Bootstrap::Impl::handshake(const std::array<uint8_t, 16>& secret, wire::Hello hello, const Wait& w,
                                std::string* retry_why) {
  const std::string op = "bootstrap connect";
  wire::Frame f;
  wire::Nonce store_nonce{};
  bool challenged = false;
  peer_closed = false;
  try {
    f = recv_frame(w, op, "the store's challenge");
    if (f.type == FrameType::Challenge) {
      if (f.version != wire::kProtocolVersion)
        fail(dcclRemoteError, op, "the store at " + where + " speaks protocol version " + std::to_string(f.version) +
                                      ", this library " + std::to_string(wire::kProtocolVersion) +
                                      ": every rank and the store must run the same DirectCCL");
      hello.nonce = wire::fresh_nonce();
      hello.proof = wire::hello_proof(secret, wire::Prover::Client, f.nonce, hello);
      store_nonce = f.nonce;
      challenged = true;
      std::string out;
      wire::append_hello(out, hello);
      send_all(out, w, op);
      f = recv_frame(w, op, "the store's answer to HELLO");
    }
  } catch (const core::Error& e) {
    if (e.code() != dcclRemoteError || !peer_closed) throw;
    *retry_why = challenged ? "the store closed the connection before answering HELLO (connection limits?)"
                            : "the store closed the connection before sending its challenge (connection limits, "
                              "or not a DirectCCL store of protocol version " +
                                  std::to_string(wire::kProtocolVersion) + "?)";
    return false;
  }
  if (f.type == FrameType::Refused) {
    const std::string_view why = f.value;
    if (why.starts_with(wire::kBusy)) {
      *retry_why = "busy: " + std::string(why.substr(wire::kBusy.size()));
      return false;
    }
    if (why.starts_with(wire::kConflict))
      fail(dcclInvalidUsage, op, "the store at " + where + " refused this rank: " +
                                     std::string(why.substr(wire::kConflict.size())));
    if (why.starts_with(wire::kAbandoned))  // a rank's init failed before this one came
      fail(dcclRemoteError, op, std::string(why.substr(wire::kAbandoned.size())));
    fail(dcclRemoteError, op, "the store at " + where + " refused the connection: " + f.value);
  }
  if (f.type != FrameType::Welcome || !challenged)
    fail(dcclRemoteError, op, std::string("protocol error: the store at ") + where + " sent " +
                                  wire::type_name(f.type) + (challenged ? " in answer to HELLO" : " before its challenge"));
  if (!wire::proof_ok(f.proof, wire::hello_proof(secret, wire::Prover::Store, store_nonce, hello)))
    fail(dcclRemoteError, op, "the process answering at " + where + " did not prove that it knows the job "
                                  "secret: it is not this job's store (another job's, or an impostor)");
  store_host = f.value;
  return true;
}

void Bootstrap::Impl::join(const UniqueIdData& id, const wire::Hello& hello, const Wait& w) {
  auto backoff = std::chrono::milliseconds(10);
  int attempts = 0;
  std::string why;  // why the store turned us away last time
  auto give_up = [&] {
    fail(dcclTimeout, "bootstrap connect",
         "the store at " + where + " did not admit this rank within " + ms_text(timeout) + " (" +
             std::to_string(attempts) + " attempts; last: " + why + ")");
  };
  for (;;) {
    try {
      connect(id, w.dl);
    } catch (const core::Error& e) {
      if (e.code() != dcclTimeout || why.empty()) throw;
      give_up();
    }
    ++attempts;
    if (handshake(id.secret, hello, w, &why)) return;
    DCCL_TRACE("rank %d: the store at %s turned us away (%s); trying again", rank, where.c_str(), why.c_str());
    fd.reset();
    in.clear();
    in_off = 0;
    broken_code = dcclSuccess;
    broken_why.clear();
    const auto left = w.dl - Clock::now();
    if (left > Clock::duration::zero()) std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
    if (Clock::now() >= w.dl) give_up();
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

bool Bootstrap::Impl::wait_fd(short events, const Wait& w, const std::string& op, const std::string& what,
                              bool breaks) {
  for (;;) {
    if (w.interruptible && interrupted.load(std::memory_order_acquire))
      fail(dcclRemoteError, op, what + ": interrupted", breaks);
    const int rc = sock::wait(fd.get(), events, w.dl, w.interruptible ? wake.get() : -1);
    if (rc == 0) return true;
    if (rc == ETIMEDOUT) return false;
    if (rc != ECANCELED) fail(dcclSystemError, op, sock::error_text("poll", "", rc));
    // the eventfd: the flag is checked at the top
  }
}

void Bootstrap::Impl::send_all(const std::string& buf, const Wait& w, const std::string& op) {
  size_t off = 0;
  while (off < buf.size()) {
    size_t sent = 0;
    // The helper waits without the interrupt flag: one that turns up is caught by wait_fd.
    int e = sock::send_all(fd.get(), buf.data() + off, buf.size() - off, Clock::now(), &sent);
    off += sent;
    if (e == 0) continue;
    if (e == ETIMEDOUT) {
      // Interrupted or timed out part-way through a frame: the stream is broken.
      if (!wait_fd(POLLOUT, w, op, "sending to the store at " + where, off > 0))
        fail(dcclTimeout, op, "timed out after " + ms_text(w.timeout) + " sending to the store at " + where +
                                  " (it is not reading)");
      continue;
    }
    if (e == EPIPE || e == ECONNRESET) {
      peer_closed = true;
      fail(dcclRemoteError, op, "the store at " + where + " closed the connection (" + sock::errno_text(e) + ")");
    }
    fail(dcclSystemError, op, sock::error_text("send to", "the store at " + where, e));
  }
}

wire::Frame Bootstrap::Impl::recv_frame(const Wait& w, const std::string& op,
                                        const std::string& waiting_for) {
  for (;;) {
    const size_t avail = in.size() - in_off;
    wire::ParseResult r = wire::parse_frame(reinterpret_cast<const uint8_t*>(in.data()) + in_off, avail);
    if (r.status == wire::ParseStatus::Ok) {
      in_off += r.consumed;
      if (in_off == in.size()) {
        in.clear();
        in_off = 0;
      }
      if (wire::is_client_frame(r.frame.type))
        fail(dcclRemoteError, op, std::string("protocol error: the store at ") + where + " sent " +
                                      wire::type_name(r.frame.type));
      return std::move(r.frame);
    }
    if (r.status == wire::ParseStatus::Malformed)
      fail(dcclRemoteError, op, "malformed frame from the store at " + where + ": " + r.error);
    if (in_off > 0) {
      in.erase(0, in_off);
      in_off = 0;
    }
    // An interrupt between frames leaves the stream whole: late replies are dropped.
    if (!wait_fd(POLLIN, w, op, "waiting for " + waiting_for + " from the store at " + where, false))
      fail(dcclTimeout, op, "timed out after " + ms_text(w.timeout) + " waiting for " + waiting_for +
                                " from the store at " + where, false);
    const size_t want = std::max<size_t>(size_t{64} << 10, r.need - avail);
    const size_t old = in.size();
    in.resize(old + want);
    const long got = sock::recv_some(fd.get(), in.data() + old, want, Clock::now());
    const int e = got < 0 ? static_cast<int>(-got) : 0;
    in.resize(old + (got > 0 ? static_cast<size_t>(got) : 0));
    if (got > 0) continue;
    if (got == 0) {
      peer_closed = true;
      fail(dcclRemoteError, op, "the store at " + where + " closed the connection");
    }
    if (e == ETIMEDOUT) continue;  // nothing yet: wait_fd waits (interruptibly) for more
    if (e == ECONNRESET) {
      peer_closed = true;
      fail(dcclRemoteError, op, "the store at " + where + " reset the connection");
    }
    fail(dcclSystemError, op, sock::error_text("recv from", "the store at " + where, e));
  }
}

void Bootstrap::Impl::exchange(const std::string& out, std::unordered_map<uint64_t, AwaitedReply>& want,
                               const std::string& op, const Wait& w) {
  if (w.interruptible && interrupted.load(std::memory_order_acquire))
    fail(dcclRemoteError, op, "interrupted", false);
  send_all(out, w, op);
  while (!want.empty()) {
    std::string missing;
    size_t listed = 0;
    for (auto& [req, w] : want) {
      if (listed++ == 8) {
        missing += " and " + std::to_string(want.size() - 8) + " more";
        break;
      }
      missing += (missing.empty() ? "" : ", ") + w.label;
    }
    wire::Frame f = recv_frame(w, op, missing);
    auto it = want.find(f.req);
    if (it == want.end()) {  // the answer to a request that timed out earlier
      DCCL_TRACE("rank %d: dropping a late %s (request %llu) from the store", rank, wire::type_name(f.type),
                 static_cast<unsigned long long>(f.req));
      continue;
    }
    switch (f.type) {
      case FrameType::Value:
        if (it->second.dest == nullptr) fail(dcclRemoteError, op, "protocol error: VALUE for a SET/DEL");
        *it->second.dest = std::move(f.value);
        break;
      case FrameType::Ok:
        if (it->second.dest != nullptr) fail(dcclRemoteError, op, "protocol error: OK for a GET");
        break;
      case FrameType::Error:
        if (std::string_view(f.value).starts_with(wire::kConflict))  // the namespace failed: final
          fail(dcclInvalidUsage, op, "the store at " + where + " failed every rank: " +
                                         f.value.substr(wire::kConflict.size()));
        if (std::string_view(f.value).starts_with(wire::kAbandoned))  // another rank's init failed
          fail(dcclRemoteError, op, f.value.substr(wire::kAbandoned.size()));
        fail(dcclRemoteError, op, "the store at " + where + " rejected " + it->second.label + ": " + f.value,
             false);
      default:
        fail(dcclRemoteError, op, std::string("protocol error: unexpected ") + wire::type_name(f.type) +
                                      " from the store at " + where);
    }
    want.erase(it);
  }
}

std::vector<std::string> Bootstrap::Impl::allgather(const std::string& mine, int nranks,
                                                    const std::string& what) {
  const uint64_t k = round++;
  const std::string op = "bootstrap " + what + " #" + std::to_string(k);
  check_usable(op);
  if (mine.size() > wire::kMaxValue)
    fail(dcclInvalidArgument, op, "blob of " + std::to_string(mine.size()) + " bytes exceeds the 16 MiB limit",
         false);
  auto key = [&](uint64_t round_no, int r) {
    return ns + "/ag/" + std::to_string(round_no) + "/" + std::to_string(r);
  };
  check_key(key(k, nranks - 1), op);
  std::vector<std::string> all(static_cast<size_t>(nranks));
  std::unordered_map<uint64_t, AwaitedReply> want;
  std::string out;
  // Everyone finished round k-2 before anyone could finish round k-1, so our
  // round k-2 key is no longer read: drop it to keep the store small.
  if (k >= 2) {
    want[next_req] = {nullptr, "DEL of round " + std::to_string(k - 2)};
    wire::append_del(out, next_req++, key(k - 2, rank));
  }
  want[next_req] = {nullptr, "SET of our contribution"};
  wire::append_set(out, next_req++, key(k, rank), mine);
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    want[next_req] = {&all[static_cast<size_t>(r)], "rank " + std::to_string(r)};
    wire::append_get(out, next_req++, key(k, r));
  }
  exchange(out, want, op, bounded(timeout, true));
  all[static_cast<size_t>(rank)] = mine;
  return all;
}

Bootstrap::Bootstrap(const UniqueIdData& id, int rank, int nranks, std::chrono::milliseconds timeout,
                     std::unique_ptr<StoreServer> server, std::string ns, Role role,
                     std::chrono::steady_clock::time_point until)
    : impl_(std::make_unique<Impl>()), rank_(rank), nranks_(nranks) {
  impl_->server = std::move(server);
  impl_->cap = until;
  impl_->rank = rank;
  impl_->timeout = timeout;
  impl_->ns = std::move(ns);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    impl_->fail(dcclInvalidArgument, "bootstrap connect",
                "rank " + std::to_string(rank) + " / nranks " + std::to_string(nranks) + " is out of range");
  if (timeout.count() <= 0)
    impl_->fail(dcclInvalidArgument, "bootstrap connect", "timeout must be positive");
  if (impl_->ns.size() > wire::kMaxNamespace)
    impl_->fail(dcclInvalidArgument, "bootstrap connect",
                "key namespace of " + std::to_string(impl_->ns.size()) + " bytes exceeds " +
                    std::to_string(wire::kMaxNamespace));
  if (impl_->server) impl_->server->set_host_label("rank " + std::to_string(rank));
  wire::Hello hello;  // its nonce and proof are made per connection, for the store's challenge
  hello.rank = rank;
  hello.nranks = nranks;
  hello.flags = role == Role::Watch ? wire::kHelloWatch : 0;
  hello.pid = static_cast<uint32_t>(getpid());
  hello.host = core::host_name().substr(0, wire::kMaxHostName);
  hello.ns = impl_->ns;
  impl_->wake = sock::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->wake) impl_->fail(dcclSystemError, "bootstrap connect", "eventfd: " + sock::errno_text(errno));
  impl_->join(id, hello, impl_->plain_wait());
}

const std::string& Bootstrap::store_host() const { return impl_->store_host; }
void Bootstrap::name_host(const std::string& label) {
  if (impl_->server) impl_->server->set_host_label(label);
}
const std::string& Bootstrap::store_address() const { return impl_->where; }
std::unique_ptr<StoreServer> Bootstrap::release_server() { return std::move(impl_->server); }

Bootstrap::~Bootstrap() {
  if (impl_) impl_->fd.reset();  // close our connection before stopping a server we own
}

// SET and LEASE: a key and a value, answered by OK.
void Bootstrap::Impl::send_keyed(const char* verb, const std::string& key, const std::string& value,
                                 AppendKeyed append, const Wait& w) {
  Impl& im = *this;
  const std::string op = std::string("bootstrap ") + verb + " '" + key + "'";
  im.check_usable(op);
  im.check_key(im.ns + key, op);
  if (value.size() > wire::kMaxValue)
    im.fail(dcclInvalidArgument, op, "value of " + std::to_string(value.size()) + " bytes exceeds 16 MiB", false);
  std::string out;
  const uint64_t req = im.next_req++;
  append(out, req, im.ns + key, value);
  std::string upper(verb);
  for (auto& ch : upper) ch = static_cast<char>(toupper(ch));
  std::unordered_map<uint64_t, AwaitedReply> want{{req, {nullptr, upper + " of '" + key + "'"}}};
  im.exchange(out, want, op, w);
}

void Bootstrap::set(const std::string& key, const std::string& value) {
  impl_->send_keyed("set", key, value, wire::append_set, impl_->plain_wait());
}

void Bootstrap::set(const std::string& key, const std::string& value, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) impl_->fail(dcclInvalidArgument, "bootstrap set '" + key + "'", "timeout must be positive", false);
  impl_->send_keyed("set", key, value, wire::append_set, impl_->bounded(timeout, false));
}

void Bootstrap::limit(std::chrono::steady_clock::time_point until) { impl_->cap = until; }
std::chrono::steady_clock::time_point Bootstrap::limit() const { return impl_->cap; }

std::string Bootstrap::local_host() const {
  sock::SockAddr a;
  a.len = sizeof(a.ss);
  if (!impl_->fd || ::getsockname(impl_->fd.get(), a.sa(), &a.len) != 0) return "";
  return sock::host_of(a);
}

std::string Bootstrap::get(const std::string& key) { return get(key, impl_->timeout); }

std::string Bootstrap::get(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string op = "bootstrap get '" + key + "'";
  impl_->check_usable(op);
  if (timeout.count() <= 0) impl_->fail(dcclInvalidArgument, op, "timeout must be positive", false);
  impl_->check_key(impl_->ns + key, op);
  std::string out, value;
  const uint64_t req = impl_->next_req++;
  wire::append_get(out, req, impl_->ns + key);
  std::unordered_map<uint64_t, AwaitedReply> want{{req, {&value, "key '" + impl_->ns + key + "'"}}};
  impl_->exchange(out, want, op, impl_->bounded(timeout, true));
  return value;
}

void Bootstrap::lease(const std::string& key, const std::string& value) {
  impl_->send_keyed("lease", key, value, wire::append_lease, impl_->plain_wait());
}

void Bootstrap::lease_init(const std::string& who) {
  lease(std::string(wire::kAbandonKey), who + " exited during init");
}

void Bootstrap::abandon(const std::string& why) noexcept {
  try {
    // A second of its own: init's deadline, which caps the other waits, may be past.
    const auto bound = std::chrono::milliseconds(1000);
    impl_->send_keyed("set", std::string(wire::kAbandonKey), why, wire::append_set, Wait{Clock::now() + bound, bound});
  } catch (const std::exception& e) {
    DCCL_INFO("could not tell the other ranks that init failed: %s", e.what());
  }
}

void Bootstrap::unlease() {
  const std::string op = "bootstrap unlease";
  impl_->check_usable(op);
  std::string out;
  const uint64_t req = impl_->next_req++;
  wire::append_unlease(out, req);
  std::unordered_map<uint64_t, AwaitedReply> want{{req, {nullptr, "UNLEASE"}}};
  impl_->exchange(out, want, op, impl_->plain_wait());
}

void Bootstrap::interrupt() {
  impl_->interrupted.store(true, std::memory_order_release);
  const uint64_t one = 1;
  ssize_t rc;
  do rc = ::write(impl_->wake.get(), &one, sizeof(one));
  while (rc < 0 && errno == EINTR);  // EAGAIN (counter full) still leaves it readable
}

std::vector<std::string> Bootstrap::allgather(const std::string& mine) {
  return impl_->allgather(mine, nranks_, "allgather");
}

void Bootstrap::barrier() { impl_->allgather(std::string(), nranks_, "barrier"); }

}  // namespace dccl::boot
