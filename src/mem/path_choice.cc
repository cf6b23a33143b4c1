#include "mem/path_choice.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "mem/viability.hpp"

namespace dccl::mem {

PathChooser::PathChooser(net::Transport& net, const PathOptions& opts, PathCounters counters)
    : net_(net), opts_(opts), ctr_(counters) {
  if (opts_.mode != "auto" && opts_.mode != "0" && opts_.mode != "1")
    core::raise(dcclInvalidArgument, "DCCL_PEER_DIRECT must be auto, 1 or 0, not '" + opts_.mode + "'");
}

PathChooser::~PathChooser() = default;

PathSel PathChooser::select(const void* a, const void* b, const std::function<std::string()>& opname,
                            Backend* known) {
  Backend* ba = a ? (known ? known : &backend_of(a)) : nullptr;
  Backend* bb = b ? (known ? known : &backend_of(b)) : nullptr;
  if (ba && bb && ba != bb)
    core::raise(dcclInvalidArgument,
                core::describe(opts_.rank, opname(), std::string("sendbuff is ") + ba->name() + " memory but recvbuff is " +
                                                       bb->name() + " memory; both must be the same kind"));
  Backend* be = ba ? ba : bb ? bb : &host_backend();
  PathSel sel;
  sel.backend = be;
  if (be->kind() == Kind::Host) return sel;
  for (const void* p : {a, b})
    if (p) check_usable(*be, p, opname);

  std::lock_guard<std::mutex> lk(mu_);
  sel.direct = direct_for(*be, opname) && fits_direct(*be, a, b);
  if (sel.direct) {
    sel.path = direct_.get();
  } else {
    if (!staged_)
      staged_ = std::make_unique<StagedPath>(net_, opts_.rank, opts_.nranks, opts_.slot_bytes, opts_.slots, ctr_);
    sel.path = staged_.get();
  }
  return sel;
}

void PathChooser::check_usable(Backend& be, const void* p, const std::function<std::string()>& opname) const {
  const std::string why = be.unusable_reason(p);
  if (!why.empty()) core::raise(dcclInvalidArgument, core::describe(opts_.rank, opname(), why));
}

bool PathChooser::fits_direct(Backend& be, const void* a, const void* b) {
  for (const void* p : {a, b}) {
    if (!p) continue;
    const std::string why = be.direct_unfit(p);
    if (why.empty()) continue;
    if (!unfit_logged_) {
      DCCL_INFO("rank %d: data path: %s memory: %s; such buffers are staged (logged once)", opts_.rank, be.name(),
                why.c_str());
      unfit_logged_ = true;
    }
    return false;
  }
  return true;
}

bool PathChooser::direct_for(Backend& be, const std::function<std::string()>& opname) {
  const Decision& d = decide(be.kind());
  if (!d.direct && opts_.mode == "1")
    core::raise(dcclUnavailable,
                core::describe(opts_.rank, opname(), std::string("peer-direct required (DCCL_PEER_DIRECT=1) but not viable for ") +
                                                       be.name() + " memory: " + d.reason));
  if (d.direct && !direct_) direct_ = std::make_unique<DirectPath>(net_, opts_.rank, opts_.cache_bytes, ctr_);
  return d.direct;
}

const PathChooser::Decision& PathChooser::decide(Kind kind) {
  Decision& d = decisions_[static_cast<int>(kind)];
  if (d.decided) return d;
  if (opts_.mode == "0") {
    d.direct = false;
    d.reason = "off by request (DCCL_PEER_DIRECT=0)";
  } else {
    auto layers = check_viability(kind_name(kind), opts_.provider, &net_);
    const Layer* bad = first_failure(layers);
    d.direct = bad == nullptr;
    if (bad) d.reason = "layer '" + bad->name + "' failed: " + bad->detail;
  }
  d.decided = true;
  const std::string how = d.direct             ? "peer-direct (every viability layer passed)"
                          : opts_.mode == "1" ? "calls fail: peer-direct required (DCCL_PEER_DIRECT=1) but " + d.reason
                                              : "host-staged: " + d.reason;
  DCCL_INFO("rank %d: data path: %s memory: %s", opts_.rank, kind_name(kind), how.c_str());
  return d;
}

void PathChooser::log_plan() {
  std::lock_guard<std::mutex> lk(mu_);
  DCCL_INFO("rank %d: data path: host memory: the provider reads and writes it in place (no staging, counted as "
            "direct)", opts_.rank);
  decide(Kind::Sim);
  if (opts_.mode == "0")
    decide(Kind::Cuda);  // no layer is checked: the driver stays untouched
  else
    DCCL_INFO("rank %d: data path: cuda memory: decided at its first use (DCCL_PEER_DIRECT=%s)", opts_.rank,
              opts_.mode.c_str());
}

RegCacheStats PathChooser::cache_stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return direct_ ? direct_->cache_stats() : RegCacheStats{};
}

void* PathChooser::register_user(const void* p, size_t bytes) {
  Backend& be = backend_of(p);
  auto reg = std::make_unique<UserReg>();
  reg->p = p;
  const auto opname = [] { return std::string("dcclCommRegister"); };
  if (be.kind() != Kind::Host) check_usable(be, p, opname);
  std::lock_guard<std::mutex> lk(mu_);
  if (be.kind() != Kind::Host && direct_for(be, opname) && fits_direct(be, p, nullptr)) {
    reg->ref = direct_->acquire(p, bytes);
    reg->direct = true;
  }
  void* handle = reg.get();
  user_.emplace(handle, std::move(reg));
  return handle;
}

void PathChooser::deregister_user(void* handle) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = user_.find(handle);
  if (it == user_.end())
    core::raise(dcclInvalidArgument, core::describe(opts_.rank, "dcclCommDeregister",
                                                    "handle was not returned by dcclCommRegister on this "
                                                    "communicator (or is deregistered already)"));
  std::unique_ptr<UserReg> reg = std::move(it->second);
  user_.erase(it);
  if (!reg->direct) return;
  reg->ref.release();
  // The allocation goes from the cache (now, or when its last transfer ends) unless
  // another registration still holds it: that one must keep its calls registration-free.
  Backend& be = backend_of(reg->p);
  void* base = nullptr;
  size_t size = 0;
  const bool held = be.range_of(reg->p, &base, &size) &&
                    std::any_of(user_.begin(), user_.end(), [&](const auto& kv) {
                      void* b = nullptr;
                      size_t n = 0;
                      return kv.second->direct && &backend_of(kv.second->p) == &be &&
                             be.range_of(kv.second->p, &b, &n) && b == base;
                    });
  if (!held) direct_->forget(reg->p);
}

}  // namespace dccl::mem
