#include "sched/executor.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <string>

#include "coll/algos.hpp"
#include "mem/backend.hpp"
#include "sched/check.hpp"
#include "core/affinity.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/types.hpp"

namespace dccl::sched {

namespace {

using tune::Algo;
using tune::Coll;

// Per-rank bytes the tuner sizes the choice by.
size_t tuning_bytes(const Op& op, int n) {
  size_t b = op.count * core::dtype_size(op.dt);
  switch (op.coll) {
    case Coll::ReduceScatter: return b * static_cast<size_t>(n);
    default: return b;
  }
}

coll::CallContextInit base_init(ExecutorInputs& res, const Op& op, coll::Label&& name) {
  coll::CallContextInit in;
  mem::PathSel sel;
  if (op.backend && op.backend->kind() == mem::Kind::Host)
    sel.backend = op.backend;  // host memory, as the call's checks found: the transport's own path
  else
    sel = res.paths->select(op.send, op.recv, [&] { return name.str(); }, op.backend);
  in.path = sel.path;
  if (core::RecEntry* e = core::Recorder::current()) e->path = !sel.path ? "host" : sel.direct ? "direct" : "staged";
  if (!sel.path) {  // host memory: the transport reads and writes the user's buffers
    in.host_sent = &res.stats->sent_direct;
    in.host_recv = &res.stats->recv_direct;
  }
  in.backend = sel.backend;
  in.scratch = &res.scratch_for(*sel.backend);
  in.name = std::move(name);
  in.comm = res.comm;
  in.seq = op.seq;
  in.call_mark = call_mark(op);
  in.parent_mark = op.parent_mark;
  in.dt = op.dt;
  in.op = op.op;
  in.premul = op.premul;
  in.deadline = res.deadline;
  return in;
}

// A PreMulSum's input scaled by this rank's scalar, in the operation's scratch (kept
// by `ctx` until it ends). Elements: the whole input (nranks blocks for reduce-scatter).
const void* premul_input(coll::CallContext& ctx, const Op& op, int nranks, int64_t timeout_ms) {
  const size_t n = op.coll == Coll::ReduceScatter ? op.count * static_cast<size_t>(nranks) : op.count;
  const size_t es = core::dtype_size(op.dt);
  unsigned char scalar[8];
  memcpy(scalar, op.scalar, sizeof(scalar));
  if (op.scalar_ptr) {  // read now: the application may have changed it since the call
    mem::Backend& be = mem::backend_of(op.scalar_ptr);
    if (be.kind() == mem::Kind::Host)
      memcpy(scalar, op.scalar_ptr, es);
    else
      be.wait(be.copy_async(scalar, op.scalar_ptr, es), timeout_ms);
  }
  void* out = ctx.scratch(n * es);
  ctx.scale(out, op.send, n, scalar);
  return out;
}

// One operation done (a hierarchical one counts once here; its steps count on the
// sub-communicators). Bytes are counted where they move (CtxInit::host_sent, the paths).
void count_op(ExecutorInputs& res) { res.stats->ops.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

coll::SubColl sub_coll(tune::Coll c) {
  switch (c) {
    case Coll::ReduceScatter: return coll::SubColl::ReduceScatter;
    case Coll::AllGather: return coll::SubColl::AllGather;
    case Coll::Broadcast: return coll::SubColl::Broadcast;
    case Coll::Reduce: return coll::SubColl::Reduce;
    case Coll::AllReduce: return coll::SubColl::AllReduce;
    default: break;
  }
  core::raise(dcclInternalError, std::string("no hierarchical form of ") + tune::coll_name(c));
}

coll::ScratchPool& ExecutorInputs::scratch_for(mem::Backend& be) {
  auto& p = scratch[static_cast<int>(be.kind())];
  if (!p) {
    p = std::make_unique<coll::ScratchPool>(be);
    scratch_made[static_cast<int>(be.kind())].store(p.get(), std::memory_order_release);
  }
  return *p;
}

namespace {
// The flight recorder's entry for a call (or a group's send/recv), closed with the
// call's result when it leaves: success once done() was called, else (an error is
// on its way out) the error it failed with.
struct Recording {
  core::Recorder* rec;
  core::RecEntry* e;
  bool ok = false;
  Recording(core::Recorder* r, const Op& op, const char* coll, uint64_t count)
      : rec(r), e(r ? r->begin(op.seq, coll, count, core::dtype_name(op.dt), core::wire_op_name(wire_op(op)),
                               op.root, op.coll == Coll::SendRecv ? op.peer : -1)
                    : nullptr) {}
  void done() { ok = true; }
  ~Recording() {
    if (e) rec->end(e, ok ? dcclSuccess : e->error ? e->error : dcclInternalError);
  }
};

// One collective of a submission (not a send/recv).
void run_collective(ExecutorInputs& res, const Op& op) {
  Recording rec(res.rec, op, tune::coll_name(op.coll), op.count);
  if (res.check) check_signature(res, op);
  // Device memory cannot go through the host segment: the table says which can.
  const void* any = op.send ? op.send : op.recv;
  const bool device = any && (op.backend ? *op.backend : mem::backend_of(any)).kind() != mem::Kind::Host;
  tune::Choice ch = res.tuner->choose(op.coll, tuning_bytes(op, res.comm->nranks), res.comm->nranks, device);
  if (rec.e) rec.e->algo = ch.entry->hier ? "hier" : tune::algo_name(ch.algo);
  // A PreMulSum sums scaled copies; `pre` keeps them until the operation ends.
  std::unique_ptr<coll::CallContext> pre;
  const void* send = op.send;
  if (op.premul) {
    coll::Label pname;
    pname.text = std::string(tune::coll_name(op.coll)) + " #" + std::to_string(op.seq) + " (premulsum input)";
    pre = std::make_unique<coll::CallContext>(base_init(res, op, std::move(pname)));
    send = premul_input(*pre, op, res.comm->nranks, res.comm->timeout_ms);
  }
  if (ch.entry->hier) {
    if (!res.levels) core::raise(dcclInternalError, std::string("no sub-communicators for hierarchical ") + tune::coll_name(op.coll));
    DCCL_TRACE("%s #%llu hier: %zu x %s", tune::coll_name(op.coll), static_cast<unsigned long long>(op.seq), op.count,
               core::dtype_name(op.dt));
    try {
      ch.entry->hier(*res.levels,
                     coll::SubOp{sub_coll(op.coll), send, op.recv, op.count, op.dt, op.op, op.root, step_of(op)});
    } catch (const core::Error& e) {
      if (rec.e) rec.e->error = e.code();
      throw core::Error(e.code(), core::describe(res.comm->rank, std::string(tune::coll_name(op.coll)) + " #" +
                                                               std::to_string(op.seq) + " (hier)",
                                                 e.what()));
    }
    count_op(res);
    rec.done();
    return;
  }
  coll::Label name;
  name.coll = tune::coll_name(op.coll);
  name.seq = op.seq;
  name.count = op.count;
  name.dt = op.dt;
  name.algo = tune::algo_name(ch.algo);
  coll::CallContextInit in = base_init(res, op, std::move(name));
  in.chunk_bytes = ch.chunk_bytes;
  DCCL_TRACE("%s start", in.name.str().c_str());
  coll::CallContext ctx(std::move(in));
  coll::Args args{send, op.recv, op.count, op.root};
  ch.entry->flat(ctx, args);
  count_op(res);
  rec.done();
}
}  // namespace

void execute(ExecutorInputs& res, std::span<const Op> ops) {
  // Beside busy processes a large call runs best unbound (core/affinity.hpp).
  size_t bytes = 0;
  for (const Op& op : ops) bytes += op.count * core::dtype_size(op.dt);
  core::Affinity::before_call(bytes, res.comm->busy_widen_bytes);
  if (ops.size() == 1 && ops[0].coll != Coll::SendRecv) {  // one collective: no group to post
    run_collective(res, ops[0]);
    return;
  }
  // Point-to-point calls of the group are posted together, so that matching
  // send/recv pairs between two ranks can never wait on each other.
  std::vector<const Op*> p2p;
  for (const Op& op : ops)
    if (op.coll == Coll::SendRecv) p2p.push_back(&op);
  std::optional<Recording> p2p_rec;
  if (!p2p.empty()) p2p_rec.emplace(res.rec, *p2p[0], "send_recv", p2p.size());
  std::vector<std::unique_ptr<coll::CallContext>> pctx;
  std::vector<coll::Xfer> xfers(p2p.size());
  for (size_t i = 0; i < p2p.size(); ++i) {
    const Op& op = *p2p[i];
    coll::Label name;
    name.text = std::string(op.is_send ? "send to" : "recv from") + " rank " + std::to_string(op.peer) + " (" +
                std::to_string(op.count) + " x " + core::dtype_name(op.dt) + ")";
    pctx.push_back(std::make_unique<coll::CallContext>(base_init(res, op, std::move(name))));
    size_t bytes = op.count * core::dtype_size(op.dt);
    const uint64_t tag = op.p2p_tag | net::size_mark(bytes);  // a receive of another length fails at once
    if (op.is_send)
      pctx[i]->send_tagged(op.peer, op.send, bytes, tag, xfers[i]);
    else
      pctx[i]->recv_tagged(op.peer, op.recv, bytes, tag, xfers[i]);
  }
  for (const Op& op : ops)
    if (op.coll != Coll::SendRecv) run_collective(res, op);
  for (size_t i = 0; i < p2p.size(); ++i) {
    try {
      pctx[i]->wait(xfers[i]);
    } catch (const core::Error& e) {
      if (e.code() != dcclTimeout || !p2p[i]->is_send) throw;
      // Above the eager size a send completes only once the peer's receive is posted.
      throw core::Error(e.code(), std::string(e.what()) + "; rank " + std::to_string(p2p[i]->peer) +
                                      " did not post the matching receive: it may not call it, or it may be queued "
                                      "behind a send of its own (a pair's sends and receives that must meet go in "
                                      "one group)");
    }
    count_op(res);
  }
  if (p2p_rec) p2p_rec->done();
}

}  // namespace dccl::sched
