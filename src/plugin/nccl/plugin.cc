#include "plugin/nccl/plugin.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bind_address.hpp"
#include "core/socket.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "plugin/nccl/handshake.hpp"
#include "plugin/nccl/link_adapter.hpp"

namespace dccl::plugin {

namespace {

NcclLogFn g_log = nullptr;

constexpr uint32_t kCommMagic = 0x64636f6d;  // a live comm
constexpr uint32_t kReqMagic = 0x64726571;   // a live request

struct Comm;
struct Req {
  uint32_t magic = kReqMagic;
  Comm* comm = nullptr;
  int n = 0;
  Op* ops[kMaxRecvs] = {};
  bool failed = false;
};

struct Comm {
  uint32_t magic = kCommMagic;
  bool sending = false;
  int dev = 0;
  std::unique_ptr<Link> link;
  std::set<Req*> reqs;      // outstanding
  std::vector<Req*> spare;  // finished, for reuse (at most kNcclMaxRequests)
  ~Comm() {
    for (Req* r : spare) delete r;
  }
};

Req* new_req(Comm* c) {
  Req* r = nullptr;
  if (c->spare.empty()) {
    r = new Req;
  } else {
    r = c->spare.back();
    c->spare.pop_back();
  }
  r->magic = kReqMagic;
  r->comm = c;
  r->n = 0;
  r->failed = false;
  c->reqs.insert(r);
  return r;
}

struct ListenComm {
  uint32_t magic = kCommMagic + 1;
  int dev = 0;
  std::unique_ptr<Acceptor> acceptor;
};

// A closed comm or listen comm is emptied, its magic cleared, and kept to be handed
// out again, never freed: a pointer that NCCL (or a buggy caller) passes after its
// close is refused by its magic, never read after free, and so are the requests it
// held (kept in its spare list, magic cleared). There are as many as were open at once.
std::mutex g_mu;
// Freed with the library (its unload, or the process's exit).
std::vector<std::unique_ptr<Comm>> g_comm_husks;
std::vector<std::unique_ptr<ListenComm>> g_listen_husks;

// Connections in the making (connect keeps one in the handle it is called with
// again): a handle's state is followed only when it is one of these, so a handle
// copied or changed between calls is refused instead of read as a pointer.
std::set<Setup*> g_dials;

template <class T>
T* reuse(std::vector<std::unique_ptr<T>>* husks) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (husks->empty()) return new T;
  T* h = husks->back().release();
  husks->pop_back();
  return h;
}

template <class T>
void retire(T* h, std::vector<std::unique_ptr<T>>* husks) {
  h->magic = 0;
  std::unique_ptr<T> own(h);
  std::lock_guard<std::mutex> lock(g_mu);
  husks->push_back(std::move(own));
}

NcclResult to_nccl(dcclResult_t c) {
  switch (c) {
    case dcclSuccess: return kNcclSuccess;
    case dcclUnhandledDeviceError: return kNcclUnhandledCudaError;
    case dcclSystemError: return kNcclSystemError;
    case dcclInvalidArgument: return kNcclInvalidArgument;
    case dcclInvalidUsage: return kNcclInvalidUsage;
    case dcclRemoteError:
    case dcclTimeout: return kNcclRemoteError;
    case dcclUnavailable: return kNcclSystemError;
    default: return kNcclInternalError;
  }
}

void say(int level, const std::string& msg) {
  if (g_log) g_log(level, kNcclLogNet, __FILE__, __LINE__, "%s", msg.c_str());
  else if (level == kNcclLogWarn) DCCL_WARN("%s", msg.c_str());
  else DCCL_INFO("%s", msg.c_str());
}

// Runs f, turning every exception into an NCCL result with its message logged.
template <class F>
NcclResult guard(const char* op, F&& f) {
  try {
    f();
    return kNcclSuccess;
  } catch (const core::Error& e) {
    say(kNcclLogWarn, e.what());
    return to_nccl(e.code());
  } catch (const std::bad_alloc&) {
    say(kNcclLogWarn, std::string("NET/dccl ") + op + ": out of memory");
    return kNcclSystemError;
  } catch (const std::exception& e) {
    say(kNcclLogWarn, std::string("NET/dccl ") + op + ": " + e.what());
    return kNcclInternalError;
  }
}

[[noreturn]] void bad(const char* op, const std::string& why) {
  core::raise(dcclInvalidArgument, std::string("NET/dccl ") + op + ": " + why);
}

const Device& device(int dev, const char* op) {
  const auto& devs = devices(nullptr);
  if (dev < 0 || static_cast<size_t>(dev) >= devs.size())
    bad(op, "device " + std::to_string(dev) + " does not exist (" + std::to_string(devs.size()) + " devices)");
  return devs[static_cast<size_t>(dev)];
}

Comm* as_comm(void* p, const char* op) {
  auto* c = static_cast<Comm*>(p);
  if (!c || c->magic != kCommMagic) bad(op, "not a comm of this plugin (null or closed)");
  return c;
}

Secret new_secret() {
  std::random_device rd;
  Secret s;
  for (auto& b : s) b = static_cast<uint8_t>(rd());
  return s;
}

Comm* new_comm(std::unique_ptr<Link> link, bool sending, int dev) {
  Comm* c = reuse(&g_comm_husks);
  c->sending = sending;
  c->dev = dev;
  c->link = std::move(link);
  c->magic = kCommMagic;
  return c;
}

void free_req(Req* r) {
  for (int i = 0; i < r->n; ++i) r->comm->link->free_op(r->ops[i]);
  r->n = 0;
  r->comm->reqs.erase(r);
  r->magic = 0;  // a stale pointer is refused until the object is handed out again
  r->comm->spare.push_back(r);
}

NcclResult close_comm(void* p, const char* op) {
  return guard(op, [&] {
    Comm* c = as_comm(p, op);
    const bool outstanding = !c->reqs.empty();
    if (outstanding) c->link->cancel();
    for (Req* r : std::set<Req*>(c->reqs)) free_req(r);
    c->link.reset();
    retire(c, &g_comm_husks);  // its magic cleared: refused from now on
    if (outstanding) say(kNcclLogInfo, std::string("NET/dccl ") + op + ": requests still outstanding were cancelled");
  });
}

}  // namespace

NcclResult init(NcclLogFn log) {
  g_log = log;
  return guard("init", [] {
    // The settings as DirectCCL's init loads them: a bad value fails init.
    std::vector<std::string> typos;
    load_settings(&typos);
    static std::once_flag warned;  // once per process, as the library warns
    std::call_once(warned, [&] {
      for (const auto& t : typos) say(kNcclLogWarn, "NET/dccl init: " + t);
    });
    std::vector<std::string> notes;
    const auto& devs = devices(&notes);
    for (const auto& d : devs)
      say(kNcclLogInfo, "NET/dccl device " + d.name + ": " + d.device_memory);
    for (const auto& n : notes) say(kNcclLogInfo, "NET/dccl: " + n);
  });
}

NcclResult device_count(int* ndev) {
  return guard("devices", [&] {
    if (!ndev) bad("devices", "ndev is null");
    *ndev = static_cast<int>(devices(nullptr).size());
  });
}

NcclResult properties(int dev, DevProps* out) {
  return guard("getProperties", [&] {
    const Device& d = device(dev, "getProperties");
    if (!out) bad("getProperties", "device " + std::to_string(dev) + " (" + d.name + "): props is null");
    *out = DevProps{d.name.c_str(), d.ptr_support, d.speed_mbps, d.latency_us, d.max_bytes};
  });
}

NcclResult listen(int dev, void* handle, void** listen_comm) {
  return guard("listen", [&] {
    const Device& d = device(dev, "listen");
    if (!handle || !listen_comm) bad("listen", "handle or listenComm is null");
    static_assert(sizeof(Handle) <= kNcclHandleBytes, "the handle must fit NCCL's");
    auto acceptor = std::make_unique<Acceptor>(d, dev, new_secret(), say);
    ListenComm* lc = reuse(&g_listen_husks);
    lc->dev = dev;
    lc->acceptor = std::move(acceptor);
    lc->magic = kCommMagic + 1;
    memset(handle, 0, kNcclHandleBytes);
    memcpy(handle, &lc->acceptor->handle(), sizeof(Handle));
    *listen_comm = lc;
  });
}

NcclResult connect(int dev, void* handle, void** send_comm, NcclNetDeviceHandle** dev_comm) {
  return guard("connect", [&] {
    if (!send_comm) bad("connect", "sendComm is null");
    *send_comm = nullptr;
    if (dev_comm) *dev_comm = nullptr;  // host-driven: no device offload
    Handle h = parse_handle(handle);
    const Device& d = device(dev, "connect");
    Setup* s = reinterpret_cast<Setup*>(static_cast<uintptr_t>(h.pending));
    if (!s) {
      s = start_dial(d, h);
      std::lock_guard<std::mutex> lock(g_mu);
      g_dials.insert(s);
      h.pending = reinterpret_cast<uintptr_t>(s);
      memcpy(handle, &h, sizeof(h));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (!g_dials.count(s))
        bad("connect", "the handle's last 8 bytes name no connection this process is making (a handle copied or "
                       "changed between connect calls; a listener's handle has them zero)");
    }
    Setup* const key = s;
    auto forget = [&] {
      std::lock_guard<std::mutex> lock(g_mu);
      g_dials.erase(key);
    };
    std::unique_ptr<Link> link;
    try {
      link = finish_dial(s);
    } catch (...) {
      forget();
      h.pending = 0;
      memcpy(handle, &h, sizeof(h));
      throw;
    }
    if (!link) return;
    forget();
    h.pending = 0;
    memcpy(handle, &h, sizeof(h));
    *send_comm = new_comm(std::move(link), true, dev);
  });
}

NcclResult accept(void* listen_comm, void** recv_comm, NcclNetDeviceHandle** dev_comm) {
  return guard("accept", [&] {
    auto* lc = static_cast<ListenComm*>(listen_comm);
    if (!lc || lc->magic != kCommMagic + 1) bad("accept", "not a listen comm of this plugin");
    if (!recv_comm) bad("accept", "recvComm is null");
    *recv_comm = nullptr;
    if (dev_comm) *dev_comm = nullptr;
    std::unique_ptr<Link> link = lc->acceptor->poll();
    if (link) *recv_comm = new_comm(std::move(link), false, lc->dev);
  });
}

NcclResult reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&] {
    Comm* c = as_comm(comm, "regMr");
    if (!mhandle) bad("regMr", "mhandle is null");
    if (type != kNcclPtrHost && type != kNcclPtrCuda) bad("regMr", "unknown memory type " + std::to_string(type));
    *mhandle = c->link->reg(data, size, type == kNcclPtrCuda);
  });
}

NcclResult reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  return guard("regMrDmaBuf", [&] {
    Comm* c = as_comm(comm, "regMrDmaBuf");
    if (!mhandle) bad("regMrDmaBuf", "mhandle is null");
    if (type != kNcclPtrHost && type != kNcclPtrCuda) bad("regMrDmaBuf", "unknown memory type " + std::to_string(type));
    if (type == kNcclPtrHost) {
      *mhandle = c->link->reg(data, size, false);
      return;
    }
    if (fd < 0 || fcntl(fd, F_GETFD) < 0)
      bad("regMrDmaBuf", "dma-buf fd " + std::to_string(fd) + " is not an open descriptor");
    *mhandle = c->link->reg_dmabuf(data, size, fd, offset);
  });
}

NcclResult dereg_mr(void* comm, void* mhandle) {
  return guard("deregMr", [&] {
    Comm* c = as_comm(comm, "deregMr");
    if (mhandle) c->link->dereg(static_cast<Region*>(mhandle));  // null: nothing was registered
  });
}

NcclResult isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return guard("isend", [&] {
    Comm* c = as_comm(send_comm, "isend");
    if (!request) bad("isend", "request is null");
    *request = nullptr;
    if (!c->sending) bad("isend", "a receive comm");
    if (c->reqs.size() >= kNcclMaxRequests) return;  // NCCL calls again later
    Req* r = new_req(c);
    try {
      r->ops[0] = c->link->send(data, size, static_cast<uint32_t>(tag), static_cast<Region*>(mhandle));
      r->n = 1;
    } catch (...) {
      free_req(r);
      throw;
    }
    *request = r;
  });
}

NcclResult irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                 void** request) {
  return guard("irecv", [&] {
    Comm* c = as_comm(recv_comm, "irecv");
    if (!request) bad("irecv", "request is null");
    *request = nullptr;
    if (c->sending) bad("irecv", "a send comm");
    if (n < 1 || n > kMaxRecvs) bad("irecv", std::to_string(n) + " receives (1 to " + std::to_string(kMaxRecvs) + ")");
    if (!data || !sizes || !tags) bad("irecv", "data, sizes or tags is null");
    if (c->reqs.size() >= kNcclMaxRequests) return;
    Req* r = new_req(c);
    try {
      for (int i = 0; i < n; ++i) {
        r->ops[i] = c->link->recv(data[i], sizes[i], static_cast<uint32_t>(tags[i]),
                                  mhandles ? static_cast<Region*>(mhandles[i]) : nullptr);
        r->n = i + 1;
      }
    } catch (...) {
      free_req(r);
      throw;
    }
    *request = r;
  });
}

NcclResult iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request) {
  return guard("iflush", [&] {
    const Comm* c = as_comm(recv_comm, "iflush");
    if (c->sending) bad("iflush", "a send comm");
    if (n < 1 || n > kMaxRecvs) bad("iflush", std::to_string(n) + " buffers (1 to " + std::to_string(kMaxRecvs) + ")");
    (void)data, (void)sizes, (void)mhandles;
    // A receive into device memory completes only after the NIC's writes were made
    // visible to the device (mem/direct_path.cc: flush_remote_writes), so no flush
    // is left to do: a null request is complete.
    if (request) *request = nullptr;
  });
}

NcclResult test(void* request, int* done, int* sizes) {
  auto* r = static_cast<Req*>(request);
  return guard("test", [&] {
    if (!r || r->magic != kReqMagic) bad("test", "not a live request of this plugin");
    if (!done) bad("test", "done is null");
    *done = 0;
    size_t got[kMaxRecvs] = {};
    for (int i = 0; i < r->n; ++i)
      if (!r->comm->link->test(r->ops[i], &got[i])) return;
    if (sizes)
      for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(got[i]);
    *done = 1;
    free_req(r);
  });
}

NcclResult close_send(void* send_comm) { return close_comm(send_comm, "closeSend"); }
NcclResult close_recv(void* recv_comm) { return close_comm(recv_comm, "closeRecv"); }

NcclResult close_listen(void* listen_comm) {
  return guard("closeListen", [&] {
    auto* lc = static_cast<ListenComm*>(listen_comm);
    if (!lc || lc->magic != kCommMagic + 1) bad("closeListen", "not a listen comm of this plugin");
    lc->magic = 0;  // handshakes in progress end (a transport connect by its deadline)
    lc->acceptor.reset();
    retire(lc, &g_listen_husks);
  });
}

NcclResult get_device_mr(void*, void*, void** dptr_mhandle) {
  if (dptr_mhandle) *dptr_mhandle = nullptr;
  say(kNcclLogWarn, "NET/dccl getDeviceMr: this plugin has no device offload (netDeviceType HOST)");
  return kNcclInvalidUsage;
}

NcclResult irecv_consumed(void*, int, void*) { return kNcclSuccess; }

NcclResult make_vdevice(int* dev, NcclVDeviceProps* props) {
  return guard("makeVDevice", [&] {
    if (!dev || !props) bad("makeVDevice", "d or props is null");
    if (props->ndevs < 1 || props->ndevs > static_cast<int>(sizeof(props->devs) / sizeof(props->devs[0])))
      bad("makeVDevice", "ndevs " + std::to_string(props->ndevs) + " (1 to " +
                             std::to_string(sizeof(props->devs) / sizeof(props->devs[0])) + ")");
    if (props->ndevs != 1)
      core::raise(dcclInvalidUsage, "NET/dccl makeVDevice: merging " + std::to_string(props->ndevs) +
                                        " devices is not offered (each rail is a device of its own)");
    device(props->devs[0], "makeVDevice");
    *dev = props->devs[0];
  });
}

namespace {
std::mutex g_contexts_mu;
std::set<void*> g_contexts;  // live v11 contexts: a stale or foreign pointer is refused, never read

struct Context {
  uint64_t comm_id = 0;
};

void context_of(void* ctx, const char* op) {
  std::lock_guard<std::mutex> lk(g_contexts_mu);
  if (!ctx || !g_contexts.count(ctx)) bad(op, "not a context this plugin's init returned (null or finalized)");
}
}  // namespace

NcclResult open_context(uint64_t comm_id, const NcclCommConfig* config, void** ctx) {
  return guard("init", [&] {
    if (!ctx) bad("init", "ctx is null");
    auto c = std::make_unique<Context>();
    c->comm_id = comm_id;
    if (config && config->traffic_class != -1)  // NCCL_NET_TRAFFIC_CLASS_UNDEF
      say(kNcclLogInfo, "NET/dccl init: traffic class " + std::to_string(config->traffic_class) +
                            " not applied (no device of this plugin has traffic classes)");
    std::lock_guard<std::mutex> lk(g_contexts_mu);
    g_contexts.insert(c.get());
    *ctx = c.release();
  });
}

NcclResult check_context(void* ctx, const char* op) {
  return guard(op, [&] { context_of(ctx, op); });
}

NcclResult close_context(void* ctx) {
  return guard("finalize", [&] {
    context_of(ctx, "finalize");
    std::lock_guard<std::mutex> lk(g_contexts_mu);
    g_contexts.erase(ctx);
    delete static_cast<Context*>(ctx);
  });
}

NcclResult set_net_attr(void* ctx, const NcclNetAttr* attr) {
  return guard("setNetAttr", [&] {
    context_of(ctx, "setNetAttr");
    if (!attr) bad("setNetAttr", "netAttr is null");
  });
}

NcclResult int_size(int size, const char* op, size_t* out) {
  return guard(op, [&] {
    if (size < 0) bad(op, "negative size " + std::to_string(size));
    *out = static_cast<size_t>(size);
  });
}

}  // namespace dccl::plugin
