// ProcessGroupDCCL: the communicator's life (init, split, abort, shutdown), the
// queue, the ranks' agreement check and the helpers every operation uses. The
// operations are in collectives.cc, blocks.cc, alltoall.cc and p2p.cc.
#include <Python.h>  // first, as Python asks

#include "process_group.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "errors.hpp"

namespace torch_dccl {

namespace {

// The communicator's bound on every blocking wait: the group's timeout, in
// milliseconds, within what dcclConfig_t.timeoutMs holds.
int timeout_ms(std::chrono::milliseconds timeout) {
  const long long ms = timeout.count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

bool env_flag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "off") == 0);
}

}  // namespace

ProcessGroupDCCL::ProcessGroupDCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, dcclComm_t comm)
    : c10d::Backend(rank, size),
      store_(store),
      comm_(comm),
      timeout_(timeout),
      check_calls_(env_flag("TORCH_DCCL_CHECK", true)),
      any_source_(env_flag("TORCH_DCCL_ANY_SOURCE", true)),
      stream_wait_(env_flag("TORCH_DCCL_STREAM_WAIT", false)),
      taken_(static_cast<size_t>(size), 0),
      seen_(static_cast<size_t>(size), 0) {
  if (timeout_.count() <= 0)
    fail(rank, size, "init", "timeout must be positive, got " + std::to_string(timeout_.count()) + " ms");
  if (!comm_) {
    number_keys();
    dcclUniqueId id;
    rendezvous(store, &id);
    dcclConfig_t config = DCCL_CONFIG_INITIALIZER;
    config.timeoutMs = timeout_ms(timeout_);
    const dcclResult_t r = dcclCommInitRankConfig(&comm_, size, id, rank, &config);
    if (r != dcclSuccess) fail(rank, size, "init: dcclCommInitRankConfig", dccl_text(r, nullptr));
  }
  worker_ = std::make_unique<Worker>();
  init();
}

ProcessGroupDCCL::ProcessGroupDCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : ProcessGroupDCCL(store, rank, size, timeout, nullptr) {}

ProcessGroupDCCL::~ProcessGroupDCCL() {
  // The last reference usually goes from Python; a Python callback on one of
  // this group's futures (fut.then) runs on the worker and takes the GIL, so
  // joining the worker with the GIL held could deadlock.
  PyThreadState* released = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) released = PyEval_SaveThread();
  worker_.reset();  // runs what is queued, then joins: nothing uses comm_ after this
  for (auto& [dev, order] : orders_) order->release_all();
  orders_.clear();
  // Not shut down (destroy_process_group was not called): the process is ending.
  // At a script's end, destroy: it meets the other ranks, so that the calls they
  // still make with this one (the tail of a broadcast, a receive) end well. On an
  // uncaught exception the others may wait for this rank in a collective it will
  // not make, and a destroy would hold both sides for the whole timeout: abort, so
  // that they fail at once naming this rank (as ProcessGroupNCCL aborts).
  if (comm_ && !aborted_) {
    if (abort_dropped_groups()) dcclCommAbort(comm_);
    else dcclCommDestroy(comm_);
  }
  if (released) PyEval_RestoreThread(released);
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupDCCL::getBackendOptions() {
  return c10::make_intrusive<Options>("dccl", timeout_);
}

void ProcessGroupDCCL::setTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) fail(rank_, size_, "set_timeout", "timeout must be positive");
  timeout_ = timeout;  // Work waits; DirectCCL's own bound stays the one set at init
}

std::chrono::milliseconds ProcessGroupDCCL::bound(std::chrono::milliseconds opt) const {
  return opt.count() > 0 ? opt : timeout_;
}

void ProcessGroupDCCL::check(dcclResult_t r, const std::string& op) const {
  if (r != dcclSuccess) fail(rank_, size_, op, dccl_text(r, comm_));
}

void ProcessGroupDCCL::check_peer(int64_t peer, const std::string& op) const {
  if (peer < 0 || peer >= size_)
    fail(rank_, size_, op, "peer rank " + std::to_string(peer) + " is outside [0, " + std::to_string(size_) + ")");
}

void ProcessGroupDCCL::usable(const std::string& op) const {
  if (aborted_) fail(rank_, size_, op, "the group was aborted");
  if (shut_) fail(rank_, size_, op, "the group was shut down");
}

void ProcessGroupDCCL::reduce_with(const Reduction& r, dcclDataType_t dt, const std::string& op,
                                   const std::function<dcclResult_t(dcclRedOp_t)>& call) const {
  if (!r.premul) {
    check(call(r.op), op);
    return;
  }
  // The factor in the tensors' own dtype (dt is its DirectCCL type), copied at creation.
  const at::Tensor scalar = at::scalar_tensor(r.factor, at::TensorOptions().dtype(r.dtype));
  dcclRedOp_t premul;
  check(dcclRedOpCreatePreMulSum(&premul, scalar.data_ptr(), dt, dcclScalarHostImmediate, comm_), op);
  const dcclResult_t res = call(premul);
  const std::string text = res == dcclSuccess ? std::string() : dccl_text(res, comm_);  // before the next call replaces it
  dcclRedOpDestroy(premul, comm_);
  if (res != dcclSuccess) fail(rank_, size_, op, text);
}

void ProcessGroupDCCL::agree(const std::string& op, uint64_t seq, const Call& c) const {
  constexpr int kFields = 6;
  const int64_t mine[kFields] = {static_cast<int64_t>(seq), static_cast<int64_t>(c.type), static_cast<int64_t>(c.dtype),
                                 c.count, c.root, c.redop};
  std::vector<int64_t> all(static_cast<size_t>(kFields * size_));
  check(dcclAllGather(mine, all.data(), sizeof mine, dcclUint8, comm_, nullptr),
        op + " (comparing the ranks' calls before it)");
  auto text = [](const int64_t* f) {
    std::string s = c10d::opTypeToString(static_cast<c10d::OpType>(f[1]));
    s.append(" #").append(std::to_string(f[0])).append(" of ").append(std::to_string(f[3])).append(" ");
    s.append(dtype_name(static_cast<at::ScalarType>(f[2]))).append(" elements");
    if (f[4] >= 0) s.append(", root ").append(std::to_string(f[4]));
    static const char* const kOps[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
    if (f[5] >= 0) s.append(", ReduceOp ").append(f[5] < 9 ? kOps[f[5]] : std::to_string(f[5]).c_str());
    return s;
  };
  std::string diff;
  int differing = 0;
  for (int r = 0; r < size_; ++r) {
    const int64_t* f = &all[static_cast<size_t>(r * kFields)];
    if (std::memcmp(f, mine, sizeof mine) == 0) continue;
    if (++differing <= 3) diff.append(diff.empty() ? "" : "; ").append("rank ").append(std::to_string(r)).append(" called ").append(text(f));
  }
  if (differing == 0) return;
  if (differing > 3) diff.append("; and " + std::to_string(differing - 3) + " more ranks");
  fail(rank_, size_, op, "the ranks' calls do not match (mismatched shapes or dtypes, or a rank skipped or added a "
                         "call): this rank called " + text(mine) + "; " + diff);
}

CudaOrder& ProcessGroupDCCL::order_for(int device) {
  auto it = orders_.find(device);
  if (it != orders_.end()) return *it->second;
  // The warm-up runs, and is waited for, before the first ticket exists: every
  // rank's first CUDA operation on this group comes here, in the same order.
  const std::string op = "first use of cuda:" + std::to_string(device);
  auto warm = c10::make_intrusive<WorkDCCL>(rank_, size_, c10d::OpType::UNKNOWN, op, std::vector<at::Tensor>{},
                                            timeout_, 0);
  worker_->post(warm, [this, op, device] { check(cuda_warm_up(comm_, device), op); });
  warm->wait(::kNoTimeout);
  it = orders_.emplace(device, std::make_unique<CudaOrder>(make_cuda_ops(device))).first;
  return *it->second;
}

c10::intrusive_ptr<WorkDCCL> ProcessGroupDCCL::enqueue(c10d::OpType type, const std::string& op,
                                                       std::vector<at::Tensor> outputs,
                                                       std::chrono::milliseconds timeout, const Place& place,
                                                       std::optional<Call> call, std::function<void()> body) {
  std::lock_guard<std::mutex> lk(enqueue_mu_);
  usable(op);
  const uint64_t seq = call ? ++coll_seq_ : coll_seq_;
  auto work = c10::make_intrusive<WorkDCCL>(rank_, size_, type, op, std::move(outputs), timeout, seq_base_ + seq);
  std::function<void()> job = [this, op, seq, call, body = std::move(body)] {
    if (aborted_) fail(rank_, size_, op, "the group was aborted before this operation ran");
    try {
      if (call && check_calls_) agree(op, seq, *call);
      // The flight recorder's record of the call names this group and its own sequence number.
      if (call) dcclCommSetCallTag(comm_, getGroupUid().c_str(), seq_base_ + seq);
      body();
    } catch (...) {
      failed_ = true;
      throw;
    }
  };
  if (place.cuda) {
    CudaOrder& order = order_for(place.device);
    auto ticket = order.before(current_cuda_stream(place.device), stream_wait_);
    const int dev = place.device;
    if (stream_wait_)
      work->set_stream_order(ticket, [dev](const Ticket& t) { CudaOrder::consumer_wait(t, current_cuda_stream(dev)); });
    job = [this, op, &order, ticket, timeout, inner = std::move(job)] {
      if (!order.run(*ticket, std::chrono::steady_clock::now() + timeout, inner))
        fail(rank_, size_, op, "the work queued on the CUDA stream before this operation did not finish within " +
                                   std::to_string(timeout.count()) + " ms");
    };
  }
  worker_->post(work, std::move(job));
  return work;
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupDCCL::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                          const std::vector<int>& ranks,
                                                          const c10::intrusive_ptr<Options>& opts) {
  const std::string op = "split_group";
  const uint64_t split_no = ++splits_;  // counted on every rank of this group, in or out of the new one
  // Every rank of this group calls split with the ranks of its own new group;
  // the color names that set (the same on each of its members), the key orders it.
  std::vector<int> sorted(ranks);
  std::sort(sorted.begin(), sorted.end());
  uint32_t h = 2166136261u;
  for (int r : sorted) h = (h ^ static_cast<uint32_t>(r)) * 16777619u;
  const auto me = std::find(sorted.begin(), sorted.end(), rank_);
  const int color = me == sorted.end() ? DCCL_SPLIT_NOCOLOR : static_cast<int>(h & 0x7fffffffu);
  const auto timeout = opts ? opts->timeout : timeout_;
  // On the worker, in order with this group's other calls; the result outlives
  // a wait that gives up.
  auto sub = std::make_shared<dcclComm_t>(nullptr);
  const int ms = timeout_ms(timeout);
  auto work = enqueue(c10d::OpType::UNKNOWN, op, {}, timeout_, Place{}, std::nullopt, [this, op, sub, color, ms] {
    dcclConfig_t config = DCCL_CONFIG_INITIALIZER;
    config.timeoutMs = ms;
    check(dcclCommSplit(comm_, color, rank_, sub.get(), &config), op);
  });
  work->wait(::kNoTimeout);
  if (!*sub) return nullptr;
  const int new_rank = static_cast<int>(me - sorted.begin());
  auto pg = c10::make_intrusive<ProcessGroupDCCL>(store, new_rank, static_cast<int>(sorted.size()), timeout, *sub);
  // Its store keys: under this group's, by split (every member of this group counts
  // its splits alike) and color.
  pg->keys_ = keys_ + "split/" + std::to_string(split_no) + "/" + std::to_string(color) + "/";
  return pg;
}

void ProcessGroupDCCL::setSequenceNumberForGroup() {}  // every rank starts at 0: agreed by construction

uint64_t ProcessGroupDCCL::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lk(enqueue_mu_);
  return seq_base_ + coll_seq_;
}

void ProcessGroupDCCL::abort() {
  if (aborted_.exchange(true) || shut_) return;
  // The running call ends at once with an error; the peers learn of it.
  dcclCommAbort(comm_);
  for (auto& [dev, order] : orders_) order->release_all();
}

void ProcessGroupDCCL::shutdown() {
  if (shut_.exchange(true) || aborted_) return;
  PyThreadState* released = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) released = PyEval_SaveThread();
  worker_.reset();  // what is queued runs first (each bounded by the timeout)
  worker_ = std::make_unique<Worker>();  // calls after shutdown fail in usable(), on the caller's thread
  if (comm_) dcclCommDestroy(comm_);
  comm_ = nullptr;
  if (released) PyEval_RestoreThread(released);
}

c10d::ErrorType ProcessGroupDCCL::getError() {
  if (aborted_) return c10d::ErrorType::COMM_ERROR;
  return failed_ ? c10d::ErrorType::COMM_ERROR : c10d::ErrorType::SUCCESS;
}

}  // namespace torch_dccl
