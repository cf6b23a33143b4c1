// The communicator's construction, step by step: the store, the topology, the
// process's place, the transport, the plan, the data paths, the state shared with
// the scheduler, the failure watcher, the sub-communicators; then every rank meets.
#include <algorithm>
#include <cstdio>
#include <chrono>
#include <mutex>

#include "comm/communicator.hpp"
#include "core/host_sleepers.hpp"
#include "core/launcher.hpp"
#include "core/socket.hpp"
#include "core/log.hpp"
#include "mem/backend.hpp"
#include "net/fabric/provider.hpp"
#include "net/signals.hpp"
#include "tune/plan.hpp"

namespace dccl::comm {

using core::describe;
using core::Error;
using core::raise;

namespace {
constexpr char kAffinitySep = '\x1f';  // between host id and CPU list in the init allgather

// "node7" of "rank 3 on node7".
std::string host_of_rank(const std::string& name) {
  const size_t at = name.find(" on ");
  return at == std::string::npos ? name : name.substr(at + 4);
}

// The same on every rank of a communicator, different for another (its store or namespace).
std::string recorder_comm_id(const boot::UniqueIdData& id, const std::string& ns) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : id.host + ":" + std::to_string(id.port) + "/" + ns) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  char out[20];
  snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// What is left until `deadline`, at least 1 ms (a wait given 0 would be refused).
std::chrono::milliseconds time_left(Communicator::TimePoint deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}
}  // namespace

Communicator::Communicator(const boot::UniqueIdData& id, int nranks, int rank,
                           std::unique_ptr<boot::StoreServer> server, const std::string& ns, Place place,
                           const core::Config* cfg, TimePoint deadline, std::string label, int log_rank)
    : cfg_(cfg ? *cfg : core::load_config()),
      place_(place),
      label_(label.empty() ? "rank " + std::to_string(rank) : std::move(label)),
      log_rank_(log_rank >= 0 ? log_rank : rank),
      p2p_send_(nranks),
      p2p_recv_(nranks) {
  state_.rank = rank;
  state_.nranks = nranks;
  state_.timeout_ms = cfg_.timeout_ms;
  secret_ = id.secret;
  core::log_set_rank(log_rank_);
  core::log_configure(cfg_.debug);
  // A bad DCCL_ALGO, or an interface that is not there (a mistake to report, not a
  // hint to ignore), fails here, before the transport is made; the others learn it.
  try {
    tune::check_algo_override(cfg_.algo);
    sock::check_socket_ifname(cfg_.socket_ifname);
  } catch (const Error& e) {
    fail_before_join(id, nranks, rank, std::move(server), ns, e.code(), describe(rank, "init", e.what()), deadline,
                     label_);
  }
  open_store(id, std::move(server), ns, deadline);
  // Until init ends, a failure here (or this process's end) fails the other ranks'
  // init at once, naming this rank and the cause, instead of at their timeout.
  const std::string who = rank_who(label_);
  boot_->lease_init(who);
  try {
    std::string host_id;
    const int host_cores = learn_topology(&host_id);
    // The board of this job's sleepers on this host (core/host_sleepers.hpp), unlinked
    // once every rank here has mapped it: after the settings' exchange below.
    struct Board {
      std::string name;
      bool opened = false;
      ~Board() {
        if (opened) core::HostSleepers::unlink(name);
      }
    } board{core::HostSleepers::board_name(std::string(id.secret.begin(), id.secret.end()) + ns, host_id)};
    board.opened = core::HostSleepers::join(board.name, topo_.local_size);
    place_process();
    start_recorder(id, ns);
    // Decided before the transport is made, whose own waits take the same budget.
    const tune::SpinPlan spin = tune::spin_plan(topo_.local_size, host_cores, cfg_);
    if (spin.spin_us != cfg_.spin_us) DCCL_INFO("%s", spin.why.c_str());
    open_transport(id, host_id, spin.spin_us);
    make_plan(host_cores);
    check_same_settings();
    open_shared_segment();
    tuner_ = std::make_unique<tune::Tuner>(plan_);
    make_paths();
    share_state();
    start_watchdog(id, ns);
    start_status(id, ns);
    join();
  } catch (const std::exception& e) {
    boot_->abandon(who + " failed its init: " + e.what());
    boot::park_server(boot_->release_server());  // ranks that come later learn the cause
    throw;
  }
  DCCL_INFO("communicator ready: %d ranks, provider %s", nranks, provider_.c_str());
}

void fail_before_join(const boot::UniqueIdData& id, int nranks, int rank, std::unique_ptr<boot::StoreServer> server,
                      const std::string& ns, dcclResult_t code, const std::string& what,
                      std::chrono::steady_clock::time_point until, const std::string& label) {
  std::chrono::milliseconds bound = boot::Bootstrap::kTellBound;
  if (until != std::chrono::steady_clock::time_point{}) bound = std::min(bound, time_left(until));
  try {
    boot::Bootstrap b(id, rank, nranks, bound, nullptr, ns, boot::Bootstrap::Role::Rank,
                      std::chrono::steady_clock::now() + bound);
    const std::string who = rank_who(label.empty() ? "rank " + std::to_string(rank) : label);
    b.lease_init(who);
    b.abandon(who + " failed its init: " + what);
  } catch (const std::exception& e) {
    DCCL_INFO("rank %d: could not tell the other ranks that its init failed: %s", rank, e.what());
  }
  boot::park_server(std::move(server));
  raise(code, what);
}

// Init's phases (the store, the exchanges, the hierarchy's sub-communicators) share
// one deadline: the store connection's waits end by it until init is done.
void Communicator::open_store(const boot::UniqueIdData& id, std::unique_ptr<boot::StoreServer> server,
                              const std::string& ns, TimePoint deadline) {
  const auto timeout = std::chrono::milliseconds(cfg_.timeout_ms);
  init_deadline_ = deadline != TimePoint{} ? deadline : std::chrono::steady_clock::now() + timeout;
  boot_ = std::make_unique<boot::Bootstrap>(id, state_.rank, state_.nranks, timeout, std::move(server), ns,
                                            boot::Bootstrap::Role::Rank, init_deadline_);
  boot_->name_host(label_);  // before any watcher connects: they come after init's exchanges
}

// Who shares this rank's host (shm and the shared segment there, the network across
// hosts), with each rank's CPU affinity, so that a rank knows the cores its host's
// ranks share; errors name each rank with its host.
int Communicator::learn_topology(std::string* host_id) {
  *host_id = topo::host_identity(cfg_.host_id);
  std::string mine = *host_id;
  mine.push_back(kAffinitySep);
  mine.append(topo::affinity_text());
  std::vector<std::string> ids = boot_->allgather(mine), cpus;
  for (std::string& s : ids) {
    const size_t at = s.rfind(kAffinitySep);
    cpus.push_back(at == std::string::npos ? "" : s.substr(at + 1));
    if (at != std::string::npos) s.resize(at);
  }
  topo_ = topo::make_topology(ids, state_.rank);
  std::vector<std::string> host_cpus;
  for (int r : topo_.ranks_on[static_cast<size_t>(topo_.host)]) host_cpus.push_back(cpus[static_cast<size_t>(r)]);
  if (state_.rank == 0) DCCL_INFO("topology: %s", topo_.summary().c_str());
  for (int r = 0; r < state_.nranks; ++r) {
    const std::string& h = topo_.names[static_cast<size_t>(topo_.host_of[static_cast<size_t>(r)])];
    state_.peer_names.push_back("rank " + std::to_string(r) + " on " + h.substr(0, h.find('/')));
  }
  return topo::union_cpu_count(host_cpus);
}

// The process's place on its host, for its rail: inherited from the communicator
// this one was split from; else the launcher's local rank, else the topology's.
void Communicator::place_process() {
  std::string from = "inherited";
  if (place_.local_rank < 0) {
    place_.local_rank = core::launcher_local_rank(&from);
    if (place_.local_rank < 0) {
      place_.local_rank = topo_.local_rank;
      from = "topology";
    }
  }
  if (place_.local_size < 0) place_.local_size = topo_.local_size;
  DCCL_INFO("net: local rank %d of %d (%s) picks the rail", place_.local_rank, place_.local_size, from.c_str());
}

void Communicator::open_transport(const boot::UniqueIdData& id, const std::string& host_id, int64_t spin_us) {
  net::TransportOptions to;
  to.host = host_id;
  to.rank = state_.rank;
  to.nranks = state_.nranks;
  to.provider = cfg_.provider;
  to.spin_us = spin_us;
  to.timeout = std::chrono::milliseconds(cfg_.timeout_ms);
  // Every message is cut at the staging slot size, whatever path each end takes.
  to.max_part_bytes = cfg_.staging_slot_bytes;
  to.want_hmem = cfg_.peer_direct != "0" && mem::cuda_backend() != nullptr;  // the NIC may reach device memory
  to.local_rank = place_.local_rank;
  to.local_size = place_.local_size;
  to.ifnames = cfg_.net_ifname;
  to.stripe_bytes = cfg_.net_stripe_bytes;
  to.sock_bytes = cfg_.net_sock_bytes;
  to.flows = static_cast<int>(cfg_.net_flows);
  to.flow_window = cfg_.net_flow_window_bytes;
  to.tcp_congestion = cfg_.net_tcp_congestion;
  to.lane_balance = cfg_.net_lane_balance;
  to.lane_window = cfg_.net_lane_window_bytes;
  to.secret = id.secret;
  to.trust_network = cfg_.trust_network;
  static std::once_flag trust_warned;  // once per process, not per sub-communicator
  if (cfg_.trust_network)
    std::call_once(trust_warned, [] {
      DCCL_WARN("DCCL_TRUST_NETWORK=1: libfabric providers that identify a peer by its address (tcp;ofi_rxm, "
              "udp;ofi_rxd, sockets) carry the job's data unauthenticated: a process that can reach this "
              "job's network can inject data into its results");
    });
  rxm_eager_ = net::set_provider_defaults(cfg_.rxm_eager_bytes);
  for (const std::string& s : net::reset_and_report_signal_handlers(cfg_.provider))
    DCCL_INFO("signals: default action restored for %s, a provider library DirectCCL does not use", s.c_str());
  net_ = net::Transport::create(to);
  net_->connect(boot_->allgather(net_->local_blob()), init_deadline_);
  provider_ = net_->provider_summary();
  if (state_.rank == 0)
    for (const auto& line : net_->topology()) DCCL_INFO("topology: %s", line.c_str());
}

void Communicator::make_plan(int host_cores) {
  plan_ = tune::make_plan({.nranks = state_.nranks, .nhosts = topo_.nhosts(), .local_size = topo_.local_size,
                           .uniform = topo_.uniform(), .host_cores = host_cores, .provider = provider_},
                          cfg_);
}

void Communicator::make_paths() {
  mem::PathOptions po;
  po.rank = state_.rank;
  po.nranks = state_.nranks;
  po.mode = cfg_.peer_direct;
  po.provider = cfg_.provider;
  po.slot_bytes = cfg_.staging_slot_bytes;
  po.slots = static_cast<int>(cfg_.staging_slots);
  po.cache_bytes = cfg_.reg_cache_bytes;
  mem::PathCounters pc{&stats_.sent_direct, &stats_.recv_direct, &stats_.staged_host, &stats_.host_copies,
                       &stats_.allocations};
  paths_ = std::make_unique<mem::PathChooser>(*net_, po, pc);
  paths_->log_plan();
}

// What the scheduler and the collectives' contexts reference from here on.
void Communicator::share_state() {
  state_.net = net_.get();
  state_.segment = segment_.get();
  state_.spin_us = plan_.spin.spin_us;
  state_.busy_widen_bytes = plan_.spin.busy_widen_bytes;
  res_.comm = &state_;
  res_.tuner = tuner_.get();
  res_.paths = paths_.get();
  res_.stats = &stats_;
  res_.check = cfg_.check;
  res_.rec = rec_.get();
}

void Communicator::start_watchdog(const boot::UniqueIdData& id, const std::string& ns) {
  watchdog_ = std::make_unique<Watchdog>(
      id, state_.rank, label_, state_.nranks, ns, *boot_, boot_mu_,
      [this](dcclResult_t c, const std::string& t) {
        if (leaving_.load() == 2) return;  // destroy met the other ranks already
        set_failed(c, t);
        // A thread of ours may be stuck in the provider, sending to
        // a peer that died holding its region's lock.
        if (net_) net_->peers_failed();
        if (leaving_.load() == 1) boot_->interrupt();  // destroy's barrier: the failed rank never comes
      },
      time_left(init_deadline_));
}

// The flight recorder (docs/observability.md), named by rank, host and communicator.
void Communicator::start_recorder(const boot::UniqueIdData& id, const std::string& ns) {
  rec_ = std::make_unique<core::Recorder>(static_cast<size_t>(cfg_.recorder));
  rec_->identify(state_.rank, state_.nranks, host_of_rank(state_.peer_names[static_cast<size_t>(state_.rank)]).c_str(),
                 recorder_comm_id(id, ns).c_str(), cfg_.recorder_dir.c_str());
  std::vector<std::string> hosts;
  for (const std::string& n : state_.peer_names) hosts.push_back(host_of_rank(n));
  rec_->set_hosts(hosts);
  if (cfg_.recorder_dir.empty() || !rec_->on()) return;
  core::Recorder::install_signal_handlers();
  const std::string bad = core::Recorder::prepare_dir(cfg_.recorder_dir);
  if (!bad.empty())
    DCCL_WARN("rank %d: DCCL_RECORDER_DIR=%s: %s; this rank's flight recorder dumps will not be written", state_.rank,
              cfg_.recorder_dir.c_str(), bad.c_str());
}

// The live view (dccl-info --job) and dumps asked for by other ranks.
void Communicator::start_status(const boot::UniqueIdData& id, const std::string& ns) {
  if (cfg_.status_ms <= 0) return;
  if (state_.rank == 0) boot_->set(StatusPublisher::kDumpKey, "0");
  status_ = std::make_unique<StatusPublisher>(id, state_.rank, state_.nranks, ns, rec_->host(), *rec_,
                                              [this] { return stats(); }, std::chrono::milliseconds(cfg_.status_ms),
                                              time_left(init_deadline_));
}

void Communicator::join() {
  try {
    make_levels();
    // Every rank has every address (and watches for failures) before anyone sends.
    boot_->barrier();
  } catch (...) {
    watchdog_->stop(false);  // its thread may touch levels_, which goes first
    // The sub-communicators go without meeting their members (whose init fails too).
    std::lock_guard<std::mutex> lk(levels_mu_);
    if (levels_) levels_->halt(dcclRemoteError, "rank " + std::to_string(state_.rank) + ": init failed", true);
    throw;
  }
  boot_->limit({});
  init_deadline_ = {};
}

// Ranks on several hosts, as many on each (and more than one): one sub-communicator
// for this rank's host and one across hosts for its local rank.
void Communicator::make_levels() {
  if (!plan_.hier) return;
  std::unique_ptr<Communicator> local = split(topo_.host, topo_.local_rank);
  std::unique_ptr<Communicator> cross;
  try {
    cross = split(topo_.local_rank, topo_.host);
  } catch (...) {
    // The local one goes without meeting its members, whose init fails too.
    local->halt(dcclRemoteError, "rank " + std::to_string(state_.rank) + ": init failed", true);
    throw;
  }
  auto levels = std::make_unique<CommLevels>(topo_, cfg_.timeout_ms, plan_.hier_piece_bytes, std::move(local),
                                             std::move(cross), &res_.deadline);
  res_.levels = levels.get();
  {
    // A stop that came while the sub-communicators were made reaches them too.
    std::lock_guard<std::mutex> lk(levels_mu_);
    levels_ = std::move(levels);
    if (state_.fail.raised()) levels_->halt(state_.fail.code(), state_.fail.text(), false);
  }
  tuner_->set_levels(true, topo_.ranks_by_host());
  if (state_.rank == 0)
    DCCL_INFO("hierarchy: %d hosts x %d ranks; intra-host and cross-host sub-communicators ready", topo_.nhosts(),
              topo_.local_size);
}

// All ranks on this host: a shared segment for one-shot small allreduces and
// pipelined larger ones, as the plan sizes it. Every rank must end up with it or
// none does, so the outcome is agreed on; the plan records it.
void Communicator::open_shared_segment() {
  if (!plan_.segment) return;
  bool ok = true;
  try {
    segment_ = std::make_unique<net::SharedSegment>(
        state_.rank, state_.nranks, plan_.segment_oneshot_bytes, plan_.segment_chunk_bytes,
        [&](const std::string& name) { boot_->set("segment", name); }, [&] { return boot_->get("segment"); },
        [&] { boot_->barrier(); });
  } catch (const Error& e) {
    DCCL_INFO("no shared-memory segment: %s", e.what());
    ok = false;
  }
  for (const auto& v : boot_->allgather(ok ? "1" : "0"))
    if (v != "1") ok = false;
  if (!ok) {
    segment_.reset();
    plan_.segment = false;
  }
}

// Settings that shape the wire must agree, or ranks would wait on each other forever.
void Communicator::check_same_settings() {
  std::string mine = "DCCL_STAGING_SLOT_BYTES=" + std::to_string(cfg_.staging_slot_bytes) +
                     " DCCL_CHUNK_BYTES=" + std::to_string(cfg_.chunk_bytes) + " DCCL_ALGO='" + cfg_.algo + "'" +
                     " DCCL_SEGMENT_BYTES=" + std::to_string(cfg_.segment_bytes) +
                     " DCCL_SEGMENT_CHUNK_BYTES=" + std::to_string(plan_.segment_chunk_bytes) +
                     " DCCL_HIER=" + std::to_string(cfg_.hier) +
                     " DCCL_HIER_PIECE_BYTES=" + std::to_string(cfg_.hier_piece_bytes) +
                     " DCCL_CHECK=" + std::to_string(cfg_.check ? 1 : 0) +
                     " DCCL_TRUST_NETWORK=" + std::to_string(cfg_.trust_network) +
                     " FI_OFI_RXM_EAGER_LIMIT=" + (rxm_eager_.empty() ? "(default)" : rxm_eager_);
  std::vector<std::string> all = boot_->allgather(mine);
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != mine)
      raise(dcclInvalidUsage, describe(state_.rank, "init", "settings differ between ranks: this rank has " + mine +
                                                          ", rank " + std::to_string(r) + " has " + all[r]));
}

}  // namespace dccl::comm
