// ProcessGroupDCCL: rendezvous through the c10d store, the queue, and the
// operations on one tensor (allreduce, broadcast, reduce, send, recv, barrier).
// The operations between lists of tensors are in exchange.cc.
#include <Python.h>  // first, as Python asks

#include <climits>
#include <cstring>
#include <stdexcept>

#include "backend.hpp"

namespace torch_dccl {

namespace {

// The key rank 0 publishes the dcclUniqueId under, in the group's own store
// (PyTorch hands each group a PrefixStore of its own).
constexpr const char* kIdKey = "torch_dccl/unique_id";

// The communicator's bound on every blocking wait: the group's timeout, in
// milliseconds, within what dcclConfig_t.timeoutMs holds.
int timeout_ms(std::chrono::milliseconds timeout) {
  const long long ms = timeout.count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

}  // namespace

std::string dccl_text(dcclResult_t r, dcclComm_t comm) {
  const char* last = dcclGetLastError(comm);
  std::string s = (last && *last) ? std::string(last) : std::string("(no error text)");
  s.append(" [").append(dcclGetErrorString(r)).append("]");
  return s;
}

ProcessGroupDCCL::ProcessGroupDCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout) {
  if (timeout_.count() <= 0)
    throw std::runtime_error(describe(rank, size, "init", "timeout must be positive, got " +
                                                              std::to_string(timeout_.count()) + " ms"));
  dcclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) {
    const dcclResult_t r = dcclGetUniqueId(&id);
    if (r != dcclSuccess) throw std::runtime_error(describe(rank, size, "init: dcclGetUniqueId", dccl_text(r, nullptr)));
    store->set(kIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    std::vector<uint8_t> v;
    try {
      v = store->get(kIdKey);  // bounded by the store's timeout (init_process_group sets it to `timeout`)
    } catch (const std::exception& e) {
      throw std::runtime_error(describe(rank, size, "init", std::string("rank 0's DirectCCL id did not arrive through the store: ") + e.what()));
    }
    if (v.size() != sizeof id.internal)
      throw std::runtime_error(describe(rank, size, "init", "the store's DirectCCL id has " + std::to_string(v.size()) +
                                                                " bytes, expected " + std::to_string(sizeof id.internal)));
    std::memcpy(id.internal, v.data(), v.size());
  }
  dcclConfig_t config = DCCL_CONFIG_INITIALIZER;
  config.timeoutMs = timeout_ms(timeout_);
  const dcclResult_t r = dcclCommInitRankConfig(&comm_, size, id, rank, &config);
  if (r != dcclSuccess)
    throw std::runtime_error(describe(rank, size, "init: dcclCommInitRankConfig", dccl_text(r, nullptr)));
  worker_ = std::make_unique<Worker>();
  init();
}

ProcessGroupDCCL::~ProcessGroupDCCL() {
  // The last reference usually goes from Python, with the GIL held; a Python
  // callback on one of this group's futures (fut.then) runs on the worker and
  // takes the GIL, so joining the worker with the GIL held could deadlock.
  PyThreadState* released = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) released = PyEval_SaveThread();
  worker_.reset();  // runs what is queued, then joins: nothing uses comm_ after this
  if (comm_) dcclCommDestroy(comm_);
  if (released) PyEval_RestoreThread(released);
}

std::chrono::milliseconds ProcessGroupDCCL::bound(std::chrono::milliseconds opt) const {
  return opt.count() > 0 ? opt : timeout_;
}

void ProcessGroupDCCL::check(dcclResult_t r, const std::string& op) const {
  if (r != dcclSuccess) throw std::runtime_error(describe(rank_, size_, op, dccl_text(r, comm_)));
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
  if (res != dcclSuccess) throw std::runtime_error(describe(rank_, size_, op, text));
}

void ProcessGroupDCCL::check_peer(int peer, const std::string& op) const {
  if (peer < 0 || peer >= size_)
    throw std::runtime_error(describe(rank_, size_, op, "peer rank " + std::to_string(peer) + " is outside [0, " +
                                                            std::to_string(size_) + ")"));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::enqueue(c10d::OpType type, const std::string& op,
                                                         std::vector<at::Tensor> outputs,
                                                         std::chrono::milliseconds timeout,
                                                         std::function<void()> body) {
  auto work = c10::make_intrusive<WorkDCCL>(rank_, size_, type, op, std::move(outputs), timeout);
  worker_->post(work, std::move(body));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const std::string op = "all_reduce";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  const dcclDataType_t dt = reduce_type(t, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, t, rank_, size_, op);
  return enqueue(c10d::OpType::ALLREDUCE, op, {t}, bound(opts.timeout), [this, op, t, dt, red] {
    Dense d(t);
    reduce_with(red, dt, op, [&](dcclRedOp_t r) { return dcclAllReduce(d.data(), d.data(), d.numel(), dt, r, comm_, nullptr); });
    d.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const std::string op = "broadcast";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  check_peer(static_cast<int>(opts.rootRank), op);
  const int root = static_cast<int>(opts.rootRank);
  // Any dtype: a broadcast moves bytes.
  return enqueue(c10d::OpType::BROADCAST, op, {t}, bound(opts.timeout), [this, op, t, root] {
    Dense d(t);
    check(dcclBroadcast(d.data(), d.data(), d.bytes(), dcclUint8, root, comm_, nullptr), op);
    d.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const std::string op = "reduce";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  check_peer(static_cast<int>(opts.rootRank), op);
  const int root = static_cast<int>(opts.rootRank);
  const dcclDataType_t dt = reduce_type(t, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, t, rank_, size_, op);
  return enqueue(c10d::OpType::REDUCE, op, {t}, bound(opts.timeout), [this, op, t, dt, red, root] {
    Dense d(t);
    reduce_with(red, dt, op, [&](dcclRedOp_t r) { return dcclReduce(d.data(), d.data(), d.numel(), dt, r, root, comm_, nullptr); });
    d.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const std::string op = "send";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  check_peer(dstRank, op);
  // Tags are not matched: messages between two ranks arrive in the order sent.
  return enqueue(c10d::OpType::SEND, op, {}, timeout_, [this, op, t, dstRank] {
    Dense d(t);
    check(dcclSend(d.data(), d.bytes(), dcclUint8, dstRank, comm_, nullptr), op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const std::string op = "recv";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  check_peer(srcRank, op);
  return enqueue(c10d::OpType::RECV, op, {t}, timeout_, [this, op, t, srcRank] {
    Dense d(t);
    check(dcclRecv(d.data(), d.bytes(), dcclUint8, srcRank, comm_, nullptr), op);
    d.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::barrier(const c10d::BarrierOptions& opts) {
  const std::string op = "barrier";
  return enqueue(c10d::OpType::BARRIER, op, {}, bound(opts.timeout),
                 [this, op] { check(dcclBarrier(comm_, nullptr), op); });
}

}  // namespace torch_dccl
