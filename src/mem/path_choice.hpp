// Chooses, per operation, how the transport reaches its buffers: host memory as
// is; device memory direct (peer-direct) or staged, by DCCL_PEER_DIRECT and the
// viability layers (the last one a trial registration on the communicator's own
// endpoints). The decision is made once per memory kind per communicator and
// logged at INFO with its reason (see log_plan()). A buffer whose allocation the
// direct path must not register (Backend::direct_unfit: CUDA memory not on whole
// pages) is staged for that operation even where the kind goes direct.
#pragma once
#include <memory>
#include <mutex>
#include <functional>
#include <string>
#include <unordered_map>

#include "mem/backend.hpp"
#include "mem/direct_path.hpp"
#include "mem/staged_path.hpp"

namespace dccl::mem {

struct PathOptions {
  int rank = 0, nranks = 1;
  std::string mode = "auto";  // DCCL_PEER_DIRECT: auto | 1 | 0
  std::string provider;
  size_t slot_bytes = 1 << 20;
  int slots = 4;
  size_t cache_bytes = 0;
};

struct PathSel {
  DataPath* path = nullptr;  // null: host memory, no path needed
  Backend* backend = nullptr;
  bool direct = true;
};

class PathChooser {
 public:
  PathChooser(net::Transport& net, const PathOptions& opts, PathCounters counters);
  ~PathChooser();
  // a, b: the operation's buffers (either may be null). Throws core::Error for
  // buffers of different kinds, or with DCCL_PEER_DIRECT=1 naming the failed layer.
  // `opname` names the operation in errors; called only when there is one.
  // `known`: the backend of both, when the caller already looked it up.
  PathSel select(const void* a, const void* b, const std::function<std::string()>& opname,
                 Backend* known = nullptr);
  RegCacheStats cache_stats() const;
  // dcclCommRegister: device memory that takes the direct path is registered now
  // (the whole allocation holding [p, p+bytes)) and kept registered until
  // deregister_user, so calls on it do no registration work; host memory and the
  // staged path need nothing. Returns the handle; throws for memory outside one
  // allocation, or when peer-direct is required but not viable.
  void* register_user(const void* p, size_t bytes);
  // Throws dcclInvalidArgument for a handle register_user did not return.
  void deregister_user(void* handle);
  // Logs at INFO one line per memory kind: the path it takes and why. Decides
  // sim memory now; CUDA memory at its first use (unless DCCL_PEER_DIRECT=0),
  // so that a job without it never initialises the driver.
  void log_plan();

 private:
  struct Decision {
    bool decided = false, direct = false;
    std::string reason;
  };
  // Decides `kind` once (mu_ held) and logs the outcome at INFO; never throws
  // for a path that is not viable.
  const Decision& decide(Kind kind);
  // Whether `be`'s memory takes the direct path (mu_ held), making the direct path
  // on first use; throws, naming opname(), when peer-direct is required but not viable.
  bool direct_for(Backend& be, const std::function<std::string()>& opname);
  // False (logged once) when a or b lies in an allocation the direct path must not
  // register (Backend::direct_unfit): the operation is staged instead (mu_ held).
  bool fits_direct(Backend& be, const void* a, const void* b);
  // Throws dcclInvalidArgument, naming opname(), when p is device memory the data
  // path cannot use (the backend says why).
  void check_usable(Backend& be, const void* p, const std::function<std::string()>& opname) const;
  net::Transport& net_;
  PathOptions opts_;
  PathCounters ctr_;
  Decision decisions_[3];
  std::unique_ptr<DirectPath> direct_;
  std::unique_ptr<StagedPath> staged_;
  struct UserReg {
    const void* p = nullptr;
    bool direct = false;
    RegCache::Ref ref;
  };
  // After direct_: released before the registrations' cache goes.
  std::unordered_map<void*, std::unique_ptr<UserReg>> user_;
  bool unfit_logged_ = false;
  mutable std::mutex mu_;
};

}  // namespace dccl::mem
