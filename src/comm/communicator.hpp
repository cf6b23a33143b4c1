// Communicator: composes bootstrap, transport, tuner and scheduler for one rank.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "coll/comm_state.hpp"
#include "coll/scratch.hpp"
#include "core/config.hpp"
#include "core/process.hpp"
#include "comm/levels.hpp"
#include "comm/status.hpp"
#include "core/recorder.hpp"
#include "comm/watchdog.hpp"
#include "net/transport.hpp"
#include "sched/executor.hpp"
#include "sched/op.hpp"
#include "sched/stats.hpp"
#include "sched/stream.hpp"
#include "topo/topology.hpp"
#include "tune/tuner.hpp"

namespace dccl::comm {

// This process's place on its host: its local rank picks its network rail, and a
// host with one process may stripe across rails. Every communicator of a process
// uses the same place, so split() hands its own to the children; -1: derive it
// (launcher variables for the local rank, else the communicator's topology).
struct ProcessPlace {
  int local_rank = -1, local_size = -1;
};

// A rank whose init fails before it joined the store (a bad setting found first)
// still tells the other ranks through the store, so that their init fails at once
// naming this rank and the cause instead of waiting for it until DCCL_TIMEOUT_S:
// connects within Bootstrap::kTellBound (and by `until`, if given), sets the abandon
// mark (as a failed init does), parks
// `server` (the store this rank hosts, if any: it stays up, so that ranks that come
// later are refused with the cause), then throws Error(code, what). Errors of the
// store are logged only. `label`: how the others' errors name this rank ("rank R").
// For a failure of the job's init (its settings, its host); not for a call's own
// arguments, which are refused leaving the id usable.
[[noreturn]] void fail_before_join(const boot::UniqueIdData& id, int nranks, int rank,
                                   std::unique_ptr<boot::StoreServer> server, const std::string& ns,
                                   dcclResult_t code, const std::string& what,
                                   std::chrono::steady_clock::time_point until = {},
                                   const std::string& label = {});

class Communicator {
 public:
  // Rendezvous through the store in `id`, open the transport, exchange addresses.
  // `server` is the store this rank hosts (or null). `cfg`: the settings (null: the
  // environment's, load_config()). `deadline`: init's phases end by it (default:
  // DCCL_TIMEOUT_S from now; split() passes its own). `label`: how failure reports
  // name this rank (its lease, and the store it hosts): "rank R" by default; a split
  // child's rank as its parent names it. `log_rank`: the rank its log lines carry
  // (-1: `rank`; a split child: its parent's, so that one process's lines all carry
  // one rank). Throws Error on failure.
  using Place = ProcessPlace;
  using TimePoint = std::chrono::steady_clock::time_point;
  Communicator(const boot::UniqueIdData& id, int nranks, int rank, std::unique_ptr<boot::StoreServer> server,
               const std::string& ns, Place place = {}, const core::Config* cfg = nullptr, TimePoint deadline = {},
               std::string label = {}, int log_rank = -1);
  ~Communicator();

  int rank() const { return state_.rank; }
  int nranks() const { return state_.nranks; }
  const core::Config& config() const { return cfg_; }
  const std::string& provider() const { return provider_; }
  const topo::Topology& topology() const { return topo_; }
  const Place& place() const { return place_; }
  const net::Transport& transport() const { return *net_; }

  // Collective over this communicator (NCCL's ncclCommSplit): the ranks passing
  // the same color >= 0 form a new communicator, ranked by (key, rank here);
  // a negative color (DCCL_SPLIT_NOCOLOR) takes part and gets nullptr. The new
  // communicator has a store of its own, hosted by its rank 0, so it outlives
  // this one.
  // `cfg`: the child's settings (null: this communicator's).
  std::unique_ptr<Communicator> split(int color, int key, const core::Config* cfg = nullptr);
  // How errors name each rank ("rank 3 on node7"); split() gives a child its
  // members' names here, so that errors name ranks as the application knows them.
  void set_peer_names(std::vector<std::string> names) { state_.peer_names = std::move(names); }

  uint64_t next_seq() { return seq_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t next_p2p_tag(int peer, bool is_send);

  // Runs `ops` in this communicator's submission order: inline when stream is null
  // (throws on error), else queued on the stream.
  void submit(std::vector<sched::Op> ops, sched::Stream* stream);
  // One operation: on the NULL stream it runs here without copying it anywhere.
  void submit_one(const sched::Op& op, sched::Stream* stream);
  // A submission whose place in this communicator's order is taken now and that the
  // caller runs later on a thread of its choosing (a group over several streams or
  // communicators, api/group.cc): call it once, with true to run it (throws on
  // error) or false to give its turn up unrun.
  std::function<void(bool)> reserve(std::vector<sched::Op> ops);

  // dcclRedOpCreatePreMulSum / dcclRedOpDestroy: ops numbered from dcclNumOps,
  // lowest free slot first (so ranks creating in the same order agree).
  dcclRedOp_t create_premul(const void* scalar, dcclDataType_t dt, bool immediate);
  void destroy_premul(dcclRedOp_t op);
  // A call's op beyond the built-in ones: sets op's premul fields (op becomes a
  // sum), or throws naming `fn` when it is not a live PreMulSum of this datatype.
  void resolve_premul(sched::Op& op, const char* fn) const;
  // dcclCommRegister / dcclCommDeregister (see mem::PathChooser::register_user).
  void* register_buffer(const void* p, size_t bytes);
  void deregister_buffer(void* handle);

  // The process that made this communicator: a fork's child may not use it.
  const core::ProcessMark& made() const { return made_; }
  // One thread at a time in the calls that run or queue work (collectives,
  // send/recv, group end, split): the ranks pair their calls in the order each
  // rank makes them, and two threads inside one communicator make that order
  // undefined. enter_call() throws (dcclInvalidUsage) when another thread is
  // inside, and stops the communicator on every rank, naming the misuse: the
  // ranks' call sequences may differ from here on. It returns what leave_call()
  // needs; leave_call() throws when another thread came in meanwhile, so that
  // both calls fail. A call that throws leaves through drop_call(). Giving the
  // flag back is the call's last touch of the communicator: quiesce() waits for
  // it, so that an abort from another thread never frees it under the call.
  uint64_t enter_call(const char* fn);
  void leave_call(const char* fn, uint64_t entered);
  void drop_call() { caller_.store(false, std::memory_order_release); }

  void abort();
  // Stops this communicator because the one it belongs to (a hierarchy's parent)
  // stopped: in-flight waits and later calls fail with `text` at once. The other
  // ranks learn it from their own parents. `idle`: nothing was in flight (the
  // parent's notice of cancelled work), so the provider may be closed normally.
  void halt(dcclResult_t code, const std::string& text, bool idle);
  bool aborted() const { return aborted_.load(); }
  // Ends this communicator's work before its state goes (the destructor calls it;
  // dcclCommDestroy/Abort first, to leak rather than wait past its bound): queued
  // submissions that have not started are cancelled (they fail on their stream,
  // naming why), calls waiting for their turn are refused, and the running one may
  // finish within DCCL_TIMEOUT_S, then is aborted. When work was cancelled or
  // refused, the other ranks are told (their matching calls would never complete).
  // True once no submission is inside; false when one is still inside
  // DCCL_TIMEOUT_S after the abort (stuck in the provider).
  bool quiesce();
  // dcclCommFinalize: lets every queued and running submission finish (within the
  // timeout), refuses new ones, then meets the other ranks; the destructor is then
  // local. Throws when work did not finish in time or a rank did not come.
  void finalize();
  bool finalized() const { return finalized_.load(); }
  // The destructor leaves without meeting the other ranks: every rank is in this
  // process and has quiesced (the destroy of a dcclCommInitAll group).
  void leave_alone() { leave_alone_ = true; }
  // Throws dcclInvalidUsage naming `fn` once dcclCommFinalize began.
  void refuse_if_finalized(const char* fn);
  dcclResult_t async_error() const { return async_code_.load(); }
  std::string async_error_text() const;
  dcclStats_t stats() const;
  // The flight recorder (docs/observability.md). dump_recorder() writes this
  // rank's ring to `dir` (null: DCCL_RECORDER_DIR); request_dumps() asks every
  // rank, through the store, to write its own. Both throw core::Error.
  core::Recorder& recorder() { return *rec_; }
  void dump_recorder(const char* dir, const char* reason);
  void request_dumps();

 private:
  // Runs `ops` in the turn of `ticket` (the submission's place in this communicator's
  // order); kTakeTicket takes the next one under the same lock, refused after
  // finalize() (a blocking call: one lock round instead of two).
  static constexpr uint64_t kTakeTicket = ~uint64_t{0};
  void run_ticket(uint64_t ticket, std::span<const sched::Op> ops);
  void leave(uint64_t ticket);  // the submission is out of this communicator
  // Fails in-flight and later work with `text`, and tells the other ranks.
  void stop(const std::string& text);
  void record_error(const core::Error& e);
  // Stops this communicator's work: in-flight waits and later calls fail with `text`.
  void set_failed(dcclResult_t code, const std::string& text);
  // The constructor's steps, in order.
  void open_store(const boot::UniqueIdData& id, std::unique_ptr<boot::StoreServer> server, const std::string& ns,
                  TimePoint deadline);
  int learn_topology(std::string* host_id);  // returns the host's cores (0: unknown)
  void place_process();
  void open_transport(const boot::UniqueIdData& id, const std::string& host_id, int64_t spin_us);
  void make_plan(int host_cores);
  void make_paths();
  void share_state();
  void start_watchdog(const boot::UniqueIdData& id, const std::string& ns);
  void start_recorder(const boot::UniqueIdData& id, const std::string& ns);
  void start_status(const boot::UniqueIdData& id, const std::string& ns);
  void join();  // sub-communicators, then every rank meets
  void check_same_settings();
  void open_shared_segment();
  void make_levels();
  // Where this rank's store for a split child listens: DCCL_SOCKET_IFNAME's
  // address when set, else the address this rank reaches its own store by.
  std::string child_store_host();

  core::Config cfg_;
  // Rank, transport, segment, peer names, wait budget and the failure flag: shared
  // with the scheduler (res_.comm) and every collective's context by reference.
  coll::CommState state_;
  std::string provider_;
  topo::Topology topo_;
  Place place_;
  std::string label_;  // "rank R", or the name the parent of a split gives this rank
  int log_rank_;       // the rank its log lines carry (the constructor's log_rank)
  uint64_t splits_ = 0;  // split() calls so far: names each split's keys
  std::unique_ptr<boot::Bootstrap> boot_;
  std::array<uint8_t, 16> secret_{};  // the job secret: split() derives its children's from it
  std::mutex boot_mu_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<net::Transport> net_;
  tune::Plan plan_;  // every threshold, cap and chunk this communicator runs with
  std::unique_ptr<tune::Tuner> tuner_;
  std::unique_ptr<net::SharedSegment> segment_;
  std::string rxm_eager_;  // effective FI_OFI_RXM_EAGER_LIMIT
  std::unique_ptr<mem::PathChooser> paths_;
  TimePoint init_deadline_{};  // while the constructor runs: init's one deadline
  std::mutex levels_mu_;  // levels_ against the failure watcher's set_failed()
  std::unique_ptr<CommLevels> levels_;  // several hosts, same ranks on each: hierarchical algorithms
  sched::Stats stats_;
  sched::ExecutorInputs res_;
  std::unique_ptr<core::Recorder> rec_;
  std::unique_ptr<StatusPublisher> status_;  // stopped first in the destructor

  std::atomic<uint64_t> seq_{0};
  std::vector<std::atomic<uint64_t>> p2p_send_, p2p_recv_;

  std::mutex order_mu_;
  std::condition_variable order_cv_;
  uint64_t next_ticket_ = 0;   // given to the next submission
  uint64_t turn_ = 0;          // submission allowed to run now
  std::vector<uint64_t> skipped_;  // tickets that left before their turn: the turn passes them
  uint64_t inside_ = 0;        // tickets taken, neither cancelled nor out of run_ticket yet
  uint64_t order_waiters_ = 0;  // threads in wait_order(): leave() notifies only when there are some
  // A wait on order_cv_ (order_mu_ held by lk), counted in order_waiters_.
  template <class Pred>
  bool wait_order(std::unique_lock<std::mutex>& lk, TimePoint until, Pred ready) {
    ++order_waiters_;
    const bool ok = order_cv_.wait_until(lk, until, ready);
    --order_waiters_;
    return ok;
  }
  std::span<const sched::Op> running_;  // the submission holding the turn
  uint64_t refused_ = 0;       // calls refused while waiting for their turn at quiesce()
  bool closing_ = false;       // quiesce() began: waiting calls are refused
  bool quiesced_ = false;
  bool finalizing_ = false;    // finalize() began: new submissions are refused
  std::atomic<bool> finalized_{false};
  bool leave_alone_ = false;
  // Destroy's phases for the failure watch: 1 once its barrier may begin (a peer's
  // failure heard then ends it: the failed peer never comes), 2 once it is over (a
  // report then, e.g. the store's host leaving first, concerns no call any more).
  std::atomic<int> leaving_{0};
  std::atomic<bool> announced_{false};  // quiesce() told the other ranks of cancelled work (nothing was in flight)
  // Queued stream work reaches this communicator through its gate, which quiesce()
  // closes: cancelled work then fails on its stream without touching this object.
  struct SubmitGate;
  std::shared_ptr<SubmitGate> gate_;
  struct PreMul {
    bool live = false;
    dcclDataType_t dt = dcclFloat32;
    bool immediate = true;
    unsigned char value[8] = {};
    const void* ptr = nullptr;
  };
  mutable std::mutex redop_mu_;
  std::vector<PreMul> redops_;
  std::atomic<bool> aborted_{false};
  core::ProcessMark made_;
  std::atomic<bool> caller_{false};  // a thread is inside enter_call .. leave_call
  std::atomic<uint64_t> clashes_{0};  // entries refused because another thread was inside
  std::atomic<dcclResult_t> async_code_{dcclSuccess};
  mutable std::mutex err_mu_;
  std::string async_text_;
};

}  // namespace dccl::comm
