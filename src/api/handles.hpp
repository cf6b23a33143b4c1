// C handles, the registry that tells live handles from destroyed ones, the
// per-thread last error, and the exception firewall every entry point runs in.
#pragma once
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/process.hpp"
#include "sched/stream.hpp"

namespace dccl::api {
// A non-blocking init running on a thread of its own (dcclConfig_t.blocking = 0).
struct PendingInit {
  std::mutex mu;
  bool done = false;  // the thread has ended: rc, text and made are final
  dcclResult_t rc = dcclSuccess;
  std::string text;
  std::unique_ptr<comm::Communicator> made;
  std::thread thread;
  int rank = -1;
};
// The communicators one dcclCommInitAll made: every rank in this process. Destroying
// one waits for its own work, then for its siblings' destroys instead of meeting them
// at the store (one thread destroying them in turn, as with NCCL, would otherwise
// wait for a rank it has not reached yet); the last destroy frees them all.
struct InitAllGroup {
  std::mutex mu;
  int live = 0;                 // members not yet destroyed or aborted
  std::vector<dcclComm*> left;  // destroyed members, waiting for the last one
};
}  // namespace dccl::api

struct dcclComm {
  std::unique_ptr<dccl::comm::Communicator> impl;
  // Set while a non-blocking init has not been collected: impl is empty until then.
  std::shared_ptr<dccl::api::PendingInit> pending;
  // Set on the communicators of one dcclCommInitAll (api/api_comm.cc).
  std::shared_ptr<dccl::api::InitAllGroup> siblings;
};
struct dcclStream {
  dccl::sched::Stream impl;
  dccl::core::ProcessMark made;  // its worker thread lives in this process only
};

namespace dccl::api {

void set_last_error(const std::string& text);
// "rank R: fn: why", or "fn: why" while the rank is unknown (rank < 0).
std::string say(int rank, const char* fn, const std::string& why);
const char* last_error();

void register_comm(dcclComm* c);
bool unregister_comm(dcclComm* c);
// Throws Error(dcclInvalidUsage/dcclInvalidArgument) when c is null, destroyed,
// unknown or made by the process this one was forked from; Error(dcclInProgress) while its non-blocking init runs, and the init's
// error once that failed.
comm::Communicator& comm_of(dcclComm* c, const char* fn);
// A live handle's non-blocking init: dcclInProgress while it runs, its error once
// it failed (*text gets the message), dcclSuccess when there is none or it is over
// (the communicator is then adopted). Throws as comm_of for a dead handle.
dcclResult_t init_state(dcclComm* c, const char* fn, std::string* text);
// Waits for the handle's non-blocking init thread (bounded by the init's timeout).
void join_init(dcclComm* c);
void register_stream(dcclStream* s);
bool unregister_stream(dcclStream* s);
// Null stays null; a dead stream is refused (naming `rank` when it is known, >= 0).
sched::Stream* stream_of(dcclStream* s, const char* fn, int rank = -1);

// A work call's stay inside its communicator (Communicator::enter_call): leave()
// at the call's end throws when another thread came in meanwhile.
class CallScope {
 public:
  CallScope(comm::Communicator& c, const char* fn) : c_(c), fn_(fn), entered_(c.enter_call(fn)) {}
  ~CallScope() {
    if (!left_) c_.drop_call();
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  void leave() {
    left_ = true;
    c_.leave_call(fn_, entered_);
  }

 private:
  comm::Communicator& c_;
  const char* fn_;
  uint64_t entered_;
  bool left_ = false;
};

// Runs f, turning every exception into a result code and the last-error text.
template <class F>
dcclResult_t guard(const char* fn, F&& f) noexcept {
  try {
    f();
    return dcclSuccess;
  } catch (const core::Error& e) {
    set_last_error(e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(fn) + ": out of memory");
    return dcclSystemError;
  } catch (const std::exception& e) {
    set_last_error(std::string(fn) + ": internal error: " + e.what());
    return dcclInternalError;
  } catch (...) {
    set_last_error(std::string(fn) + ": unknown internal error");
    return dcclInternalError;
  }
}

}  // namespace dccl::api
