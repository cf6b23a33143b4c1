#include "api/handles.hpp"

#include <atomic>
#include <mutex>
#include <unordered_set>

namespace dccl::api {

namespace {
thread_local std::string t_last_error;
std::mutex g_mu;
// Bumped (under g_mu) whenever a handle is unregistered. A thread remembers the
// last handle it found live, with the generation it saw then: while nothing was
// unregistered since, the same handle is still live and needs neither the lock
// nor the lookup (the blocking small-call path pays for each).
std::atomic<uint64_t> g_gen{0};
struct Seen {
  const void* handle = nullptr;
  uint64_t gen = 0;
};
thread_local Seen t_comm_seen, t_stream_seen;
bool seen(const Seen& s, const void* h) {
  return s.handle == h && s.gen == g_gen.load(std::memory_order_acquire);
}
std::unordered_set<dcclComm*>& comms() {
  static auto* s = new std::unordered_set<dcclComm*>();
  return *s;
}
std::unordered_set<dcclStream*>& streams() {
  static auto* s = new std::unordered_set<dcclStream*>();
  return *s;
}
}  // namespace

void set_last_error(const std::string& text) { t_last_error = text; }
std::string say(int rank, const char* fn, const std::string& why) {
  return rank >= 0 ? core::describe(rank, fn, why) : std::string(fn) + ": " + why;
}
const char* last_error() { return t_last_error.c_str(); }

void register_comm(dcclComm* c) {
  std::lock_guard<std::mutex> lk(g_mu);
  comms().insert(c);
}
bool unregister_comm(dcclComm* c) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_gen.fetch_add(1, std::memory_order_release);
  return comms().erase(c) == 1;
}
namespace {
// g_mu held. Adopts the communicator of a finished, successful init.
dcclResult_t settle(dcclComm* c, std::string* text) {
  if (!c->pending) return dcclSuccess;
  // Kept alive past the lock's end: adopting the communicator drops c->pending.
  const std::shared_ptr<PendingInit> hold = c->pending;
  PendingInit& p = *hold;
  std::lock_guard<std::mutex> lk(p.mu);
  if (!p.done) return dcclInProgress;
  if (p.rc != dcclSuccess) {
    if (text) *text = p.text;
    return p.rc;
  }
  if (p.thread.joinable()) p.thread.join();  // it has ended
  c->impl = std::move(p.made);
  c->pending.reset();
  return dcclSuccess;
}
void check_live(dcclComm* c, const char* fn) {
  if (!comms().count(c))
    core::raise(dcclInvalidUsage, std::string(fn) + ": comm is not a live communicator (destroyed or never created)");
}
}  // namespace

namespace {
comm::Communicator& in_this_process(comm::Communicator& c, const char* fn) {
  if (c.made().forked()) core::raise(dcclInvalidUsage, say(c.rank(), fn, c.made().fork_text("communicator")));
  return c;
}
}  // namespace

comm::Communicator& comm_of(dcclComm* c, const char* fn) {
  if (c == nullptr) core::raise(dcclInvalidArgument, std::string(fn) + ": comm is NULL");
  if (seen(t_comm_seen, c)) return in_this_process(*c->impl, fn);
  std::lock_guard<std::mutex> lk(g_mu);
  check_live(c, fn);
  std::string text;
  const dcclResult_t rc = settle(c, &text);
  if (rc == dcclInProgress)
    core::raise(dcclInProgress, say(c->pending->rank, fn, "the communicator's non-blocking init is still in "
                                                          "progress: poll dcclCommGetAsyncError until dcclSuccess"));
  if (rc != dcclSuccess) core::raise(dcclInvalidUsage, say(-1, fn, "the communicator's init failed: " + text));
  t_comm_seen = {c, g_gen.load(std::memory_order_relaxed)};  // g_mu held: no unregister in between
  return in_this_process(*c->impl, fn);
}

dcclResult_t init_state(dcclComm* c, const char* fn, std::string* text) {
  if (c == nullptr) core::raise(dcclInvalidArgument, std::string(fn) + ": comm is NULL");
  std::lock_guard<std::mutex> lk(g_mu);
  check_live(c, fn);
  return settle(c, text);
}

void join_init(dcclComm* c) {
  std::shared_ptr<PendingInit> p;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    p = c->pending;
  }
  if (!p) return;
  if (p->thread.joinable()) p->thread.join();  // the init's own waits are bounded by its timeout
  std::lock_guard<std::mutex> lk(p->mu);
  c->impl = std::move(p->made);
  c->pending.reset();
}
void register_stream(dcclStream* s) {
  std::lock_guard<std::mutex> lk(g_mu);
  streams().insert(s);
}
bool unregister_stream(dcclStream* s) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_gen.fetch_add(1, std::memory_order_release);
  return streams().erase(s) == 1;
}
namespace {
sched::Stream* stream_here(dcclStream* s, const char* fn, int rank) {
  if (s->made.forked()) core::raise(dcclInvalidUsage, say(rank, fn, s->made.fork_text("stream")));
  return &s->impl;
}
}  // namespace

sched::Stream* stream_of(dcclStream* s, const char* fn, int rank) {
  if (s == nullptr) return nullptr;
  if (seen(t_stream_seen, s)) return stream_here(s, fn, rank);
  std::lock_guard<std::mutex> lk(g_mu);
  if (!streams().count(s)) {
    core::raise(dcclInvalidUsage, say(rank, fn, "stream is not a live stream (destroyed or never created)"));
  }
  t_stream_seen = {s, g_gen.load(std::memory_order_relaxed)};
  return stream_here(s, fn, rank);
}

}  // namespace dccl::api
