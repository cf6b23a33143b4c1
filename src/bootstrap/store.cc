// The store server's protocol: the HELLO check, SET/GET/DEL, parked GETs
// answered when their key is set, leases (a SET performed when the leasing
// connection closes); and StoreServer::start.
#include <netinet/in.h>
#include <sys/eventfd.h>

#include <cerrno>

#include "bootstrap/bind_address.hpp"
#include "bootstrap/store_server.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::boot {

namespace detail {

using wire::FrameType;

void Server::process(uint64_t cid, Conn& c) {
  while (!c.dead) {
    const auto* p = reinterpret_cast<const uint8_t*>(c.in.data()) + c.in_off;
    const size_t n = c.in.size() - c.in_off;
    // Before HELLO only a HELLO header is acceptable: never buffer a large frame
    // for someone who has not proved it knows the secret.
    if (!c.authed && n >= wire::kHeaderBytes && p[4] != static_cast<uint8_t>(FrameType::Hello)) {
      kill(c, "first frame has type " + std::to_string(p[4]) + ", not HELLO", true);
      return;
    }
    wire::ParseResult r = wire::parse_frame(p, n);
    if (r.status == wire::ParseStatus::NeedMore) break;
    if (r.status == wire::ParseStatus::Malformed) {
      kill(c, "malformed frame: " + r.error, true);
      return;
    }
    c.in_off += r.consumed;
    handle(cid, c, r.frame);
  }
  if (c.in_off == c.in.size()) {
    c.in.clear();
    c.in_off = 0;
  } else if (c.in_off > (size_t{1} << 20)) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

void Server::handle(uint64_t cid, Conn& c, wire::Frame& f) {
  if (!c.authed) {  // the type was checked in process()
    const wire::Hello said = wire::hello_of(f);
    std::string refusal;
    bool conflict = false;
    if (f.version != wire::kProtocolVersion)
      refusal = "protocol version " + std::to_string(f.version) + " (the store speaks " +
                std::to_string(wire::kProtocolVersion) + ")";
    else if (!wire::proof_ok(f.proof, wire::hello_proof(id_.secret, wire::Prover::Client, c.nonce, said)))
      refusal = "wrong job secret: the HELLO's proof does not match this connection's challenge (the client's "
                "unique id or DCCL_SECRET belongs to another job, or the HELLO was replayed)";
    else if (nauthed_ >= lim_.max_connections)
      refusal = std::string(wire::kBusy) + "too many connections: " + std::to_string(nauthed_) +
                " authenticated connections open (the limit)";
    else if (!(refusal = claim(cid, c, f)).empty())
      conflict = true;
    if (!refusal.empty()) {
      wire::append_refused(c.out, refusal);
      flush(c);
      ::shutdown(c.fd.get(), SHUT_WR);
      const std::string claimant = "rank " + std::to_string(f.rank) + "/" + std::to_string(f.nranks);
      if (conflict && (f.flags & wire::kHelloWatch) != 0 && refusal.rfind("no communicator", 0) == 0)
        DCCL_TRACE("%s: an observer from %s looked for %s", where_.c_str(), c.peer.c_str(), refusal.c_str());
      else if (conflict)
        DCCL_WARN_LIMITED(log_, "%s: refused %s from %s: %s", where_.c_str(), claimant.c_str(), c.peer.c_str(),
                          refusal.c_str());
      else
        DCCL_WARN_LIMITED(unauth_log_, "%s: refused %s from %s: %s", where_.c_str(), claimant.c_str(),
                          c.peer.c_str(), refusal.c_str());
      kill(c, "refused: " + refusal, false);
      return;
    }
    c.authed = true;
    if (c.pending) {
      c.pending = false;
      --npending_;
    }
    ++nauthed_;
    wire::append_welcome(c.out, wire::hello_proof(id_.secret, wire::Prover::Store, c.nonce, said),
                         welcome_text());
    mark(cid, c);
    DCCL_TRACE("%s: %s joined", where_.c_str(), who(c).c_str());
    return;
  }
  auto sp = spaces_.find(c.ns);
  if (sp != spaces_.end() && !sp->second.failed.empty() && f.type != FrameType::Unlease) {
    wire::append_error(c.out, f.req, sp->second.failed);
    mark(cid, c);
    return;
  }
  switch (f.type) {
    case FrameType::Set: on_set(cid, c, f); break;
    case FrameType::Get: {
      auto it = kv_.find(f.key);
      if (it != kv_.end()) {
        wire::append_value(c.out, f.req, it->second);
        mark(cid, c);
      } else if (c.parked >= lim_.max_parked_per_conn) {
        kill(c, "more than " + std::to_string(lim_.max_parked_per_conn) + " GETs waiting", true);
      } else {
        waiting_[f.key].push_back({cid, f.req});
        ++c.parked;
        ++c.parked_keys[f.key];
      }
      break;
    }
    case FrameType::Del: {
      auto it = kv_.find(f.key);
      if (it != kv_.end()) {
        total_bytes_ -= it->first.size() + it->second.size();
        kv_.erase(it);
      }
      wire::append_ok(c.out, f.req);
      mark(cid, c);
      break;
    }
    case FrameType::Lease: on_lease(cid, c, f); break;
    case FrameType::Unlease:
      if (c.leased) {
        lease_bytes_ -= c.lease_bytes();
        c.leased = false;
        DCCL_TRACE("%s: %s released its lease on '%s'", where_.c_str(), who(c).c_str(), c.lease_key.c_str());
        c.lease_key.clear();
        c.lease_value.clear();
      }
      wire::append_ok(c.out, f.req);
      mark(cid, c);
      break;
    default:
      kill(c, std::string("unexpected ") + wire::type_name(f.type) + " frame from a client", true);
  }
}

std::string Server::claim_text(const Conn& c) const {
  std::string t = "pid " + std::to_string(c.pid) + " on " + (c.host.empty() ? "?" : c.host) + ", " + c.peer;
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.since).count();
  if (c.authed) t += ", connected " + std::to_string(age / 1000) + "." + std::to_string(age % 1000 / 100) + " s ago";
  return t;
}

std::string Server::welcome_text() {
  std::lock_guard<std::mutex> lk(label_mu_);
  return host_label_.empty() ? self_ : host_label_;
}

std::string Server::claim(uint64_t cid, Conn& c, const wire::Frame& f) {
  c.ns = f.ns;
  c.host = f.host;
  c.pid = f.pid;
  c.rank = f.rank;
  c.nranks = f.nranks;
  const bool watch = (f.flags & wire::kHelloWatch) != 0;
  Space& sp = spaces_[f.ns];
  const std::string in_ns = f.ns.empty() ? "" : " in namespace '" + f.ns + "'";
  const std::string me = "rank " + std::to_string(f.rank) + " (" + claim_text(c) + ")";
  std::string why;
  if (!sp.failed.empty()) {
    why = sp.failed;
  } else if (watch && sp.members == 0) {
    // A rank's watcher comes after its claim: this is an observer (dccl-info --job) at a namespace with no ranks.
    why = "no communicator" + in_ns;
  } else if (sp.members > 0 && sp.nranks != f.nranks && !(watch && sp.formed)) {
    // (An observer's watch connection, dccl-info --job, comes to a formed namespace without its size.)
    why = std::string(wire::kConflict) + "world size mismatch" + in_ns + ": " + me + " says " +
          std::to_string(f.nranks) + " ranks, but " + sp.nranks_by + " says " + std::to_string(sp.nranks) +
          "; every rank must be given the same world size";
  } else if (auto h = sp.holders.find(f.rank); !watch && h != sp.holders.end()) {
    auto o = conns_.find(h->second);
    why = std::string(wire::kConflict) + "rank " + std::to_string(f.rank) + in_ns + " claimed twice: held by " +
          (o == conns_.end() ? std::string("a connection") : claim_text(o->second)) + ", and now claimed by " +
          claim_text(c) + "; two processes were given the same rank";
  }
  if (!why.empty()) {
    if (sp.failed.empty() && !sp.formed && !watch) fail_space(f.ns, sp, why);
    else if (sp.members == 0 && sp.failed.empty()) spaces_.erase(f.ns);
    return why;
  }
  if (sp.members++ == 0) {
    sp.nranks = f.nranks;
    sp.nranks_by = me;
  }
  if (!watch) {
    c.claims = true;
    sp.holders[f.rank] = cid;
    if (!sp.formed && sp.holders.size() == static_cast<size_t>(sp.nranks)) {
      sp.formed = true;
      DCCL_TRACE("%s: all %d ranks%s joined", where_.c_str(), sp.nranks, in_ns.c_str());
    }
  }
  return "";
}

void Server::release_claim(uint64_t cid, Conn& c) {
  auto it = spaces_.find(c.ns);
  if (it == spaces_.end()) return;
  Space& sp = it->second;
  if (c.claims) {
    auto h = sp.holders.find(c.rank);
    if (h != sp.holders.end() && h->second == cid) sp.holders.erase(h);
  }
  if (--sp.members == 0 && sp.failed.empty()) spaces_.erase(it);  // a failed one stays, for late joiners
}

void Server::fail_space(const std::string& ns, Space& sp, const std::string& why) {
  sp.failed = why;
  const std::string of = ns.empty() ? "" : " of namespace '" + ns + "'";
  DCCL_WARN("%s: failing every rank%s: %s", where_.c_str(), of.c_str(), why.c_str());
  for (auto& [id, o] : conns_) {
    if (!o.authed || o.dead || o.ns != ns) continue;
    for (auto& [key, cnt] : o.parked_keys) {
      auto w = waiting_.find(key);
      if (w == waiting_.end()) continue;
      std::erase_if(w->second, [&, cid = id](const Waiter& x) {
        if (x.conn != cid) return false;
        wire::append_error(o.out, x.req, why);
        return true;
      });
      if (w->second.empty()) waiting_.erase(w);
    }
    o.parked_keys.clear();
    o.parked = 0;
    mark(id, o);
  }
}

bool Server::admit(uint64_t cid, Conn& c, uint64_t req, const char* what, size_t old, size_t add) {
  const size_t held = total_bytes_ + lease_bytes_;
  if (held - old + add <= lim_.max_total_bytes) return true;
  std::string why = "store full: " + std::to_string(held) + " bytes held (values and leases), " + what +
                    " of " + std::to_string(add) + " would pass the limit of " +
                    std::to_string(lim_.max_total_bytes);
  DCCL_WARN("%s: %s from %s", where_.c_str(), why.c_str(), who(c).c_str());
  wire::append_error(c.out, req, why);
  mark(cid, c);
  return false;
}

void Server::on_set(uint64_t cid, Conn& c, wire::Frame& f) {
  auto it = kv_.find(f.key);
  const size_t old = it == kv_.end() ? 0 : it->first.size() + it->second.size();
  if (!admit(cid, c, f.req, "SET", old, f.key.size() + f.value.size())) return;
  wire::append_ok(c.out, f.req);
  mark(cid, c);
  put_by(c, f.key, std::move(f.value));
}

void Server::put_by(const Conn& c, const std::string& key, std::string value) {
  const bool abandons = c.claims && key.size() == c.ns.size() + wire::kAbandonKey.size() && key.starts_with(c.ns) &&
                        key.ends_with(wire::kAbandonKey);
  const std::string why = abandons ? std::string(wire::kAbandoned) + value : std::string();
  put(key, std::move(value));
  if (!abandons) return;
  auto it = spaces_.find(c.ns);
  if (it != spaces_.end() && it->second.failed.empty()) fail_space(c.ns, it->second, why);
}

void Server::on_lease(uint64_t cid, Conn& c, wire::Frame& f) {
  // The lease's bytes are reserved now, so that firing it never fails for space.
  if (!admit(cid, c, f.req, "LEASE", c.lease_bytes(), f.key.size() + f.value.size())) return;
  lease_bytes_ -= c.lease_bytes();
  c.leased = true;
  c.lease_key = std::move(f.key);
  c.lease_value = std::move(f.value);
  lease_bytes_ += c.lease_bytes();
  DCCL_TRACE("%s: %s leased '%s'", where_.c_str(), who(c).c_str(), c.lease_key.c_str());
  wire::append_ok(c.out, f.req);
  mark(cid, c);
}

void Server::fire_lease(Conn& c) {
  if (kv_.contains(c.lease_key)) {
    DCCL_TRACE("%s: %s closed holding a lease on '%s', which is already set", where_.c_str(), who(c).c_str(),
               c.lease_key.c_str());
    return;
  }
  DCCL_WARN("%s: %s closed while holding a lease (%s): setting '%s'", where_.c_str(), who(c).c_str(),
            c.why.c_str(), c.lease_key.c_str());
  put_by(c, c.lease_key, std::move(c.lease_value));
}

void Server::put(const std::string& key, std::string value) {
  auto it = kv_.find(key);
  if (it != kv_.end()) total_bytes_ -= it->first.size() + it->second.size();
  total_bytes_ += key.size() + value.size();
  std::string& stored = kv_[key];
  stored = std::move(value);
  auto w = waiting_.find(key);
  if (w == waiting_.end()) return;
  std::vector<Waiter> ws = std::move(w->second);
  waiting_.erase(w);
  for (const Waiter& x : ws) {
    auto ci = conns_.find(x.conn);
    if (ci == conns_.end()) continue;
    Conn& o = ci->second;
    --o.parked;
    auto pk = o.parked_keys.find(key);
    if (pk != o.parked_keys.end() && --pk->second == 0) o.parked_keys.erase(pk);
    if (o.dead) continue;
    wire::append_value(o.out, x.req, stored);
    mark(x.conn, o);
  }
}

}  // namespace detail

std::unique_ptr<StoreServer> StoreServer::start(const std::string& host, uint16_t port,
                                                const std::array<uint8_t, 16>& secret) {
  return start(host, port, secret, StoreLimits{});
}

std::unique_ptr<StoreServer> StoreServer::start(const std::string& host, uint16_t port,
                                                const std::array<uint8_t, 16>& secret,
                                                const StoreLimits& limits) {
  const std::string op = "start bootstrap store";
  // The secret file published for this store goes when the store goes, or now if it cannot start.
  std::unique_ptr<SecretFile> file = adopt_secret_file(secret, port);
  const std::string h = host.empty() ? default_bind_host() : host;
  sock::SockAddr a;
  std::string why;
  if (!sock::resolve(h, port, &a, &why)) core::raise(dcclInvalidArgument, core::describe(-1, op, why));
  const std::string where = sock::addr_to_string(a);
  auto sys_fail = [&](const char* call) {
    core::raise(dcclSystemError, core::describe(-1, op, std::string(call) + " " + where + ": " +
                                                            sock::errno_text(errno)));
  };
  sock::Fd s(::socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) sys_fail("socket");
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.get(), a.sa(), a.len) != 0) sys_fail("bind");
  if (::listen(s.get(), SOMAXCONN) != 0) sys_fail("listen");
  sock::SockAddr bound;
  bound.len = sizeof(bound.ss);
  if (::getsockname(s.get(), bound.sa(), &bound.len) != 0) sys_fail("getsockname");
  sock::Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) sys_fail("eventfd");

  UniqueIdData id;
  id.host = sock::is_wildcard(bound) ? default_bind_host() : sock::host_of(bound);
  id.port = sock::port_of(bound);
  id.secret = secret;
  DCCL_INFO("bootstrap store listening on %s (advertised as %s:%u)", sock::addr_to_string(bound).c_str(),
            id.host.c_str(), static_cast<unsigned>(id.port));
  auto server = std::make_unique<detail::Server>(std::move(s), std::move(wake), std::move(id), limits);
  server->adopt(std::move(file));
  return server;
}

}  // namespace dccl::boot
