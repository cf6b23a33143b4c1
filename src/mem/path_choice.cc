#include "mem/path_choice.hpp"

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

PathSel PathChooser::select(const void* a, const void* b, const std::function<std::string()>& opname) {
  Backend* ba = a ? &backend_of(a) : nullptr;
  Backend* bb = b ? &backend_of(b) : nullptr;
  if (ba && bb && ba != bb)
    core::raise(dcclInvalidArgument,
                core::describe(opts_.rank, opname(), std::string("sendbuff is ") + ba->name() + " memory but recvbuff is " +
                                                       bb->name() + " memory; both must be the same kind"));
  Backend* be = ba ? ba : bb ? bb : &host_backend();
  PathSel sel;
  sel.backend = be;
  if (be->kind() == Kind::Host) return sel;
  for (const void* p : {a, b}) {
    if (!p) continue;
    std::string why = be->unusable_reason(p);
    if (!why.empty()) core::raise(dcclInvalidArgument, core::describe(opts_.rank, opname(), why));
  }

  std::lock_guard<std::mutex> lk(mu_);
  Decision& d = decisions_[static_cast<int>(be->kind())];
  if (!d.decided) {
    if (opts_.mode == "0") {
      d.direct = false;
      d.reason = "DCCL_PEER_DIRECT=0";
    } else {
      auto layers = check_viability(be->name(), opts_.provider, &net_);
      const Layer* bad = first_failure(layers);
      d.direct = bad == nullptr;
      if (bad) d.reason = "layer '" + bad->name + "' failed: " + bad->detail;
      if (bad && opts_.mode == "1")
        core::raise(dcclUnavailable,
                    core::describe(opts_.rank, opname(), std::string("peer-direct required (DCCL_PEER_DIRECT=1) but not viable for ") +
                                                           be->name() + " memory: " + d.reason));
      if (bad)
        DCCL_INFO("peer-direct not viable for %s memory (%s); using host staging", be->name(), d.reason.c_str());
      else
        DCCL_INFO("peer-direct enabled for %s memory", be->name());
    }
    d.decided = true;
  }
  sel.direct = d.direct;
  if (d.direct) {
    if (!direct_) direct_ = std::make_unique<DirectPath>(net_, opts_.rank, opts_.cache_bytes, ctr_);
    sel.path = direct_.get();
  } else {
    if (!staged_)
      staged_ = std::make_unique<StagedPath>(net_, opts_.rank, opts_.nranks, opts_.slot_bytes, opts_.slots, ctr_);
    sel.path = staged_.get();
  }
  return sel;
}

RegCacheStats PathChooser::cache_stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return direct_ ? direct_->cache_stats() : RegCacheStats{};
}

std::string PathChooser::staged_reason(Kind kind) const {
  std::lock_guard<std::mutex> lk(mu_);
  const Decision& d = decisions_[static_cast<int>(kind)];
  return d.decided && !d.direct ? d.reason : "";
}

}  // namespace dccl::mem
