#include "coll/call_context.hpp"

#include "core/recorder.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/reduce.hpp"
#include "coll/fold.hpp"
#include "coll/scratch.hpp"
#include "core/backoff.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"

namespace dccl::coll {

using Clock = std::chrono::steady_clock;

std::string Label::str() const {
  if (coll == nullptr) return text;
  return std::string(coll) + " #" + std::to_string(seq) + " (" + algo + ", " + std::to_string(count) + " x " +
         core::dtype_name(dt) + ")";
}

CallContext::CallContext(const CallContextInit& init) : CallContext(CallContextInit(init)) {}

CallContext::CallContext(CallContextInit&& init)
    : in_(std::move(init)), esize_(core::dtype_size(in_.dt)), coll_tag_(make_coll_tag(in_.seq, in_.call_mark, 0)) {
  if (esize_ == 0) esize_ = 1;
}

CallContext::~CallContext() {
  if (in_.scratch) in_.scratch->reset();
}

std::string CallContext::peer_name(int peer) const {
  const std::vector<std::string>& names = in_.comm->peer_names;
  if (peer >= 0 && static_cast<size_t>(peer) < names.size()) return names[static_cast<size_t>(peer)];
  return "rank " + std::to_string(peer);
}

std::string CallContext::where(const Xfer& x) const {
  const uint32_t step = static_cast<uint32_t>(x.req.tag & 0xffffffu);
  const std::string s = step == kFoldStep     ? "the fold of the extra ranks before the exchange"
                        : step == kUnfoldStep ? "the result handed back to an extra rank"
                                              : "step " + std::to_string(step);
  return std::string(x.req.is_send ? "send to " : "receive from ") + peer_name(x.req.peer) + " (" + s + ")";
}

void CallContext::stop(dcclResult_t code, const std::string& what) const {
  core::Recorder::failing(code);
  in_.comm->net->cancel_all();
  throw core::Error(code, what);
}

void CallContext::refuse(dcclResult_t code, const std::string& why) const {
  stop(code, core::describe(in_.comm->rank, name(), why));
}

void CallContext::fail(const Xfer& x, const std::string& cause) {
  stop(x.req.misuse ? dcclInvalidUsage : dcclRemoteError,
       core::describe(in_.comm->rank, name(), where(x) + " failed: " + cause));
}

namespace {
void arm(Xfer& x, int peer, uint64_t tag, bool is_send, net::Transport* net, size_t bytes) {
  x.req.reset();
  x.req.len = bytes;  // for the flight recorder's step
  core::Recorder::posted(peer, is_send, bytes);
  x.req.peer = peer;
  x.req.tag = tag;
  x.req.is_send = is_send;
  x.active = true;
  x.net = net;
}
}  // namespace

void CallContext::send_tagged(int peer, const void* p, size_t bytes, uint64_t tag, Xfer& x) {
  arm(x, peer, tag, true, in_.comm->net, bytes);
  if (in_.path) {
    in_.path->post_send(peer, p, bytes, tag, x);
  } else {
    in_.comm->net->isend(peer, p, bytes, tag, &x.req);
    if (in_.host_sent) in_.host_sent->fetch_add(bytes, std::memory_order_relaxed);
  }
}

void CallContext::recv_tagged(int peer, void* p, size_t bytes, uint64_t tag, Xfer& x) {
  arm(x, peer, tag, false, in_.comm->net, bytes);
  if (in_.path) {
    in_.path->post_recv(peer, p, bytes, tag, x);
  } else {
    in_.comm->net->irecv(peer, p, bytes, tag, &x.req);
    if (in_.host_recv) in_.host_recv->fetch_add(bytes, std::memory_order_relaxed);
  }
}

void CallContext::send(int peer, const void* p, size_t bytes, uint32_t step, Xfer& x) {
  send_tagged(peer, p, bytes, coll_tag_ | (step & 0xffffffu), x);
}

void CallContext::recv(int peer, void* p, size_t bytes, uint32_t step, Xfer& x) {
  recv_tagged(peer, p, bytes, coll_tag_ | (step & 0xffffffu), x);
}

void CallContext::check_failed() const {
  const core::FailFlag& fail = in_.comm->fail;
  if (fail.raised()) stop(fail.code(), core::describe(in_.comm->rank, name(), "stopped: " + fail.text()));
}

bool CallContext::poll(Xfer& x) {
  check_failed();
  if (in_.path) {
    try {
      return in_.path->progress(x);
    } catch (const core::Error& e) {
      stop(e.code(), core::describe(in_.comm->rank, name(), where(x) + ": " + e.what()));
    }
  }
  if (x.req.done.load(std::memory_order_acquire)) {
    if (x.req.failed) fail(x, x.req.error);
    return true;
  }
  return false;
}

size_t CallContext::wait_any(Xfer* const* xs, size_t n) {
  auto start = Clock::now();
  auto deadline = wait_deadline(start);
  core::Backoff backoff(in_.comm->spin_us, start);
  for (unsigned iter = 0;; ++iter) {
    bool any_active = false;
    for (size_t i = 0; i < n; ++i) {
      Xfer& x = *xs[i];
      if (!x.active) continue;
      any_active = true;
      if (poll(x)) {
        x.active = false;
        core::Recorder::step(x.req.peer, x.req.is_send, x.req.len);
        return i;
      }
    }
    if (!any_active)
      throw core::Error(dcclInternalError,
                        core::describe(in_.comm->rank, name(), "wait_any with nothing in flight"));
    // Every 16th pass, after a poll that followed progress() and found nothing: the
    // idle step. (An idle step straight after progress() would nap through what that
    // progress() had just completed: a full nap a step wherever the wait has no spin
    // budget, e.g. 2 ranks sharing a CPU.)
    if ((iter & 15) == 1) {
      check_failed();
      auto now = Clock::now();
      if (now > deadline) {
        std::string pending;
        for (size_t i = 0; i < n; ++i)
          if (xs[i]->active) pending += (pending.empty() ? "" : ", ") + where(*xs[i]) + in_.comm->net->mismatch_note(xs[i]->req);
        stop(dcclTimeout, core::describe(in_.comm->rank, name(),
                                         "timed out after " + core::seconds_text(in_.comm->timeout_ms) +
                                             " waiting for " + pending));
      }
      backoff.idle(now, in_.comm->net->nap_wakes(), [this](int64_t ns) { in_.comm->net->nap(ns); });  // past the spin budget: yield, then nap
    }
    in_.comm->net->progress();
  }
}

void CallContext::wait(Xfer& x) {
  Xfer* p = &x;
  while (x.active) wait_any(&p, 1);
}

void CallContext::wait_all(Xfer* xs, size_t n) {
  std::vector<Xfer*> ptrs;
  ptrs.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (xs[i].active) ptrs.push_back(&xs[i]);
  for (size_t left = ptrs.size(); left > 0; --left) wait_any(ptrs.data(), ptrs.size());
}

void CallContext::reduce(void* dst, const void* a, const void* b, size_t count) {
  if (count == 0) return;
  if (in_.backend == nullptr || in_.backend->kind() == mem::Kind::Host) {
    kernels::reduce(dst, a, b, count, in_.dt, in_.op);
    return;
  }
  in_.backend->wait(in_.backend->reduce_async(dst, a, b, count, in_.dt, in_.op), in_.comm->timeout_ms);
}

void CallContext::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (in_.backend == nullptr || in_.backend->kind() == mem::Kind::Host) {
    memcpy(dst, src, bytes);
    return;
  }
  in_.backend->wait(in_.backend->copy_async(dst, src, bytes), in_.comm->timeout_ms);
}

void CallContext::finish_avg(void* buf, size_t count) {
  if (count == 0 || in_.op != dcclAvg) return;
  if (in_.backend == nullptr || in_.backend->kind() == mem::Kind::Host) {
    kernels::finish_avg(buf, count, in_.dt, in_.comm->nranks);
    return;
  }
  in_.backend->wait(in_.backend->avg_async(buf, count, in_.dt, in_.comm->nranks), in_.comm->timeout_ms);
}

void CallContext::scale(void* dst, const void* src, size_t count, const void* scalar) {
  if (count == 0) return;
  // Multiplies by a block of factors (the scalar repeated) with the product kernel,
  // so that every datatype rounds as the reductions do.
  const size_t es = esize_, block = std::min<size_t>(count, 4096);
  std::vector<char> factors(block * es);
  for (size_t i = 0; i < block; ++i) memcpy(factors.data() + i * es, scalar, es);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (in_.backend == nullptr || in_.backend->kind() == mem::Kind::Host) {
    for (size_t off = 0; off < count; off += block)
      kernels::reduce(d + off * es, s + off * es, factors.data(), std::min(block, count - off), in_.dt, dcclProd);
    return;
  }
  void* dev = scratch(block * es);
  mem::Backend& be = *in_.backend;
  be.wait(be.copy_async(dev, factors.data(), block * es), in_.comm->timeout_ms);
  mem::Ticket last = 0;  // the backend completes its work in order: wait for the last
  for (size_t off = 0; off < count; off += block)
    last = be.reduce_async(d + off * es, s + off * es, dev, std::min(block, count - off), in_.dt, dcclProd);
  be.wait(last, in_.comm->timeout_ms);
}

void* CallContext::scratch(size_t bytes) { return in_.scratch->take(bytes); }

// The clock is read only once a wait has gone on for a while (its first
// check_deadline), not on every operation: a small operation ends long before.
void CallContext::start_deadline() { deadline_ = {}; }

std::chrono::steady_clock::time_point CallContext::wait_deadline(Clock::time_point start) const {
  const Clock::time_point own = start + std::chrono::milliseconds(in_.comm->timeout_ms);
  return in_.deadline == Clock::time_point{} ? own : std::min(own, in_.deadline);
}

void CallContext::check_deadline(const char* what, int peer) {
  check_failed();
  const auto now = Clock::now();
  if (deadline_ == Clock::time_point{}) deadline_ = wait_deadline(now);
  if (now > deadline_)
    stop(dcclTimeout, core::describe(in_.comm->rank, name(),
                                     "timed out after " + core::seconds_text(in_.comm->timeout_ms) + " waiting for " +
                                         peer_name(peer) + " (" + what + ")"));
}

}  // namespace dccl::coll
