#include "comm/communicator.hpp"

#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <cstdio>
#include <thread>
#include <cinttypes>
#include <cerrno>
#include <cstring>

#include "bootstrap/unique_id.hpp"
#include "coll/call_context.hpp"
#include "core/launcher.hpp"
#include "core/log.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"
#include "net/fabric/provider.hpp"
#include "net/rails.hpp"
#include "net/signals.hpp"
#include "tune/plan.hpp"

namespace dccl::comm {

using core::describe;
using core::dtype_name;
using core::Error;
using core::load_config;
using core::log_configure;
using core::log_set_rank;
using core::raise;


namespace {
// Caps the store connection's waits at a call's deadline while in scope (the
// caller holds the connection's lock, or is the only user).
struct Capped {
  boot::Bootstrap& boot;
  Communicator::TimePoint prev;
  Capped(boot::Bootstrap& b, Communicator::TimePoint until) : boot(b), prev(b.limit()) { b.limit(until); }
  ~Capped() { boot.limit(prev); }
  Capped(const Capped&) = delete;
  Capped& operator=(const Capped&) = delete;
};
}  // namespace

Communicator::~Communicator() {
  // No path frees state that a submission still uses, whatever the timeout
  // (dcclCommDestroy leaks the communicator instead of coming here then).
  while (!quiesce()) DCCL_WARN("destroy: an aborted operation has still not returned; waiting for it");
  status_.reset();
  {
    std::unique_ptr<CommLevels> levels;  // every rank destroys its sub-communicators at the same point
    {
      std::lock_guard<std::mutex> lk(levels_mu_);
      levels = std::move(levels_);
    }
  }
  if (cfg_.stats) {
    dcclStats_t s = stats();
    fprintf(stderr,
            "DCCL stats rank %d: ops %" PRIu64 " sent_direct %" PRIu64 " recv_direct %" PRIu64
            " staged_host %" PRIu64 " host_copies %" PRIu64 " registrations %" PRIu64
            " reg_hits %" PRIu64 " reg_misses %" PRIu64 " allocations %" PRIu64 "\n",
            state_.rank, s.ops, s.bytesSentDirect, s.bytesRecvDirect, s.bytesRelayedHost, s.hostCopies,
            s.registrations, s.regCacheHits, s.regCacheMisses, s.allocations);
  }
  // Peers may still be completing the last operation with this rank (shm reads our
  // memory until they are done): leave together, within the timeout. The watchdog
  // still listens: a peer that failed (and so skips this barrier) ends it at once.
  leaving_.store(1);
  if (!state_.fail.raised() && !finalized_.load() && !leave_alone_ && boot_) {
    try {
      std::lock_guard<std::mutex> lk(boot_mu_);
      boot_->barrier();
    } catch (const Error& e) {
      DCCL_INFO("destroy: leaving without the other ranks: %s", e.what());
    }
  }
  leaving_.store(2);
  // A failed communicator keeps its lease: its failure is known, and the store may be out of reach.
  if (watchdog_) watchdog_->stop(!state_.fail.raised());
  watchdog_.reset();
  // After a failure the provider may still hold cancelled operations: do not close it
  // (unless the failure is only quiesce()'s notice of cancelled work, with none in flight).
  if (state_.fail.raised() && !announced_ && net_) net_->abandon();
  // Scratch and paths before the transport, transport before the store.
  segment_.reset();
  for (auto& p : res_.scratch) p.reset();
  paths_.reset();
  net_.reset();
  boot_.reset();
}

dcclStats_t Communicator::stats() const {
  dcclStats_t s = stats_.snapshot();
  if (paths_) {
    mem::RegCacheStats c = paths_->cache_stats();
    s.registrations += c.registrations;
    s.regCacheHits += c.hits;
    s.regCacheMisses += c.misses;
  }
  for (const auto& made : res_.scratch_made)  // read while calls run (the status publisher)
    if (const coll::ScratchPool* p = made.load(std::memory_order_acquire)) s.allocations += p->allocations();
  if (levels_) levels_->add_stats(&s);
  return s;
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const core::Config* cfg) {
  const std::string op = "split";
  if (color < 0 && color != DCCL_SPLIT_NOCOLOR)
    raise(dcclInvalidArgument, describe(state_.rank, op, "color " + std::to_string(color) +
                                                       " is negative but not DCCL_SPLIT_NOCOLOR"));
  if (state_.fail.raised()) raise(state_.fail.code(), describe(state_.rank, op, "communicator failed earlier: " + state_.fail.text()));
  const std::string name = "split" + std::to_string(splits_++);
  // One deadline for the whole split, the child's init included (init's, during init).
  const TimePoint deadline = init_deadline_ != TimePoint{}
                                 ? init_deadline_
                                 : std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg_.timeout_ms);
  std::vector<std::string> all;
  {
    std::lock_guard<std::mutex> lk(boot_mu_);
    Capped capped(*boot_, deadline);
    all = boot_->allgather(name + " " + std::to_string(color) + " " + std::to_string(key));
  }
  std::vector<std::pair<long long, int>> members;  // (key, rank) of this color
  for (int r = 0; r < state_.nranks; ++r) {
    long long c = 0, k = 0;
    const std::string& theirs = all[static_cast<size_t>(r)];
    const std::string head = name + " ";
    if (theirs.compare(0, head.size(), head) != 0 || sscanf(theirs.c_str() + head.size(), "%lld %lld", &c, &k) != 2)
      raise(dcclInvalidUsage,
            describe(state_.rank, op, "rank " + std::to_string(r) + " did not call dcclCommSplit with this rank (split #" +
                                    std::to_string(splits_ - 1) + " of this communicator): it " +
                                    (theirs.empty() ? "met it in dcclCommDestroy, dcclCommFinalize or another barrier"
                                                    : "sent '" + theirs.substr(0, 64) + "'") +
                                    "; every rank must call dcclCommSplit the same number of times, in the same order"));
    if (c == color) members.emplace_back(k, r);
  }
  if (color == DCCL_SPLIT_NOCOLOR) return nullptr;
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (members[static_cast<size_t>(new_rank)].second != state_.rank) ++new_rank;
  const int new_n = static_cast<int>(members.size());
  // The new communicator's rank 0 hosts its store; the others learn where from this one's.
  const std::string where = name + "/color" + std::to_string(color);
  std::unique_ptr<boot::StoreServer> server;
  boot::UniqueIdData id;
  // The parent's store carries the child's address and a random salt, never its
  // secret: each member derives that from the salt and this communicator's secret.
  if (new_rank == 0) {
    const std::array<uint8_t, 16> salt = boot::random_secret();
    server = boot::StoreServer::start(child_store_host(), 0, boot::child_secret(secret_, salt));
    id = server->id();
    boot::UniqueIdData published = id;
    published.secret = salt;
    dcclUniqueId raw;
    boot::encode_id(published, &raw);
    std::lock_guard<std::mutex> lk(boot_mu_);
    Capped capped(*boot_, deadline);
    boot_->set(where, boot::id_to_hex(raw));
  } else {
    std::string hex;
    {
      std::lock_guard<std::mutex> lk(boot_mu_);
      Capped capped(*boot_, deadline);
      hex = boot_->get(where);
    }
    id = boot::decode_id(boot::id_from_hex(hex));
    id.secret = boot::child_secret(secret_, id.secret);
  }
  struct RestoreLogRank {
    int rank;
    ~RestoreLogRank() { log_set_rank(rank); }
  } restore{log_rank_};
  // Without settings of its own the child waits as this one decided to (its ranks
  // share their hosts' cores with this communicator's).
  core::Config inherited = cfg_;
  inherited.spin_us = plan_.spin.spin_us;
  auto child =
      std::make_unique<Communicator>(id, new_n, new_rank, std::move(server), "", place_, cfg ? cfg : &inherited, deadline,
                                     label_, log_rank_);
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(state_.peer_names[static_cast<size_t>(m.second)]);
  child->set_peer_names(std::move(names));
  return child;
}

// The members of a split child may be on several hosts: its store must listen where
// they reach this host, not on an address chosen without them (with no default
// route, that was 127.0.0.1). The connection to this communicator's own store
// shows one: it reaches the store's host, which the other members reach as well.
std::string Communicator::child_store_host() {
  if (!cfg_.socket_ifname.empty()) return "";  // StoreServer::start takes DCCL_SOCKET_IFNAME's address
  std::string host;
  {
    std::lock_guard<std::mutex> lk(boot_mu_);
    host = boot_->local_host();
  }
  if (host.empty()) DCCL_INFO("split: the address of the connection to the store is unknown; the child's store "
                              "takes the default-route interface's");
  else DCCL_INFO("split: the child's store listens on %s, the address this rank reaches its store by", host.c_str());
  return host;
}

uint64_t Communicator::next_p2p_tag(int peer, bool is_send) {
  auto& ctr = is_send ? p2p_send_[static_cast<size_t>(peer)] : p2p_recv_[static_cast<size_t>(peer)];
  uint64_t n = ctr.fetch_add(1, std::memory_order_relaxed);
  return coll::make_p2p_tag(is_send ? state_.rank : peer, n);
}

std::string Communicator::async_error_text() const {
  std::lock_guard<std::mutex> lk(err_mu_);
  return async_text_;
}

void Communicator::set_failed(dcclResult_t code, const std::string& text) {
  if (!state_.fail.set(code, text)) return;  // the first cause stays
  {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (async_code_.load() == dcclSuccess) {
      async_text_ = text;
      async_code_.store(code);
    }
  }
  order_cv_.notify_all();
  {
    // The hierarchy's sub-communicators stop with it: a call waiting inside one
    // of their steps ends now, not at its timeout.
    std::lock_guard<std::mutex> lk(levels_mu_);
    if (levels_) levels_->halt(code, text, announced_.load());
  }
  if (rec_ && rec_->on() && !cfg_.recorder_dir.empty() &&  // into DCCL_RECORDER_DIR, if set
      !rec_->dump(((aborted_.load() ? "abort: " : code == dcclTimeout ? "timeout: " : "failure: ") + text).c_str()))
    DCCL_WARN("rank %d: could not write the flight recorder to %s: %s", state_.rank, cfg_.recorder_dir.c_str(),
              strerror(errno));
  DCCL_WARN("communicator stopped: %s", text.c_str());
}

void Communicator::halt(dcclResult_t code, const std::string& text, bool idle) {
  if (idle) announced_.store(true);
  // The sub-communicator's other members may hear it here first (their own
  // parents tell them too).
  if (!state_.fail.raised() && !finalized_.load() && watchdog_) watchdog_->announce(code, text);
  // No shm rescue here (it waits for dead peers, on the failing call's thread): a
  // same-host peer that died closed its connection to this one's store too, and
  // this one's own watcher runs the rescue.
  set_failed(code, text);
}

void Communicator::record_error(const Error& e) {
  std::lock_guard<std::mutex> lk(err_mu_);
  if (async_code_.load() == dcclSuccess) {
    async_text_ = e.what();
    async_code_.store(e.code());
  }
}

void Communicator::abort() { stop("rank " + std::to_string(state_.rank) + " aborted the communicator"); }

void Communicator::stop(const std::string& text) {
  aborted_.store(true);
  if (!state_.fail.raised() && !finalized_.load() && watchdog_) watchdog_->announce(dcclRemoteError, text);
  set_failed(dcclRemoteError, text);
  std::lock_guard<std::mutex> lk(order_mu_);
  order_cv_.notify_all();
}

}  // namespace dccl::comm

namespace dccl::comm {

void Communicator::dump_recorder(const char* dir, const char* reason) {
  if (!rec_->on()) raise(dcclInvalidUsage, describe(state_.rank, "dcclCommDumpRecorder", "the flight recorder is off (DCCL_RECORDER=0)"));
  if ((!dir || !dir[0]) && cfg_.recorder_dir.empty())
    raise(dcclInvalidArgument, describe(state_.rank, "dcclCommDumpRecorder", "no folder: pass one, or set DCCL_RECORDER_DIR"));
  if (!rec_->dump(reason, dir && dir[0] ? dir : nullptr))
    raise(dcclSystemError, describe(state_.rank, "dcclCommDumpRecorder",
                                    std::string("could not write to ") + (dir && dir[0] ? dir : cfg_.recorder_dir.c_str()) +
                                        ": " + strerror(errno)));
}

void Communicator::request_dumps() {
  if (!status_) raise(dcclInvalidUsage, describe(state_.rank, "dcclCommDumpRecorder", "the other ranks take dump requests only "
                                                                                "with DCCL_STATUS_MS > 0"));
  std::lock_guard<std::mutex> lk(boot_mu_);
  const std::string gen = boot_->get(StatusPublisher::kDumpKey);
  boot_->set(StatusPublisher::kDumpKey, std::to_string(std::stoull(gen) + 1));
}

}  // namespace dccl::comm
