// A communicator's submission order: tickets, turns, the stream gate, and
// quiesce() which ends the work before the communicator goes.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <thread>

#include "comm/communicator.hpp"
#include "core/log.hpp"
#include "core/types.hpp"
#include "tune/algo_table.hpp"

namespace dccl::comm {

using core::describe;
using core::dtype_name;
using core::Error;
using core::log_set_rank;
using core::raise;

namespace {
// CLOCK_MONOTONIC_COARSE: steady_clock's clock (CLOCK_MONOTONIC) as of the last tick.
std::chrono::steady_clock::time_point coarse_now() {
  timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return std::chrono::steady_clock::now();
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

// "all_reduce #3 (1024 x float32)", "send to rank 1 (…)"; a group names its first call.
std::string what_of(std::span<const sched::Op> ops) {
  if (ops.empty()) return "submit";
  const sched::Op& op = ops[0];
  std::string s = op.coll == tune::Coll::SendRecv
                      ? std::string(op.is_send ? "send to" : "recv from") + " rank " + std::to_string(op.peer)
                      : std::string(tune::coll_name(op.coll)) + " #" + std::to_string(op.seq);
  s += " (" + std::to_string(op.count) + " x " + dtype_name(op.dt) + ")";
  if (ops.size() > 1) s = "group of " + std::to_string(ops.size()) + " calls starting with " + s;
  return s;
}
}  // namespace

// Stream work holds the gate, not the communicator: once quiesce() closed it, work
// still queued fails when its stream reaches it, without touching the communicator.
namespace {
constexpr const char* finalized_note = "refused: the communicator was finalized (dcclCommFinalize); only "
                                       "dcclCommDestroy may follow";
}  // namespace

struct Communicator::SubmitGate {
  std::mutex mu;
  Communicator* comm;  // null once closed
  int rank;
  uint64_t queued = 0;  // submissions on streams that have not reached the communicator
  std::string why;      // why it closed
  SubmitGate(Communicator* c, int r) : comm(c), rank(r) {}
  Communicator* enter(std::span<const sched::Op> ops) {
    std::lock_guard<std::mutex> lk(mu);
    if (!comm) raise(dcclInvalidUsage, describe(rank, what_of(ops), "cancelled: " + why));
    --queued;
    return comm;
  }
};

void Communicator::run_ticket(uint64_t ticket, std::span<const sched::Op> ops) {
  log_set_rank(log_rank_);
  // The call's one deadline, for its turn and every wait in it: DCCL_TIMEOUT_S from
  // now, or the larger call's that this one is a step of (the hierarchy's). Read
  // from the coarse clock (the same clock, a few ms behind): a timeout is seconds,
  // and the fine clock's read is a tenth of an 8-byte call (36 of 450 ns here).
  TimePoint deadline = coarse_now() + std::chrono::milliseconds(cfg_.timeout_ms);
  if (!ops.empty() && ops[0].deadline != TimePoint{}) deadline = std::min(deadline, ops[0].deadline);
  struct Leave {
    Communicator* c;
    uint64_t ticket;
    bool armed;
    ~Leave() {
      if (armed) c->leave(ticket);
    }
  } leave{this, ticket, ticket != kTakeTicket};
  {
    std::unique_lock<std::mutex> lk(order_mu_);
    if (ticket == kTakeTicket) {  // a blocking call takes its ticket here
      if (finalizing_) raise(dcclInvalidUsage, describe(state_.rank, what_of(ops), finalized_note));
      ++inside_;
      ticket = leave.ticket = next_ticket_++;
      leave.armed = true;
    }
    auto ready = [&] { return turn_ == ticket || aborted_.load() || closing_; };
    bool ok = ready() || wait_order(lk, deadline, ready);
    if (closing_) {
      ++refused_;
      raise(dcclInvalidUsage, describe(state_.rank, what_of(ops), std::string("refused: ") +
                                                                 (aborted_.load() ? "dcclCommAbort" : "dcclCommDestroy") +
                                                                 " was called while it waited for its turn"));
    }
    if (!ok)
      raise(dcclTimeout, describe(state_.rank, "submit", "earlier operations on this communicator did not "
                                                   "finish within " + core::timeout_text(cfg_)));
    if (turn_ == ticket) {
      running_ = ops;
      res_.deadline = deadline;  // one submission holds the turn at a time
    }
  }
  // The refused call by name ("all_reduce #4"), or "submit" for an empty one.
  // Spelled out only when refused: building it costs more than a small call's own work.
  auto what = [&] {
    return ops.empty() ? std::string("submit")
                       : std::string(tune::coll_name(ops[0].coll)) + " #" + std::to_string(ops[0].seq);
  };
  if (aborted_.load()) raise(dcclInvalidUsage, describe(state_.rank, what(), "communicator was aborted"));
  if (async_code_.load() != dcclSuccess)
    raise(async_code_.load(), describe(state_.rank, what(), "communicator failed earlier: " + async_error_text()));
  try {
    sched::execute(res_, ops);
  } catch (const Error& e) {
    // A timeout waiting for a rank of this host usually means that rank is itself
    // stuck on one further away (a host lost across the network): its call shares
    // this one's deadline up to the moments the two began, so it times out about
    // now and names the cause; wait briefly for that rather than blame it. A
    // report that stopped a sub-communicator ("stopped: ...") names its cause already.
    const std::string& me = state_.peer_names[static_cast<size_t>(state_.rank)];
    const std::string here = me.substr(me.find(" on ")) + " (";
    const std::string text = e.what();
    const bool echo_timeout = e.code() == dcclTimeout && topo_.nhosts() > 1 && text.find(here) != std::string::npos &&
                              text.find("stopped: ") == std::string::npos;
    if (!state_.fail.raised() && (e.code() == dcclRemoteError || e.code() == dcclSystemError || echo_timeout)) {
      // A transport error here is often the echo of another rank's failure (its
      // peers cancel or vanish): give the watcher a moment to bring the root cause.
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(echo_timeout ? 500 : 300);
      while (!state_.fail.raised() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (state_.fail.raised() && std::string(e.what()).find(state_.fail.text()) == std::string::npos) {
      Error root(state_.fail.code(), describe(state_.rank, what(), "stopped: " + state_.fail.text() + " (seen here as: " + e.what() + ")"));
      record_error(root);
      throw root;
    }
    record_error(e);
    if (!state_.fail.raised()) {  // this rank found the problem: stop everyone
      watchdog_->announce(e.code(), e.what());
      set_failed(e.code(), e.what());
    }
    throw;
  }
}

void Communicator::leave(uint64_t ticket) {
  // Notify under the lock: quiesce() waiting for the last one may free the cv.
  std::lock_guard<std::mutex> lk(order_mu_);
  if (ticket == turn_) {
    running_ = {};
    ++turn_;
    for (auto it = std::find(skipped_.begin(), skipped_.end(), turn_); it != skipped_.end();
         it = std::find(skipped_.begin(), skipped_.end(), turn_)) {
      skipped_.erase(it);
      ++turn_;
    }
  } else {
    skipped_.push_back(ticket);  // left before its turn (refused, aborted, timed out)
  }
  --inside_;
  if (order_waiters_ > 0) order_cv_.notify_all();  // under the lock: no wait begins unseen
}

void Communicator::submit(std::vector<sched::Op> ops, sched::Stream* stream) {
  if (!stream) {
    run_ticket(kTakeTicket, ops);
    return;
  }
  std::function<void(bool)> work = reserve(std::move(ops));
  try {
    stream->enqueue([work] { work(true); });
  } catch (...) {
    work(false);
    throw;
  }
}

std::function<void(bool)> Communicator::reserve(std::vector<sched::Op> ops) {
  std::shared_ptr<SubmitGate> gate;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lk(order_mu_);
    if (!gate_) gate_ = std::make_shared<SubmitGate>(this, state_.rank);
    gate = gate_;
    std::lock_guard<std::mutex> g(gate->mu);
    if (!gate->comm) raise(dcclInvalidUsage, describe(state_.rank, what_of(ops), "the communicator is being destroyed"));
    if (finalizing_) raise(dcclInvalidUsage, describe(state_.rank, what_of(ops), finalized_note));
    ++gate->queued;
    ++inside_;
    ticket = next_ticket_++;
  }
  return [gate, ticket, ops = std::move(ops)](bool run) {
    Communicator* c = gate->enter(ops);  // refused once destroy cancelled it
    if (run) c->run_ticket(ticket, ops);
    else c->leave(ticket);
  };
}

bool Communicator::quiesce() {
  std::unique_lock<std::mutex> lk(order_mu_);
  if (quiesced_) return true;
  const bool first = !closing_;
  const bool by_abort = aborted_.load();  // dcclCommAbort came first
  const std::string fn = by_abort ? "dcclCommAbort" : "dcclCommDestroy";
  if (first) {
    closing_ = true;
    uint64_t cancelled = 0;
    if (gate_) {
      std::lock_guard<std::mutex> g(gate_->mu);
      cancelled = gate_->queued;
      gate_->comm = nullptr;
      gate_->why = std::string("the communicator was ") + (by_abort ? "aborted" : "destroyed") + " with " +
                   std::to_string(cancelled) + " operation" + (cancelled == 1 ? "" : "s") +
                   " still queued (synchronize its streams first)";
    }
    inside_ -= cancelled;
    refused_ += cancelled;  // counted with the refused calls from here on
    order_cv_.notify_all();
    if (cancelled > 0) DCCL_INFO("%s: cancelled %" PRIu64 " queued operations", fn.c_str(), cancelled);
  }
  // The running submission is bounded by DCCL_TIMEOUT_S through its own waits;
  // past that it is aborted, which stops its waits at once.
  const auto bound = std::chrono::milliseconds(cfg_.timeout_ms);
  auto idle = [&] { return inside_ == 0; };
  if (first && !wait_order(lk, std::chrono::steady_clock::now() + bound, idle)) {
    std::string what = running_.empty() ? "an operation" : what_of(running_);
    lk.unlock();
    stop(describe(state_.rank, fn, what + " was still running " + core::timeout_text(cfg_) + " after " + fn +
                                 " began: aborted it"));
    lk.lock();
  }
  if (!wait_order(lk, std::chrono::steady_clock::now() + bound, idle)) return false;
  // The thread of a call that just ended leaves its scope (CallScope) after its
  // operation: until it gave the flag back it may still touch the communicator.
  for (const auto until = std::chrono::steady_clock::now() + bound; caller_.load(std::memory_order_acquire);) {
    if (std::chrono::steady_clock::now() >= until) return false;
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lk.lock();
  }
  quiesced_ = true;
  const uint64_t lost = refused_;
  lk.unlock();
  // The other ranks' matching calls would wait for this rank in vain: stop them now.
  if (lost > 0 && !state_.fail.raised()) {
    announced_ = true;
    stop("rank " + std::to_string(state_.rank) + (by_abort ? " aborted" : " destroyed") +
         " the communicator with " + std::to_string(lost) + " operation" + (lost == 1 ? "" : "s") +
         " still queued or waiting for their turn");
  }
  return true;
}

void Communicator::finalize() {
  const char* fn = "dcclCommFinalize";
  {
    std::unique_lock<std::mutex> lk(order_mu_);
    if (finalizing_ || closing_)
      raise(dcclInvalidUsage, describe(state_.rank, fn, finalizing_ ? "the communicator was finalized already"
                                                              : "the communicator is being destroyed"));
    finalizing_ = true;
    // Queued stream work counts as inside: it runs to its end, unlike at destroy.
    if (!wait_order(lk, std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg_.timeout_ms),
                    [&] { return inside_ == 0; })) {
      const std::string what = running_.empty() ? "queued operations" : what_of(running_);
      raise(dcclTimeout, describe(state_.rank, fn, what + " did not finish within " + core::timeout_text(cfg_)));
    }
  }
  if (state_.fail.raised()) raise(state_.fail.code(), describe(state_.rank, fn, "the communicator failed earlier: " + state_.fail.text()));
  if (levels_) levels_->finalize();
  {
    std::lock_guard<std::mutex> lk(boot_mu_);
    boot_->barrier();  // every rank's last operation is over: destroy needs no meeting
  }
  finalized_.store(true);
  watchdog_->stop();  // the store's host may now leave first: not a failure
}

uint64_t Communicator::enter_call(const char* fn) {
  // One locked instruction per call: the owner's flag is taken by exchange and
  // given back by a plain release store; a thread that finds it taken owns nothing.
  if (caller_.exchange(true, std::memory_order_acq_rel) == false) return clashes_.load(std::memory_order_relaxed);
  clashes_.fetch_add(1, std::memory_order_acq_rel);
  const std::string text = describe(state_.rank, fn, std::string("called while another thread was inside a call on the same "
                                                           "communicator: two threads must not use one communicator at once "
                                                           "(the ranks would pair their calls in no defined order); the "
                                                           "communicator is stopped"));
  if (!state_.fail.raised() && !finalized_.load() && watchdog_) watchdog_->announce(dcclInvalidUsage, text);
  set_failed(dcclInvalidUsage, text);
  raise(dcclInvalidUsage, text);
}

void Communicator::leave_call(const char* fn, uint64_t entered) {
  const uint64_t clashes = clashes_.load(std::memory_order_acquire);
  const int rank = state_.rank;
  caller_.store(false, std::memory_order_release);  // the last touch (quiesce() may free it now)
  if (clashes != entered)
    raise(dcclInvalidUsage, describe(rank, fn, "another thread called into this communicator while this call ran: "
                                                "two threads must not use one communicator at once (the ranks would "
                                                "pair their calls in no defined order); the communicator is stopped"));
}

void Communicator::refuse_if_finalized(const char* fn) {
  std::lock_guard<std::mutex> lk(order_mu_);
  if (finalizing_) raise(dcclInvalidUsage, describe(state_.rank, fn, finalized_note));
}

void Communicator::submit_one(const sched::Op& op, sched::Stream* stream) {
  if (stream) return submit(std::vector<sched::Op>{op}, stream);
  run_ticket(kTakeTicket, std::span<const sched::Op>(&op, 1));
}

}  // namespace dccl::comm
