// Routing and waiting (net/link_transport.hpp): each message goes to one of its
// peer's links; wait() progresses every link's engine until the requests finish, and
// its timeout says what each pending request waits on.
#include "net/link_transport.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "core/backoff.hpp"
#include "core/error.hpp"

namespace dccl::net {

namespace {

using Clock = std::chrono::steady_clock;

// wait(): core::Backoff (spin, yield, then growing naps) between polls. The
// providers' wait objects are not used, since none wakes a waiter when a message
// arrives in libfabric 1.17: shm refuses FI_WAIT_FD (-FI_ENOSYS); tcp;ofi_rxm
// opens it and fi_trywait allows the sleep, but its descriptor stays quiet until
// a fi_cq_read makes progress, so a wait on it (or fi_cq_sread) ends at its timeout:
// 4 ranks beside 2 spinning processes took 2.3-14 ms per 8 B allreduce that way
// against 0.24-0.47 ms with the naps (bench/results/2026-12-04-contention2/NOTES.md).

std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

void LinkTransport::adopt(std::vector<Route> routes, std::vector<std::unique_ptr<Link>> links,
                          const std::vector<const void*>& order) {
  routes_ = std::move(routes);
  links_ = std::move(links);
  std::vector<Link*> parts;
  for (auto& l : links_) l->parts(&parts);
  engines_.clear();
  auto add = [&](Link* l) {
    for (Link* e : engines_)
      if (e->engine() == l->engine()) return;
    engines_.push_back(l);
  };
  for (const void* e : order)
    for (Link* l : parts)
      if (l->engine() == e) add(l);
  for (Link* l : parts) add(l);
}

void LinkTransport::nap(int64_t ns) {
  for (Link* l : engines_)
    if (l->nap(ns)) return;
  timespec ts{0, static_cast<long>(ns)};
  nanosleep(&ts, nullptr);
}

std::vector<std::string> LinkTransport::rail_counters() const {
  std::vector<std::string> out;
  for (const Link* l : engines_)
    for (std::string& line : l->counters()) out.push_back(std::move(line));
  return out;
}

void LinkTransport::post(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) {
  const char* op = send ? "isend" : "irecv";
  if (!connected_) core::raise(dcclInvalidUsage, core::describe(opts_.rank, op, "connect() was not called"));
  if (peer < 0 || peer >= opts_.nranks || !req || (!buf && len))
    core::raise(dcclInvalidArgument,
                core::describe(opts_.rank, op,
                               "bad arguments (peer " + std::to_string(peer) + " of " + std::to_string(opts_.nranks) +
                                   ", request " + (req ? "set" : "null") + ", " + std::to_string(len) + " bytes at " +
                                   (buf ? "a buffer" : "null") + ")"));
  req->arm(peer, tag, len, send);
  if (tag & kLengthMarkBits)
    core::raise(dcclInternalError, core::describe(opts_.rank, op, "tag uses the length mark's bits"));
  const Route& rt = routes_[static_cast<size_t>(peer)];
  const bool device = mr && device_memory(mr);
  Link* link = rt.link;
  if (rt.host_only) {
    if (device)
      core::raise(dcclInternalError,
                  core::describe(opts_.rank, op, "device memory for rank " + std::to_string(peer) + ", whose only route is " +
                                                     rt.link->describe() + " (" + untrusted_ + ")"));
  } else if (rt.large && len >= rt.large_min) {
    link = rt.large;
  } else if (rt.small && len <= rt.small_max && !device) {
    link = rt.small;
  }
  // A receive of up to len bytes cannot know which link or cut a shorter message took.
  if (!send && req->up_to && !rt.host_only && (rt.small || rt.large))
    core::raise(dcclInvalidUsage,
                core::describe(opts_.rank, op,
                               "a receive of up to " + std::to_string(len) + " bytes from rank " + std::to_string(peer) +
                                   ", whose messages take the socket path or stripes by size"));
  req->link = link;
  link->post(send, buf, len, tag, req, mr);
}

std::string LinkTransport::describe_req(const Request& r) const {
  return std::string(r.is_send ? "send to" : "recv from") + " rank " + std::to_string(r.peer) + " (tag " + hex(r.tag) +
         (r.link ? ", " + r.link->describe() : std::string()) + ")";
}

void LinkTransport::wait(Request* const* reqs, size_t n, const std::string& what) {
  const auto t0 = Clock::now();
  const auto deadline = t0 + opts_.timeout;
  core::Backoff backoff(opts_.spin_us, t0);
  size_t first = 0;  // reqs[0, first) are done
  for (bool progressed = false;; progressed = true) {
    bool all = true;
    for (size_t i = first; i < n; ++i) {
      const Request* r = reqs[i];
      if (!r) continue;
      if (!r->done.load(std::memory_order_acquire)) {
        all = false;
        continue;
      }
      if (r->failed)
        core::raise(dcclRemoteError, core::describe(opts_.rank, what, describe_req(*r) + " failed: " + r->error));
      if (all) first = i + 1;
    }
    if (all) return;
    if (progressed) {  // the requests were looked at after progress(): idle only then
      const auto now = Clock::now();
      if (now >= deadline) break;
      // Past the spin budget, first yield (the peer we wait for may need this core: 8 ranks
      // can share 2), then nap, so that oversubscribed ranks leave the CPU to those with
      // work (8 ranks on 2 cores, ring of 1 MiB: ~4x faster than yielding forever; 2-rank
      // ping-pong keeps its ~1-5 us since it never gets past the spin).
      backoff.idle(now, nap_wakes_, [this](int64_t ns) { nap(ns); });
    }
    progress();
  }
  std::string pending;
  size_t count = 0;
  for (size_t i = first; i < n; ++i) {
    if (!reqs[i] || reqs[i]->done.load(std::memory_order_acquire)) continue;
    if (count++ < 8)
      pending += (pending.empty() ? "" : ", ") + describe_req(*reqs[i]) + mismatch_note(*reqs[i]) +
                 (reqs[i]->link ? reqs[i]->link->pending_note(*reqs[i]) : std::string());
  }
  if (count > 8) pending += " and " + std::to_string(count - 8) + " more";
  core::raise(dcclTimeout, core::describe(opts_.rank, what,
                                          "timed out after " + std::to_string(opts_.timeout.count()) +
                                              " ms waiting for " + pending));
}

std::string call_mismatch_note(const Request& r, size_t got) {
  return "; call mismatch: rank " + std::to_string(r.peer) +
         " sent a message for this step of a call that differs from this rank's (another count, datatype, "
         "collective, op or root; its message has " + std::to_string(got) + " bytes, this rank expects " +
         std::to_string(r.len) + ")";
}

}  // namespace dccl::net
