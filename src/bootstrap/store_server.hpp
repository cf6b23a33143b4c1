// Private to the bootstrap layer: the store server's state. store_io.cc holds
// the socket plumbing (poll loop, accept, read, write, close), store.cc the
// protocol (HELLO check, SET/GET/DEL, leases, parked GETs) and StoreServer::start.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bootstrap/secret_file.hpp"
#include "core/host.hpp"
#include "core/socket.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/wire.hpp"
#include "core/log.hpp"

namespace dccl::boot::detail {

using sock::Clock;

struct Conn {
  sock::Fd fd;
  std::string peer;
  bool authed = false;
  bool pending = false;  // counted in Server::npending_ (not yet authenticated)
  wire::Nonce nonce{};   // this connection's challenge, sent on accept
  int rank = -1, nranks = 0;
  bool claims = false;   // holds (ns, rank) in its Space: a rank's own connection, not a watcher
  std::string ns, host;  // from HELLO
  uint32_t pid = 0;
  Clock::time_point since;  // accepted
  Clock::time_point hello_deadline;
  std::string in, out;
  size_t in_off = 0, out_off = 0;
  size_t parked = 0;
  std::unordered_map<std::string, size_t> parked_keys;  // key -> GETs parked on it
  bool leased = false;  // LEASE held: SET(lease_key, lease_value) when the connection closes
  std::string lease_key, lease_value;
  size_t lease_bytes() const { return leased ? lease_key.size() + lease_value.size() : 0; }
  bool dirty = false;  // has output queued since the last flush
  bool dead = false, warn = false;
  std::string why;
  bool idle() const { return parked == 0 && out_off == out.size() && in_off == in.size(); }
};

struct Waiter {
  uint64_t conn, req;
};

// The identities claimed in one key namespace (one communicator): one live
// connection per rank, one world size. `formed` once every rank was present at
// the same time: a conflict before then fails the whole namespace (the job cannot
// start as launched); after it, only the newcomer is refused.
struct Space {
  int nranks = 0;
  std::string nranks_by;  // who set nranks, for messages
  std::unordered_map<int, uint64_t> holders;  // rank -> connection
  size_t members = 0;     // authenticated connections of this namespace (claims and watchers)
  bool formed = false;
  std::string failed;     // set: every request of this namespace gets it as ERROR
};

class Server final : public StoreServer {
 public:
  Server(sock::Fd listen, sock::Fd wake, UniqueIdData id, const StoreLimits& lim)
      : listen_(std::move(listen)), wake_(std::move(wake)), id_(std::move(id)), lim_(lim),
        where_("bootstrap store " + id_.host + ":" + std::to_string(id_.port)) {
    self_ = "pid " + std::to_string(getpid()) + " on " + core::host_name();
    thread_ = std::thread([this] { run(); });
  }
  ~Server() override {
    uint64_t one = 1;
    ssize_t rc;
    do rc = ::write(wake_.get(), &one, sizeof(one));
    while (rc < 0 && errno == EINTR);
    thread_.join();
  }
  UniqueIdData id() const override { return id_; }
  void set_host_label(const std::string& label) override {
    std::lock_guard<std::mutex> lk(label_mu_);
    host_label_ = label + " (" + self_ + ")";
  }
  void adopt(std::unique_ptr<SecretFile> f) { secret_file_ = std::move(f); }

 private:
  void run();
  void loop();
  void accept_all();
  void read_conn(uint64_t cid, Conn& c);
  void process(uint64_t cid, Conn& c);
  void handle(uint64_t cid, Conn& c, wire::Frame& f);
  void on_set(uint64_t cid, Conn& c, wire::Frame& f);
  void on_lease(uint64_t cid, Conn& c, wire::Frame& f);
  // The HELLO's identity checks: "" when admitted (the claim is recorded), else the
  // refusal. A conflict in a namespace still forming fails the namespace.
  std::string claim(uint64_t cid, Conn& c, const wire::Frame& f);
  void release_claim(uint64_t cid, Conn& c);
  // Answers every parked GET of the namespace with ERROR(why); later requests get it too.
  void fail_space(const std::string& ns, Space& sp, const std::string& why);
  std::string claim_text(const Conn& c) const;
  std::string welcome_text();
  // Accepted connections not yet authenticated: at most max_pending, the oldest dropped.
  void enforce_pending_cap();
  bool drop_oldest_pending();
  // Flushes queued output, closes expired and dead connections.
  void settle(Clock::time_point now);
  // False (and ERROR queued for `req`) when replacing `old` held bytes by `add`
  // would pass max_total_bytes; values and leases both count.
  bool admit(uint64_t cid, Conn& c, uint64_t req, const char* what, size_t old, size_t add);
  // Stores key = value (the caller has admitted it) and answers the GETs parked on the key.
  void put(const std::string& key, std::string value);
  // Performs the SET a closing connection's lease promised, unless the key exists.
  void fire_lease(Conn& c);
  // put() of a key connection `c` set (or its lease did): wire::kAbandonKey in a
  // claiming connection's namespace (a rank's init failed) then fails the namespace.
  void put_by(const Conn& c, const std::string& key, std::string value);
  void flush(Conn& c);
  // Output is flushed once per loop turn, however many frames were queued.
  void mark(uint64_t cid, Conn& c) {
    if (c.dirty) return;
    c.dirty = true;
    dirty_.push_back(cid);
  }
  void kill(Conn& c, std::string why, bool warn) {
    if (c.dead) return;
    c.dead = true;
    c.warn = warn;
    c.why = std::move(why);
  }
  // `shutdown`: the store is stopping; the connection's lease does not fire.
  void close_conn(uint64_t cid, bool shutdown = false);
  bool drained(Clock::time_point now);
  std::string who(const Conn& c) const {
    std::string s = c.peer;
    if (c.authed)
      s += " (" + std::string(c.claims ? "" : "watcher of ") + "rank " + std::to_string(c.rank) + "/" +
           std::to_string(c.nranks) + (c.ns.empty() ? "" : " in '" + c.ns + "'") + ")";
    return s;
  }

  sock::Fd listen_, wake_;
  UniqueIdData id_;
  StoreLimits lim_;
  std::string where_;
  std::thread thread_;
  std::unordered_map<uint64_t, Conn> conns_;
  uint64_t next_conn_ = 1;
  std::unordered_map<std::string, std::string> kv_;
  size_t total_bytes_ = 0;  // keys + values in kv_
  size_t lease_bytes_ = 0;  // keys + values held by leases
  std::unordered_map<std::string, std::vector<Waiter>> waiting_;
  std::unordered_map<std::string, Space> spaces_;
  std::deque<uint64_t> pending_;  // unauthenticated connections in accept order (some may be gone)
  size_t npending_ = 0, nauthed_ = 0;
  uint64_t dropped_ = 0;  // pending connections dropped for newer ones, not yet logged
  core::LogLimiter unauth_log_, log_;  // peers must not be able to flood the log
  std::mutex label_mu_;
  std::string self_, host_label_;  // "pid P on H"; "rank R (pid P on H)" once the host rank is known
  std::unique_ptr<SecretFile> secret_file_;  // removed when the store stops
  std::vector<uint64_t> dirty_;
  std::vector<char> buf_ = std::vector<char>(size_t{64} << 10);
  Clock::time_point listen_pause_until_{};
  bool draining_ = false;
  Clock::time_point drain_start_{}, idle_since_{};
  bool idle_seen_ = false;
};

}  // namespace dccl::boot::detail
