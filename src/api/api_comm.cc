// C API: versions, ids, communicators, errors, statistics.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/config.hpp"
#include "api/handles.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/env_init.hpp"
#include "core/log.hpp"

using namespace dccl;

namespace {
std::atomic<int> g_env_inits{0};
constexpr int kMaxInitAll = 1024;  // ranks (threads) one dcclCommInitAll makes

dcclResult_t make_comm(dcclComm_t* out, const boot::UniqueIdData& id, int nranks, int rank,
                       std::unique_ptr<boot::StoreServer> server, const std::string& ns,
                       const core::Config* cfg = nullptr) {
  auto* c = new dcclComm;
  try {
    c->impl = std::make_unique<comm::Communicator>(id, nranks, rank, std::move(server), ns, comm::ProcessPlace{}, cfg);
  } catch (...) {
    delete c;
    throw;
  }
  api::register_comm(c);
  *out = c;
  return dcclSuccess;
}

// The handle is returned at once; the communicator is made on a thread of its own
// and adopted by the first call that finds it ready (see api::init_state).
void start_init(dcclComm_t* out, const boot::UniqueIdData& id, int nranks, int rank,
                std::unique_ptr<boot::StoreServer> server, const core::Config& cfg) {
  auto* c = new dcclComm;
  c->pending = std::make_shared<api::PendingInit>();
  c->pending->rank = rank;
  std::shared_ptr<api::PendingInit> p = c->pending;
  p->thread = std::thread([p, id, nranks, rank, srv = std::move(server), cfg]() mutable {
    std::unique_ptr<comm::Communicator> made;
    dcclResult_t rc = dcclSuccess;
    std::string text;
    try {
      made = std::make_unique<comm::Communicator>(id, nranks, rank, std::move(srv), "", comm::ProcessPlace{}, &cfg);
    } catch (const core::Error& e) {
      rc = e.code();
      text = e.what();
    } catch (const std::exception& e) {
      rc = dcclInternalError;
      text = core::describe(rank, "dcclCommInitRankConfig", std::string("internal error: ") + e.what());
    }
    std::lock_guard<std::mutex> lk(p->mu);
    p->made = std::move(made);
    p->rc = rc;
    p->text = std::move(text);
    p->done = true;
  });
  api::register_comm(c);
  *out = c;
}

// Ends the communicator's work (queued work cancelled, the running call finished or
// aborted), then frees it. A call still inside after the abort (stuck in the
// provider) keeps the communicator allocated: a leak, never a free under a thread.
void close_and_free(dcclComm* comm, const char* fn) {
  if (comm->impl->quiesce()) {
    delete comm;
    return;
  }
  comm::Communicator* c = comm->impl.release();
  const std::string t = core::timeout_text(c->config());
  delete comm;
  core::raise(dcclTimeout, core::describe(c->rank(), fn, "a call aborted " + t + " after " + fn +
                                                             " began has not returned that long after; the "
                                                             "communicator is left allocated"));
}
// A handle leaving the registry: waits for its non-blocking init (bounded by the
// init's timeout) and adopts what it made. False when nothing was made (the init
// failed): the handle is freed here.
bool adopt_for_close(dcclComm* comm) {
  api::join_init(comm);
  if (comm->impl) return true;
  delete comm;
  return false;
}
// A member of a dcclCommInitAll group leaves it (`destroyed`: kept until the last
// member leaves). Returns the members to free now, highest rank first (rank 0's
// process side hosts the store): empty until the last one leaves.
std::vector<dcclComm*> leave_group(dcclComm* comm, bool destroyed) {
  std::shared_ptr<api::InitAllGroup> g = comm->siblings;
  std::lock_guard<std::mutex> lk(g->mu);
  if (destroyed) g->left.push_back(comm);
  if (--g->live > 0) return {};
  std::vector<dcclComm*> out;
  out.swap(g->left);
  std::sort(out.begin(), out.end(), [](dcclComm* a, dcclComm* b) { return a->impl->rank() > b->impl->rank(); });
  return out;
}
void free_group(const std::vector<dcclComm*>& members, const char* fn) {
  std::string first_error;
  for (dcclComm* m : members) {
    m->impl->leave_alone();
    try {
      close_and_free(m, fn);
    } catch (const core::Error& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (!first_error.empty()) core::raise(dcclTimeout, first_error);
}
}  // namespace

extern "C" {

dcclResult_t dcclGetVersion(int* version) {
  return api::guard("dcclGetVersion", [&] {
    if (!version) core::raise(dcclInvalidArgument, "dcclGetVersion: version is NULL");
    *version = DCCL_VERSION_CODE;
  });
}

const char* dcclGetErrorString(dcclResult_t r) {
  switch (r) {
    case dcclSuccess: return "no error";
    case dcclUnhandledDeviceError: return "unhandled accelerator error";
    case dcclSystemError: return "system error (socket, memory or OS call failed)";
    case dcclInternalError: return "internal error";
    case dcclInvalidArgument: return "invalid argument";
    case dcclInvalidUsage: return "invalid usage";
    case dcclRemoteError: return "remote error (a peer failed or the network broke)";
    case dcclInProgress: return "operation in progress";
    case dcclTimeout: return "timed out";
    case dcclUnavailable: return "unavailable on this system";
    default: return "unknown result code";
  }
}

const char* dcclGetLastError(dcclComm_t) { return api::last_error(); }

dcclResult_t dcclGetUniqueId(dcclUniqueId* uid) {
  return api::guard("dcclGetUniqueId", [&] {
    if (!uid) core::raise(dcclInvalidArgument, "dcclGetUniqueId: uniqueId is NULL");
    auto server = boot::StoreServer::start("", 0, boot::random_secret());
    boot::encode_id(server->id(), uid);
    boot::park_server(std::move(server));
  });
}

dcclResult_t dcclCommInitRank(dcclComm_t* comm, int nranks, dcclUniqueId commId, int rank) {
  return dcclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

dcclResult_t dcclCommInitRankConfig(dcclComm_t* comm, int nranks, dcclUniqueId commId, int rank,
                                    dcclConfig_t* config) {
  const char* fn = config ? "dcclCommInitRankConfig" : "dcclCommInitRank";
  bool blocking = true;
  dcclResult_t rc = api::guard(fn, [&] {
    if (!comm) core::raise(dcclInvalidArgument, std::string(fn) + ": comm is NULL");
    *comm = nullptr;
    if (nranks < 1) core::raise(dcclInvalidArgument, std::string(fn) + ": nranks " + std::to_string(nranks) + " < 1");
    if (rank < 0 || rank >= nranks)
      core::raise(dcclInvalidArgument, std::string(fn) + ": rank " + std::to_string(rank) + " is outside [0, " +
                                           std::to_string(nranks) + ")");
    boot::UniqueIdData id = boot::decode_id(commId);
    // A bad DCCL_* setting fails the job's init (the other ranks learn it through the
    // store); a bad field of `config` is this call's, refused leaving the id usable
    // (rank 0's store stays parked until the call that forms the communicator).
    core::Config loaded;
    try {
      loaded = core::load_config();
    } catch (const core::Error& e) {
      comm::fail_before_join(id, nranks, rank, nullptr, "", e.code(), core::describe(rank, fn, e.what()));
    }
    const core::Config cfg = api::apply_config(config, loaded, rank, fn, &blocking);
    std::unique_ptr<boot::StoreServer> server;
    if (rank == 0) server = boot::take_parked_server(id);
    if (blocking)
      make_comm(comm, id, nranks, rank, std::move(server), "", &cfg);
    else
      start_init(comm, id, nranks, rank, std::move(server), cfg);
  });
  return rc == dcclSuccess && !blocking ? dcclInProgress : rc;
}

dcclResult_t dcclCommInitAll(dcclComm_t* comms, int ndev, const int* devlist) {
  return api::guard("dcclCommInitAll", [&] {
    if (!comms) core::raise(dcclInvalidArgument, "dcclCommInitAll: comms is NULL");
    if (ndev < 1 || ndev > kMaxInitAll)
      core::raise(dcclInvalidArgument, "dcclCommInitAll: ndev " + std::to_string(ndev) + " is outside [1, " +
                                           std::to_string(kMaxInitAll) + "]");
    for (int i = 0; devlist && i < ndev; ++i)
      if (devlist[i] < 0)
        core::raise(dcclInvalidArgument, "dcclCommInitAll: devlist[" + std::to_string(i) + "] is " +
                                             std::to_string(devlist[i]));
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    dcclUniqueId id;
    if (dcclGetUniqueId(&id) != dcclSuccess) core::raise(dcclSystemError, api::last_error());
    // One thread per rank: every rank's init meets the others at the store.
    std::vector<dcclResult_t> rc(static_cast<size_t>(ndev), dcclSuccess);
    std::vector<std::string> why(static_cast<size_t>(ndev));
    std::vector<std::thread> ts;
    for (int r = 0; r < ndev; ++r)
      ts.emplace_back([&, r] {
        const size_t i = static_cast<size_t>(r);
        rc[i] = dcclCommInitRank(&comms[r], ndev, id, r);
        if (rc[i] != dcclSuccess) why[i] = api::last_error();
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (rc[static_cast<size_t>(r)] == dcclSuccess) continue;
      for (int q = 0; q < ndev; ++q)  // nothing half made is left behind
        if (comms[q]) {
          dcclCommAbort(comms[q]);
          comms[q] = nullptr;
        }
      core::raise(rc[static_cast<size_t>(r)], "dcclCommInitAll: " + why[static_cast<size_t>(r)]);
    }
    auto group = std::make_shared<api::InitAllGroup>();
    group->live = ndev;
    for (int r = 0; r < ndev; ++r) comms[r]->siblings = group;
  });
}

dcclResult_t dcclCommInitFromEnv(dcclComm_t* comm) {
  return api::guard("dcclCommInitFromEnv", [&] {
    if (!comm) core::raise(dcclInvalidArgument, "dcclCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    boot::EnvJob job = boot::env_job();
    std::unique_ptr<boot::StoreServer> server = boot::env_store(&job);
    std::string ns = "env" + std::to_string(g_env_inits.fetch_add(1));
    if (job.bad_setting != dcclSuccess)  // the other ranks learn it through the store
      comm::fail_before_join(job.id, job.nranks, job.rank, std::move(server), ns, job.bad_setting, job.bad_text);
    make_comm(comm, job.id, job.nranks, job.rank, std::move(server), ns);
  });
}

dcclResult_t dcclCommDestroy(dcclComm_t comm) {
  return api::guard("dcclCommDestroy", [&] {
    if (!comm) core::raise(dcclInvalidArgument, "dcclCommDestroy: comm is NULL");
    if (!api::unregister_comm(comm))
      core::raise(dcclInvalidUsage, "dcclCommDestroy: comm is not a live communicator (destroyed twice?)");
    // A fork's child leaves its parent's communicator alone: closing it here would
    // unlink the parent's shared regions and close its endpoints' peers.
    if (comm->impl && comm->impl->made().forked()) {
      api::register_comm(comm);
      core::raise(dcclInvalidUsage, api::say(comm->impl->rank(), "dcclCommDestroy",
                                             comm->impl->made().fork_text("communicator") + "; left as it is"));
    }
    if (!adopt_for_close(comm)) return;
    if (!comm->siblings) return close_and_free(comm, "dcclCommDestroy");
    // Its own work first (bounded), then it waits for the group's last destroy.
    if (!comm->impl->quiesce()) {
      free_group(leave_group(comm, false), "dcclCommDestroy");
      return close_and_free(comm, "dcclCommDestroy");
    }
    free_group(leave_group(comm, true), "dcclCommDestroy");
  });
}

dcclResult_t dcclCommAbort(dcclComm_t comm) {
  return api::guard("dcclCommAbort", [&] {
    std::string text;
    if (api::init_state(comm, "dcclCommAbort", &text) != dcclSuccess) {  // init running or failed
      if (!api::unregister_comm(comm) || !adopt_for_close(comm)) return;
      comm->impl->abort();
    } else {
      api::comm_of(comm, "dcclCommAbort").abort();
      if (!api::unregister_comm(comm)) return;
    }
    if (comm->siblings) free_group(leave_group(comm, false), "dcclCommAbort");
    close_and_free(comm, "dcclCommAbort");
  });
}

dcclResult_t dcclCommCount(const dcclComm_t comm, int* count) {
  return api::guard("dcclCommCount", [&] {
    auto& c = api::comm_of(comm, "dcclCommCount");
    if (!count) core::raise(dcclInvalidArgument, core::describe(c.rank(), "dcclCommCount", "count is NULL"));
    *count = c.nranks();
  });
}

dcclResult_t dcclCommUserRank(const dcclComm_t comm, int* rank) {
  return api::guard("dcclCommUserRank", [&] {
    auto& c = api::comm_of(comm, "dcclCommUserRank");
    if (!rank) core::raise(dcclInvalidArgument, core::describe(c.rank(), "dcclCommUserRank", "rank is NULL"));
    *rank = c.rank();
  });
}

dcclResult_t dcclCommGetAsyncError(dcclComm_t comm, dcclResult_t* err) {
  return api::guard("dcclCommGetAsyncError", [&] {
    std::string text;
    const dcclResult_t init = api::init_state(comm, "dcclCommGetAsyncError", &text);
    if (init != dcclSuccess) {  // a non-blocking init is running, or failed
      if (!err) core::raise(dcclInvalidArgument, "dcclCommGetAsyncError: asyncError is NULL");
      *err = init;
      if (init != dcclInProgress) api::set_last_error(text);
      return;
    }
    auto& c = api::comm_of(comm, "dcclCommGetAsyncError");
    if (!err) core::raise(dcclInvalidArgument, core::describe(c.rank(), "dcclCommGetAsyncError", "asyncError is NULL"));
    *err = c.async_error();
    if (*err != dcclSuccess) api::set_last_error(c.async_error_text());
  });
}

dcclResult_t dcclCommSplit(dcclComm_t comm, int color, int key, dcclComm_t* newcomm, dcclConfig_t* config) {
  return api::guard("dcclCommSplit", [&] {
    auto& c = api::comm_of(comm, "dcclCommSplit");
    c.refuse_if_finalized("dcclCommSplit");
    if (!newcomm) core::raise(dcclInvalidArgument, core::describe(c.rank(), "dcclCommSplit", "newcomm is NULL"));
    *newcomm = nullptr;
    bool blocking = true;
    const core::Config cfg = api::apply_config(config, c.config(), c.rank(), "dcclCommSplit", &blocking);
    if (!blocking)
      core::raise(dcclInvalidArgument, core::describe(c.rank(), "dcclCommSplit", "config: blocking = 0 is not "
                                                                                 "supported by dcclCommSplit"));
    api::CallScope scope(c, "dcclCommSplit");
    std::unique_ptr<comm::Communicator> child = c.split(color, key, &cfg);
    scope.leave();
    if (!child) return;
    auto* h = new dcclComm;
    h->impl = std::move(child);
    api::register_comm(h);
    *newcomm = h;
  });
}

dcclResult_t dcclCommFinalize(dcclComm_t comm) {
  return api::guard("dcclCommFinalize", [&] { api::comm_of(comm, "dcclCommFinalize").finalize(); });
}

dcclResult_t dcclCommGetStats(dcclComm_t comm, dcclStats_t* stats) {
  return api::guard("dcclCommGetStats", [&] {
    auto& c = api::comm_of(comm, "dcclCommGetStats");
    if (!stats) core::raise(dcclInvalidArgument, core::describe(c.rank(), "dcclCommGetStats", "stats is NULL"));
    *stats = c.stats();
  });
}

dcclResult_t dcclCommDumpRecorder(dcclComm_t comm, const char* dir, int allRanks) {
  return api::guard("dcclCommDumpRecorder", [&] {
    auto& c = api::comm_of(comm, "dcclCommDumpRecorder");
    c.dump_recorder(dir, "on demand (dcclCommDumpRecorder)");
    if (allRanks) c.request_dumps();
  });
}

dcclResult_t dcclCommSetCallTag(dcclComm_t comm, const char* group, uint64_t seq) {
  return api::guard("dcclCommSetCallTag", [&] {
    api::comm_of(comm, "dcclCommSetCallTag").recorder().set_tag(group ? group : "", seq);
  });
}

}  // extern "C"
