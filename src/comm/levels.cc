#include "comm/levels.hpp"

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "mem/backend.hpp"

namespace dccl::comm {

using core::Error;
using core::log_set_rank;

namespace {
// A step's error begins with the rank this process has in the sub-communicator
// ("rank 0: reduce_scatter #284 ..."), which reads as another rank of the job:
// " (this process is rank 0 of 2 there): reduce_scatter #284 ...".
std::string as_sub_rank(const Communicator& c, const std::string& what) {
  const std::string own = "rank " + std::to_string(c.rank()) + ": ";
  if (what.rfind(own, 0) != 0) return ": " + what;
  return " (this process is rank " + std::to_string(c.rank()) + " of " + std::to_string(c.nranks()) +
         " there): " + what.substr(own.size());
}
}  // namespace

CommLevels::CommLevels(const topo::Topology& topo, int64_t timeout_ms, size_t piece_bytes,
                       std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> cross,
                       const std::chrono::steady_clock::time_point* deadline)
    : topo_(topo),
      timeout_ms_(timeout_ms),
      piece_bytes_(piece_bytes),
      deadline_(deadline),
      local_(std::move(local)),
      cross_(std::move(cross)) {}

CommLevels::~CommLevels() {
  for (Temp& t : temp_)
    if (t.p) t.be->free(t.p);
}

void* CommLevels::temp(size_t bytes, const void* like) {
  mem::Backend& be = mem::backend_of(like);
  Temp& t = temp_[static_cast<int>(be.kind())];
  if (t.bytes < bytes) {
    if (t.p) t.be->free(t.p);
    t = Temp{};
    t.p = be.alloc(bytes);
    t.be = &be;
    t.bytes = bytes;
  }
  return t.p;
}

void CommLevels::run(Communicator& c, const coll::SubOp& s, sched::Stream* stream) {
  sched::Op op;
  switch (s.coll) {
    case coll::SubColl::AllReduce: op.coll = tune::Coll::AllReduce; break;
    case coll::SubColl::ReduceScatter: op.coll = tune::Coll::ReduceScatter; break;
    case coll::SubColl::AllGather: op.coll = tune::Coll::AllGather; break;
    case coll::SubColl::Broadcast: op.coll = tune::Coll::Broadcast; break;
    case coll::SubColl::Reduce: op.coll = tune::Coll::Reduce; break;
  }
  op.send = s.send;
  op.recv = s.recv;
  op.count = s.count;
  op.dt = s.dt;
  op.op = s.op;
  op.root = s.root;
  op.parent_mark = s.parent;  // the steps of calls that differ never pair
  op.seq = c.next_seq();
  op.deadline = *deadline_;  // the parent's call: its steps share one deadline
  struct RestoreLogRank {
    int rank;
    ~RestoreLogRank() { log_set_rank(rank); }
  } restore{topo_.rank};
  try {
    c.submit_one(op, stream);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(&c == local_.get() ? "intra-host " : "cross-host ") + tune::coll_name(op.coll) +
                              " step failed" + as_sub_rank(c, e.what()));
  }
}

void CommLevels::local(const coll::SubOp& op) { run(*local_, op, nullptr); }
void CommLevels::cross(const coll::SubOp& op) { run(*cross_, op, nullptr); }

void CommLevels::cross_start(const coll::SubOp& op) {
  if (cross_running_) throw Error(dcclInternalError, "cross-host step started while another is running");
  if (!worker_) worker_ = std::make_unique<sched::Stream>();
  run(*cross_, op, worker_.get());
  cross_running_ = true;
}

void CommLevels::cross_wait() {
  if (!cross_running_) return;
  cross_running_ = false;
  try {
    // The step's own waits are bounded by the timeout, so it ends or fails: wait
    // for it whatever its length (its buffers are in use until then).
    while (!worker_->wait_idle(timeout_ms_)) {
    }
  } catch (const Error& e) {
    throw Error(e.code(), "cross-host step failed" + as_sub_rank(*cross_, e.what()));
  }
}

void CommLevels::cross_drain() noexcept {
  if (!cross_running_) return;
  cross_running_ = false;
  try {
    if (!worker_->wait_idle(0)) cross_->abort();
    while (!worker_->wait_idle(timeout_ms_)) {
    }
  } catch (...) {
  }
}

void CommLevels::divide(void* buf, size_t count, dcclDataType_t dt, int n) {
  mem::Backend& be = mem::backend_of(buf);
  be.wait(be.avg_async(buf, count, dt, n), timeout_ms_);
}

void CommLevels::finalize() {
  local_->finalize();
  cross_->finalize();
}

void CommLevels::halt(dcclResult_t code, const std::string& text, bool idle) {
  local_->halt(code, text, idle);
  cross_->halt(code, text, idle);
}

void CommLevels::add_stats(dcclStats_t* s) const {
  for (const Communicator* c : {local_.get(), cross_.get()}) {
    dcclStats_t t = c->stats();
    s->bytesSentDirect += t.bytesSentDirect;
    s->bytesRecvDirect += t.bytesRecvDirect;
    s->bytesRelayedHost += t.bytesRelayedHost;
    s->hostCopies += t.hostCopies;
    s->registrations += t.registrations;
    s->regCacheHits += t.regCacheHits;
    s->regCacheMisses += t.regCacheMisses;
    s->allocations += t.allocations;
  }
}

}  // namespace dccl::comm
