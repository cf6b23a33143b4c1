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

#include "bootstrap/unique_id.hpp"
#include "coll/ctx.hpp"
#include "core/launcher.hpp"
#include "core/log.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"
#include "net/fabric/provider.hpp"
#include "net/rails.hpp"
#include "net/signals.hpp"
#include "tune/link_model.hpp"

namespace dccl::comm {

using core::describe;
using core::dtype_name;
using core::Error;
using core::load_config;
using core::log_configure;
using core::log_set_rank;
using core::raise;


namespace {
constexpr char kAffinitySep = '\x1f';  // between host id and CPU list in the init allgather

// What is left until `deadline`, at least 1 ms (a wait given 0 would be refused).
std::chrono::milliseconds time_left(Communicator::TimePoint deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

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

Communicator::Communicator(const boot::UniqueIdData& id, int nranks, int rank,
                           std::unique_ptr<boot::StoreServer> server, const std::string& ns, Place place,
                           const core::Config* cfg, TimePoint deadline)
    : cfg_(cfg ? *cfg : load_config()), rank_(rank), nranks_(nranks), place_(place), p2p_send_(nranks), p2p_recv_(nranks) {
  secret_ = id.secret;
  log_set_rank(rank);
  log_configure(cfg_.debug);
  // An interface that is not there is a mistake to report, not a hint to ignore.
  if (!cfg_.socket_ifname.empty() && if_nametoindex(cfg_.socket_ifname.c_str()) == 0)
    raise(dcclInvalidArgument, describe(rank, "init", "DCCL_SOCKET_IFNAME=" + cfg_.socket_ifname +
                                                          ": no such network interface on this host"));
  const auto timeout = std::chrono::milliseconds(cfg_.timeout_ms);
  // Init's phases (the store, the exchanges, the hierarchy's sub-communicators)
  // share one deadline: the store connection's waits end by it until init is done.
  init_deadline_ = deadline != TimePoint{} ? deadline : std::chrono::steady_clock::now() + timeout;
  boot_ = std::make_unique<boot::Bootstrap>(id, rank, nranks, timeout, std::move(server), ns,
                                            boot::Bootstrap::Role::Rank, init_deadline_);

  // Who shares this rank's host: shm and the shared segment there, the network across hosts.
  const std::string host_id = tune::host_identity(cfg_.host_id);
  // With each rank's CPU affinity, so that a rank knows the cores its host's ranks share.
  std::string mine = host_id;
  mine.push_back(kAffinitySep);
  mine.append(tune::affinity_text());
  std::vector<std::string> ids = boot_->allgather(mine), cpus;
  for (std::string& s : ids) {
    const size_t at = s.rfind(kAffinitySep);
    cpus.push_back(at == std::string::npos ? "" : s.substr(at + 1));
    if (at != std::string::npos) s.resize(at);
  }
  topo_ = tune::make_topology(ids, rank);
  std::vector<std::string> host_cpus;
  for (int r : topo_.ranks_on[static_cast<size_t>(topo_.host)]) host_cpus.push_back(cpus[static_cast<size_t>(r)]);
  const int host_cores = tune::union_cpu_count(host_cpus);
  if (rank == 0) DCCL_INFO("topology: %s", topo_.summary().c_str());
  for (int r = 0; r < nranks; ++r) {
    const std::string& h = topo_.names[static_cast<size_t>(topo_.host_of[static_cast<size_t>(r)])];
    peer_names_.push_back("rank " + std::to_string(r) + " on " + h.substr(0, h.find('/')));
  }
  // The process's place on its host, for its rail: inherited from the communicator
  // this one was split from; else the launcher's local rank, else the topology's.
  std::string place_from = "inherited";
  if (place_.local_rank < 0) {
    place_.local_rank = core::launcher_local_rank(&place_from);
    if (place_.local_rank < 0) {
      place_.local_rank = topo_.local_rank;
      place_from = "topology";
    }
  }
  if (place_.local_size < 0) place_.local_size = topo_.local_size;

  // More ranks than cores here: busy-polling only steals the core a peer needs.
  // The cores are the union of the host's ranks' affinities, not this rank's
  // binding (under mpirun each rank may be bound to a core of its own). Decided
  // before the transport is made, whose own waits take the same budget.
  const int local = topo_.local_size;
  if (!cfg_.set_in_env("DCCL_SPIN_US") && host_cores > 0 && local > host_cores) {
    cfg_.spin_us = 0;
    DCCL_INFO("%d ranks on %d cores (the union of this host's ranks' CPU affinities): yielding instead of "
              "spinning while waiting", local, host_cores);
  }

  net::TransportOptions to;
  to.host = host_id;
  to.rank = rank;
  to.nranks = nranks;
  to.provider = cfg_.provider;
  to.spin_us = cfg_.spin_us;
  to.timeout = timeout;
  // Every message is cut at the staging slot size, whatever path each end takes.
  to.max_part_bytes = cfg_.staging_slot_bytes;
  to.want_hmem = cfg_.peer_direct != "0" && mem::cuda_backend() != nullptr;  // the NIC may reach device memory
  to.local_rank = place_.local_rank;
  to.local_size = place_.local_size;
  to.ifnames = cfg_.net_ifname;
  to.stripe_bytes = cfg_.net_stripe_bytes;
  to.sock_bytes = cfg_.net_sock_bytes;
  to.secret = id.secret;
  to.trust_network = cfg_.trust_network;
  static std::once_flag trust_warned;  // once per process, not per sub-communicator
  if (cfg_.trust_network)
    std::call_once(trust_warned, [] {
      DCCL_WARN("DCCL_TRUST_NETWORK=1: libfabric providers that identify a peer by its address (tcp;ofi_rxm, "
              "udp;ofi_rxd, sockets) carry the job's data unauthenticated: a process that can reach this "
              "job's network can inject data into its results");
    });
  DCCL_INFO("net: local rank %d of %d (%s) picks the rail", place_.local_rank, place_.local_size, place_from.c_str());
  rxm_eager_ = net::set_provider_defaults(cfg_.rxm_eager_bytes);
  for (const std::string& s : net::reset_and_report_signal_handlers(cfg_.provider))
    DCCL_INFO("signals: default action restored for %s, a provider library DirectCCL does not use", s.c_str());
  net_ = net::Transport::create(to);
  const bool same_host = topo_.nhosts() == 1;
  net_->connect(boot_->allgather(net_->local_blob()), init_deadline_);
  provider_ = net_->provider_summary();
  if (rank == 0)
    for (const auto& line : net_->topology()) DCCL_INFO("topology: %s", line.c_str());
  check_same_settings();

  size_t smem_limit = open_shared_segment(same_host);
  const bool smem_chunks = smem_ && smem_->chunk_bytes() > 0;
  tuner_ = std::make_unique<tune::Tuner>(cfg_.algo, cfg_.chunk_bytes, same_host, smem_limit, smem_chunks,
                                         tune::link_model_for(provider_));
  mem::PathOptions po;
  po.rank = rank;
  po.nranks = nranks;
  po.mode = cfg_.peer_direct;
  po.provider = cfg_.provider;
  po.slot_bytes = cfg_.staging_slot_bytes;
  po.slots = static_cast<int>(cfg_.staging_slots);
  po.cache_bytes = cfg_.reg_cache_bytes;
  mem::PathCounters pc{&stats_.sent_direct, &stats_.recv_direct, &stats_.relayed_host, &stats_.host_copies,
                       &stats_.allocations};
  paths_ = std::make_unique<mem::PathChooser>(*net_, po, pc);
  paths_->log_plan();
  res_.rank = rank;
  res_.nranks = nranks;
  res_.net = net_.get();
  res_.tuner = tuner_.get();
  res_.paths = paths_.get();
  res_.stats = &stats_;
  res_.spin_us = cfg_.spin_us;
  res_.timeout_ms = cfg_.timeout_ms;
  res_.check = cfg_.check;
  res_.smem = smem_.get();
  res_.peer_names = &peer_names_;
  res_.failed = &failed_;
  res_.failure = &failure_;
  watchdog_ = std::make_unique<Watchdog>(
      id, rank, nranks, ns, *boot_, boot_mu_,
      [this](dcclResult_t c, const std::string& t) {
        set_failed(c, t);
        // A thread of ours may be stuck in the provider, sending to
        // a peer that died holding its region's lock.
        if (net_) net_->peers_failed();
      },
      time_left(init_deadline_));
  try {
    make_levels();
    // Every rank has every address (and watches for failures) before anyone sends.
    boot_->barrier();
  } catch (...) {
    watchdog_->stop(false);  // its thread may touch levels_, which goes first
    // The sub-communicators go without meeting their members (whose init fails too).
    std::lock_guard<std::mutex> lk(levels_mu_);
    if (levels_) levels_->halt(dcclRemoteError, "rank " + std::to_string(rank_) + ": init failed", true);
    throw;
  }
  boot_->limit({});
  init_deadline_ = {};
  DCCL_INFO("communicator ready: %d ranks, provider %s", nranks, provider_.c_str());
}

Communicator::~Communicator() {
  // No path frees state that a submission still uses, whatever the timeout
  // (dcclCommDestroy leaks the communicator instead of coming here then).
  while (!quiesce()) DCCL_WARN("destroy: an aborted operation has still not returned; waiting for it");
  {
    std::unique_ptr<CommLevels> levels;  // every rank destroys its sub-communicators at the same point
    {
      std::lock_guard<std::mutex> lk(levels_mu_);
      levels = std::move(levels_);
    }
  }
  // A failed communicator keeps its lease: its failure is known, and the store may be out of reach.
  if (watchdog_) watchdog_->stop(!failed_.load());
  watchdog_.reset();
  if (cfg_.stats) {
    dcclStats_t s = stats();
    fprintf(stderr,
            "DCCL stats rank %d: ops %" PRIu64 " sent_direct %" PRIu64 " recv_direct %" PRIu64
            " relayed_host %" PRIu64 " host_copies %" PRIu64 " registrations %" PRIu64
            " reg_hits %" PRIu64 " reg_misses %" PRIu64 " allocations %" PRIu64 "\n",
            rank_, s.ops, s.bytesSentDirect, s.bytesRecvDirect, s.bytesRelayedHost, s.hostCopies,
            s.registrations, s.regCacheHits, s.regCacheMisses, s.allocations);
  }
  // Peers may still be completing the last operation with this rank (shm reads our
  // memory until they are done): leave together, within the timeout.
  if (!failed_.load() && !finalized_.load() && boot_) {
    try {
      std::lock_guard<std::mutex> lk(boot_mu_);
      boot_->barrier();
    } catch (const Error& e) {
      DCCL_INFO("destroy: leaving without the other ranks: %s", e.what());
    }
  }
  // After a failure the provider may still hold cancelled operations: do not close it
  // (unless the failure is only quiesce()'s notice of cancelled work, with none in flight).
  if (failed_.load() && !announced_ && net_) net_->abandon();
  // Scratch and paths before the transport, transport before the store.
  smem_.reset();
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
  for (const auto& p : res_.scratch)
    if (p) s.allocations += p->allocations();
  if (levels_) levels_->add_stats(&s);
  return s;
}

// Ranks on several hosts, as many on each (and more than one): one sub-communicator
// for this rank's host and one across hosts for its local rank.
void Communicator::make_levels() {
  if (!cfg_.hier || topo_.nhosts() < 2 || !topo_.uniform() || topo_.local_size < 2) return;
  std::unique_ptr<Communicator> local = split(topo_.host, topo_.local_rank);
  std::unique_ptr<Communicator> cross;
  try {
    cross = split(topo_.local_rank, topo_.host);
  } catch (...) {
    // The local one goes without meeting its members, whose init fails too.
    local->halt(dcclRemoteError, "rank " + std::to_string(rank_) + ": init failed", true);
    throw;
  }
  auto levels = std::make_unique<CommLevels>(topo_, cfg_.timeout_ms, cfg_.hier_piece_bytes, std::move(local),
                                             std::move(cross), &res_.deadline);
  res_.levels = levels.get();
  {
    // A stop that came while the sub-communicators were made reaches them too.
    std::lock_guard<std::mutex> lk(levels_mu_);
    levels_ = std::move(levels);
    if (failed_.load(std::memory_order_acquire)) levels_->halt(failure_code_, failure_, false);
  }
  tuner_->set_levels(true, topo_.blocked());
  if (rank_ == 0)
    DCCL_INFO("hierarchy: %d hosts x %d ranks; intra-host and cross-host sub-communicators ready", topo_.nhosts(),
              topo_.local_size);
}

// The segment's chunk as this rank will use it: what the settings check compares, so
// that a rank that set DCCL_SMEM_CHUNK_BYTES to the default and one that left it
// unset (which may differ by rank count) are told apart.
size_t Communicator::smem_chunk_bytes() const {
  return tune::smem_chunk_bytes(cfg_.smem_chunk_bytes, cfg_.set_in_env("DCCL_SMEM_CHUNK_BYTES"), nranks_);
}

// All ranks on this host: a shared segment for one-shot small allreduces and
// pipelined larger ones. Every rank must end up with it or none does, so the
// outcome is agreed on. Returns the one-shot limit (0: none).
size_t Communicator::open_shared_segment(bool same_host) {
  size_t limit = cfg_.smem_bytes;
  if (nranks_ > 4 && limit > (16u << 10)) limit = 16u << 10;
  size_t chunk = smem_chunk_bytes();
  // Two chunk slots per rank; keep the whole segment within 64 MiB.
  const size_t chunk_cap = (32u << 20) / static_cast<size_t>(nranks_ > 0 ? nranks_ : 1);
  if (chunk > chunk_cap) chunk = chunk_cap & ~size_t{63};
  if (!same_host || nranks_ < 2 || (limit == 0 && chunk == 0)) return 0;
  bool ok = true;
  try {
    smem_ = std::make_unique<net::ShmSegment>(
        rank_, nranks_, limit, chunk, [&](const std::string& name) { boot_->set("smem", name); },
        [&] { return boot_->get("smem"); }, [&] { boot_->barrier(); });
  } catch (const Error& e) {
    DCCL_INFO("no shared-memory segment: %s", e.what());
    ok = false;
  }
  for (const auto& v : boot_->allgather(ok ? "1" : "0"))
    if (v != "1") ok = false;
  if (!ok) {
    smem_.reset();
    return 0;
  }
  return limit;
}

// Settings that shape the wire must agree, or ranks would wait on each other forever.
void Communicator::check_same_settings() {
  std::string mine = "DCCL_STAGING_SLOT_BYTES=" + std::to_string(cfg_.staging_slot_bytes) +
                     " DCCL_CHUNK_BYTES=" + std::to_string(cfg_.chunk_bytes) + " DCCL_ALGO='" + cfg_.algo + "'" +
                     " DCCL_SMEM_BYTES=" + std::to_string(cfg_.smem_bytes) +
                     " DCCL_SMEM_CHUNK_BYTES=" + std::to_string(smem_chunk_bytes()) +
                     " DCCL_HIER=" + std::to_string(cfg_.hier) +
                     " DCCL_HIER_PIECE_BYTES=" + std::to_string(cfg_.hier_piece_bytes) +
                     " DCCL_CHECK=" + std::to_string(cfg_.check ? 1 : 0) +
                     " DCCL_TRUST_NETWORK=" + std::to_string(cfg_.trust_network) +
                     " FI_OFI_RXM_EAGER_LIMIT=" + (rxm_eager_.empty() ? "(default)" : rxm_eager_);
  std::vector<std::string> all = boot_->allgather(mine);
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != mine)
      raise(dcclInvalidUsage, describe(rank_, "init", "settings differ between ranks: this rank has " + mine +
                                                          ", rank " + std::to_string(r) + " has " + all[r]));
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const core::Config* cfg) {
  const std::string op = "split";
  if (color < 0 && color != DCCL_SPLIT_NOCOLOR)
    raise(dcclInvalidArgument, describe(rank_, op, "color " + std::to_string(color) +
                                                       " is negative but not DCCL_SPLIT_NOCOLOR"));
  if (failed_.load()) raise(failure_code_, describe(rank_, op, "communicator failed earlier: " + failure_));
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
  for (int r = 0; r < nranks_; ++r) {
    long long c = 0, k = 0;
    const std::string& theirs = all[static_cast<size_t>(r)];
    const std::string head = name + " ";
    if (theirs.compare(0, head.size(), head) != 0 || sscanf(theirs.c_str() + head.size(), "%lld %lld", &c, &k) != 2)
      raise(dcclInvalidUsage,
            describe(rank_, op, "rank " + std::to_string(r) + " did not call dcclCommSplit with this rank (split #" +
                                    std::to_string(splits_ - 1) + " of this communicator): it " +
                                    (theirs.empty() ? "met it in dcclCommDestroy, dcclCommFinalize or another barrier"
                                                    : "sent '" + theirs.substr(0, 64) + "'") +
                                    "; every rank must call dcclCommSplit the same number of times, in the same order"));
    if (c == color) members.emplace_back(k, r);
  }
  if (color == DCCL_SPLIT_NOCOLOR) return nullptr;
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (members[static_cast<size_t>(new_rank)].second != rank_) ++new_rank;
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
  } restore{rank_};
  auto child =
      std::make_unique<Communicator>(id, new_n, new_rank, std::move(server), "", place_, cfg ? cfg : &cfg_, deadline);
  std::vector<std::string> names;
  for (const auto& m : members) names.push_back(peer_names_[static_cast<size_t>(m.second)]);
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
  return coll::make_p2p_tag(is_send ? rank_ : peer, n);
}

std::string Communicator::async_error_text() const {
  std::lock_guard<std::mutex> lk(err_mu_);
  return async_text_;
}

void Communicator::set_failed(dcclResult_t code, const std::string& text) {
  {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (failed_.load()) return;
    failure_ = text;
    failure_code_ = code;
    res_.failure_code = code;
    failed_.store(true, std::memory_order_release);
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
  DCCL_WARN("communicator stopped: %s", text.c_str());
}

void Communicator::halt(dcclResult_t code, const std::string& text, bool idle) {
  if (idle) announced_.store(true);
  // The sub-communicator's other members may hear it here first (their own
  // parents tell them too).
  if (!failed_.load() && !finalized_.load() && watchdog_) watchdog_->announce(code, text);
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

void Communicator::abort() { stop("rank " + std::to_string(rank_) + " aborted the communicator"); }

void Communicator::stop(const std::string& text) {
  aborted_.store(true);
  if (!failed_.load() && !finalized_.load() && watchdog_) watchdog_->announce(dcclRemoteError, text);
  set_failed(dcclRemoteError, text);
  std::lock_guard<std::mutex> lk(order_mu_);
  order_cv_.notify_all();
}

}  // namespace dccl::comm
