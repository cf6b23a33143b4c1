#include "plugin/nccl/link_adapter.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "mem/backend.hpp"
#include "mem/direct_path.hpp"
#include "mem/reg_cache.hpp"
#include "mem/viability.hpp"
#include "net/fabric/provider.hpp"
#include "net/rails.hpp"
#include "net/transport.hpp"
#include "plugin/nccl/nccl_net.h"
#include "topo/topology.hpp"

namespace dccl::plugin {

namespace {

// The largest message: one part on every provider used here, and within NCCL's int sizes.
constexpr size_t kMaxBytes = size_t{1} << 30;

int link_speed_mbps(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  int s = 0;
  if (f >> s && s > 0) return s;
  return 10000;  // virtual interfaces report none
}

// Device memory over a libfabric provider: the viability layers without a
// connection (kernel dma-buf, the backend's export, the provider's FI_HMEM).
std::string cuda_note(const std::string& prov, int* bits) {
  if (!mem::cuda_backend()) return "CUDA memory: no CUDA device here (" + mem::cuda_unavailable_reason() + ")";
  const auto layers = mem::check_viability("cuda", prov);
  if (const mem::Layer* f = mem::first_failure(layers))
    return "CUDA memory not registered by the NIC: " + f->name + " fails: " + f->detail;
  *bits |= kNcclPtrCuda | kNcclPtrDmaBuf;
  return "CUDA memory registered by dma-buf";
}

// The settings as the library's init loads them: a bad value fails (config()
// would fall back to every default, silently).
const core::Config& settings() {
  static std::once_flag once;
  static core::Config cfg;
  static std::string error;
  static dcclResult_t code = dcclSuccess;
  std::call_once(once, [] {
    try {
      cfg = core::load_config();
    } catch (const core::Error& e) {
      code = e.code();
      error = e.what();
    }
  });
  if (code != dcclSuccess) core::raise(code, "NET/dccl init: " + error + " (the plugin does not start on a bad setting)");
  return cfg;
}

// A lower layer's error named with the plugin's call and device: "rank 1:
// peer-direct: ..." (the link's own rank, meaningless to NCCL) becomes
// "NET/dccl regMrDmaBuf on dccl-shm: peer-direct: ...".
template <class F>
auto named(const char* op, const Device& dev, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const core::Error& e) {
    std::string w = e.what();
    if (w.rfind("NET/dccl ", 0) == 0) throw;
    if (w.rfind("rank ", 0) == 0 && w.find(": ") != std::string::npos) w = w.substr(w.find(": ") + 2);
    core::raise(e.code(), std::string("NET/dccl ") + op + " on " + dev.name + ": " + w);
  }
}

// "count mismatch: rank 1 sent 100 bytes for it (...)": the 100, or 0.
size_t sent_bytes(const std::string& note) {
  const size_t at = note.find(" sent ");
  if (at == std::string::npos) return 0;
  return static_cast<size_t>(strtoull(note.c_str() + at + 6, nullptr, 10));
}

}  // namespace

void load_settings(std::vector<std::string>* typos) {
  settings();
  if (typos)
    for (const auto& [name, like] : core::misspelled_settings(environ))
      typos->push_back(name + " is not a DirectCCL setting and is ignored: did you mean " + like + "?");
}

std::chrono::milliseconds setup_timeout() { return std::chrono::milliseconds(settings().timeout_s * 1000); }

std::string timeout_text() { return core::timeout_text(settings()); }

const std::vector<Device>& devices(std::vector<std::string>* notes) {
  static std::once_flag once;
  static std::vector<Device> devs;
  static std::vector<std::string> why;
  static std::string error;
  static dcclResult_t code = dcclSuccess;
  std::call_once(once, [] {
    try {
      const core::Config& cfg = settings();
      net::set_provider_defaults(cfg.rxm_eager_bytes);
      std::string w;
      const auto rails = net::find_rails("tcp", net::parse_ifnames(cfg.net_ifname), &w);
      if (rails.empty()) why.push_back("tcp offers no interface (" + w + "): one socket device on the bootstrap interface");
      std::vector<std::string> names;
      for (const auto& r : rails) names.push_back(r.name);
      if (names.empty()) names.push_back("");
      for (const auto& n : names) {
        Device d;
        d.name = n.empty() ? "dccl-sock" : "dccl-sock-" + n;
        d.kind = "sock";
        d.rail = n;
        d.ptr_support = kNcclPtrHost;
        d.device_memory = "host memory only: the socket path never carries device memory";
        d.speed_mbps = n.empty() ? 10000 : link_speed_mbps(n);
        d.latency_us = 7;
        d.max_bytes = kMaxBytes;
        devs.push_back(d);
      }
      if (net::find_provider(net::kShmProvider, &w).info) {
        Device d;
        d.name = "dccl-shm";
        d.kind = "shm";
        d.ptr_support = kNcclPtrHost;
        d.device_memory = cuda_note(net::kShmProvider, &d.ptr_support);
        d.speed_mbps = 100000;
        d.latency_us = 1;
        d.max_bytes = kMaxBytes;
        devs.push_back(d);
      } else {
        why.push_back("shm: " + w);
      }
      if (!cfg.trust_network) {
        why.push_back("tcp;ofi_rxm: not offered as a device (it does not authenticate peers; DCCL_TRUST_NETWORK=1 "
                      "adds it)");
      } else {
        for (const auto& r : rails) {
          Device d;
          d.name = "dccl-tcp-" + r.name;
          d.kind = "tcp";
          d.rail = r.name;
          d.ptr_support = kNcclPtrHost;
          d.device_memory = cuda_note(net::kTcpProvider, &d.ptr_support);
          d.speed_mbps = link_speed_mbps(r.name);
          d.latency_us = 7;
          d.max_bytes = kMaxBytes;
          devs.push_back(d);
        }
      }
    } catch (const core::Error& e) {
      code = e.code();
      error = e.what();
    }
  });
  if (code != dcclSuccess) core::raise(code, error);
  if (notes) *notes = why;
  return devs;
}

struct Region {
  bool device = false;
  bool cuda = false;  // receives flush the NIC's writes before they complete
  mem::RegCache::Ref ref;  // a cache entry (host; device memory exported here)
  std::shared_ptr<mem::DmaBufRegistration> own;  // a dma-buf NCCL exported
  net::MemRegion* mr = nullptr;  // the transport's registration (host: null when not needed)
  mem::DmaBufRegistration* dev = nullptr;
  void* base = nullptr;
  size_t len = 0;
};

struct Op {
  net::Request req;
  bool active = false;  // posted, completion not yet seen
  bool flush = false;   // a receive into CUDA memory
  bool live = false;    // handed out (not in the spare list)
  std::chrono::steady_clock::time_point posted;
  std::chrono::steady_clock::time_point checked;  // a receive's last look for a longer message (sock)
};

namespace {
char g_unregistered;  // a host registration the transport did not need

// Every connected link of the process. A request waits on its own connection, but
// its peer may be waiting on ours in the other direction (a rendezvous needs the
// sender's progress): NCCL tests one request at a time, so a pending test
// progresses the other links too, as a provider's shared endpoint would.
std::mutex g_links_mu;
std::set<net::Transport*> g_links;

void progress_others(net::Transport* self) {
  std::unique_lock<std::mutex> lk(g_links_mu, std::try_to_lock);
  if (!lk.owns_lock()) return;  // another thread is at it
  for (net::Transport* t : g_links)
    if (t != self) t->progress();
}
}  // namespace

struct Link::Impl {
  Device dev;
  int rank = 0;
  const core::Config& cfg = settings();
  std::unique_ptr<net::Transport> net;
  std::unique_ptr<mem::RegCache> host_cache;
  std::atomic<uint64_t> counters[5] = {};
  std::unique_ptr<mem::DirectPath> direct;
  std::string device_why;  // "" until device memory was checked; "ok" when viable
  std::set<Region*> regions;
  std::vector<std::unique_ptr<Op>> all_ops;  // every op made; live ones are handed out
  std::vector<Op*> spare_ops;
  bool failed = false;
  std::string broken;  // why the connection is unusable (a truncated receive), "" while it is

  int peer() const { return 1 - rank; }

  [[noreturn]] void truncated(const std::string& what, const std::string& cause) {
    failed = true;
    broken = "a receive was truncated earlier (" + cause + ")";
    core::raise(dcclRemoteError, "NET/dccl " + what + " on " + dev.name + ": " + cause +
                                     "; a send larger than its receive is an error, and this connection is unusable now");
  }

  void check_device_memory(const mem::Backend& be) {
    if (dev.kind == "sock")
      core::raise(dcclUnavailable, "NET/dccl regMr: " + dev.name + ": " + dev.device_memory);
    if (device_why.empty()) {
      // The viability layers on this connection, trial registration included.
      const auto layers = mem::check_viability(be.name(), dev.kind == "shm" ? net::kShmProvider : net::kTcpProvider,
                                               net.get());
      const mem::Layer* f = mem::first_failure(layers);
      device_why = f ? f->name + " fails: " + f->detail : "ok";
      DCCL_INFO("NET/dccl %s: %s memory %s", dev.name.c_str(), be.name(),
                f ? ("not registered by the NIC: " + device_why).c_str() : "registered by dma-buf");
    }
    if (device_why != "ok")
      core::raise(dcclUnavailable, "NET/dccl regMr: " + dev.name + ": " + be.name() + " memory: " + device_why);
  }

  Op* post(bool send, void* p, size_t n, uint32_t tag, Region* r) {
    const std::string what = send ? "isend" : "irecv";
    if (!broken.empty())
      core::raise(dcclRemoteError, "NET/dccl " + what + " on " + dev.name + ": the connection is unusable: " + broken);
    if (n > dev.max_bytes)
      core::raise(dcclInvalidArgument, "NET/dccl " + what + ": " + std::to_string(n) +
                                           " bytes exceed " + dev.name + "'s largest message " + std::to_string(dev.max_bytes));
    void* at = p;
    net::MemRegion* mr = nullptr;
    if (r && !regions.count(r)) {  // never read a handle that is not ours (freed, or another comm's)
      char h[32];
      snprintf(h, sizeof(h), "%p", static_cast<void*>(r));
      core::raise(dcclInvalidArgument, "NET/dccl " + what + " on " + dev.name + ": mhandle " + h +
                                           " is not a live registration of this comm (never registered on it, or "
                                           "deregistered already)");
    }
    if (r) {
      const auto* c = static_cast<const char*>(p);
      const auto* b = static_cast<const char*>(r->base);
      if (n && (c < b || c + n > b + r->len))
        core::raise(dcclInvalidArgument, "NET/dccl " + what + " on " + dev.name + ": the buffer lies outside its registration");
      if (r->device && n) at = r->dev->at(p);
      mr = r->mr;
    } else if (n && mem::backend_of(p).kind() != mem::Kind::Host) {
      core::raise(dcclInvalidArgument, "NET/dccl " + what + " on " + dev.name + ": device memory without a registration");
    }
    Op* op = nullptr;
    if (spare_ops.empty()) {
      all_ops.push_back(std::make_unique<Op>());
      op = all_ops.back().get();
    } else {
      op = spare_ops.back();
      spare_ops.pop_back();
    }
    op->live = true;
    op->active = false;
    op->posted = std::chrono::steady_clock::now();
    op->checked = op->posted;
    op->req.up_to = !send;
    op->flush = !send && r && r->cuda;
    try {
      named(what.c_str(), dev, [&] {
        if (send) net->isend(peer(), at, n, tag, &op->req, mr);
        else net->irecv(peer(), at, n, tag, &op->req, mr);
      });
    } catch (...) {
      op->live = false;
      spare_ops.push_back(op);
      throw;
    }
    op->active = true;
    return op;
  }

  ~Impl() {
    if (net) {
      std::lock_guard<std::mutex> lk(g_links_mu);
      g_links.erase(net.get());
    }
    for (auto& op : all_ops)
      if (op->live) drop(op.get());
    for (Region* r : regions) delete r;
    regions.clear();
    if (failed && net) {
      net->cancel_all();
      net->abandon();
    }
    direct.reset();
    host_cache.reset();
  }

  void drop(Op* op) {
    if (op->active && !op->req.done.load(std::memory_order_acquire)) {
      failed = true;
      net->cancel_all();  // the transport never touches the request again
    }
    op->live = false;
    op->active = false;
    spare_ops.push_back(op);
  }
};

Link::Link(const Device& dev, int rank, const std::array<uint8_t, 16>& secret) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dev = dev;
  m.rank = rank;
  net::TransportOptions to;
  to.rank = rank;
  to.nranks = 2;
  to.host = topo::host_identity(m.cfg.host_id);
  to.spin_us = m.cfg.spin_us;
  to.timeout = std::chrono::milliseconds(m.cfg.timeout_s * 1000);
  to.ifnames = dev.rail;
  to.secret = secret;
  to.want_hmem = dev.kind != "sock" && mem::cuda_backend() != nullptr;
  if (dev.kind == "shm") {
    to.provider = net::kShmProvider;
  } else if (dev.kind == "sock") {
    to.provider = "tcp";  // untrusted: every message takes the socket path
    to.trust_network = false;
    to.sock_bytes = dev.max_bytes;
    to.tcp_congestion = m.cfg.net_tcp_congestion;
  } else {
    to.provider = "tcp";
    to.trust_network = true;
    to.sock_bytes = 0;  // every message on the fabric, so that receives take up to their size
    to.flows = 1;       // and are never cut over flows (NCCL opens its own connections)
  }
  m.net = named(rank ? "connect" : "accept", dev, [&] { return net::Transport::create(to); });
}

Link::~Link() = default;

std::string Link::blob() const { return impl_->net->local_blob(); }

std::chrono::milliseconds Link::timeout() const { return std::chrono::milliseconds(impl_->cfg.timeout_s * 1000); }

void Link::connect(const std::string& peer_blob, std::chrono::steady_clock::time_point until) {
  Impl& m = *impl_;
  std::vector<std::string> blobs(2);
  blobs[static_cast<size_t>(m.rank)] = m.net->local_blob();
  blobs[static_cast<size_t>(m.peer())] = peer_blob;
  named(m.rank ? "connect" : "accept", m.dev, [&] { m.net->connect(blobs, until); });
  m.host_cache = std::make_unique<mem::RegCache>(m.cfg.reg_cache_bytes);
  mem::PathCounters pc{&m.counters[0], &m.counters[1], &m.counters[2], &m.counters[3], &m.counters[4]};
  m.direct = std::make_unique<mem::DirectPath>(*m.net, m.rank, m.cfg.reg_cache_bytes, pc);
  std::lock_guard<std::mutex> lk(g_links_mu);
  g_links.insert(m.net.get());
}

Region* Link::reg(void* p, size_t n, bool device) {
  Impl& m = *impl_;
  const std::string op = "NET/dccl regMr on " + m.dev.name + ": ";
  if (!p || !n) core::raise(dcclInvalidArgument, op + (p ? "size 0" : "null buffer"));
  mem::Backend& be = mem::backend_of(p);
  if (device != (be.kind() != mem::Kind::Host))
    core::raise(dcclInvalidArgument, op + be.name() + " memory registered as " +
                                         (device ? "device memory (NCCL_PTR_CUDA)" : "host memory (NCCL_PTR_HOST)"));
  auto r = std::make_unique<Region>();
  r->device = device;
  r->base = p;
  r->len = n;
  if (device) {
    m.check_device_memory(be);
    r->cuda = be.kind() == mem::Kind::Cuda;
    r->ref = named("regMr", m.dev, [&] { return m.direct->acquire(p, n); });
    r->dev = static_cast<mem::DmaBufRegistration*>(r->ref.handle().get());
    r->mr = r->dev->mr;
  } else {
    net::Transport* t = m.net.get();
    r->ref = named("regMr", m.dev, [&] {
      return m.host_cache->acquire(mem::Kind::Host, p, n, -1, [t](const mem::RegRange& rr) -> mem::RegCache::Handle {
        net::MemRegion* mr = t->register_memory(reinterpret_cast<void*>(rr.start), rr.len());
        if (!mr) return mem::RegCache::Handle(static_cast<void*>(&g_unregistered), [](void*) {});
        return mem::RegCache::Handle(static_cast<void*>(mr), [t, mr](void*) { t->deregister_memory(mr); });
      });
    });
    void* h = r->ref.handle().get();
    r->mr = h == &g_unregistered ? nullptr : static_cast<net::MemRegion*>(h);
  }
  m.regions.insert(r.get());
  return r.release();
}

Region* Link::reg_dmabuf(void* p, size_t n, int fd, uint64_t offset) {
  Impl& m = *impl_;
  if (!p || !n)
    core::raise(dcclInvalidArgument, "NET/dccl regMrDmaBuf on " + m.dev.name + ": " + (p ? "size 0" : "null buffer"));
  // CUDA memory this process drives is imported by the provider; any other dma-buf
  // (the sim backend's memfd) is mapped by the CPU, as a NIC maps it.
  mem::Backend* cuda = mem::cuda_backend();
  const bool is_cuda = cuda && cuda->owns(p, n);
  mem::Backend& be = is_cuda ? *cuda : mem::sim_backend();
  m.check_device_memory(be);
  const size_t page = m.host_cache->page_size();
  mem::RegRange range;
  range.kind = be.kind();
  range.start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  range.end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  auto r = std::make_unique<Region>();
  r->device = true;
  r->cuda = is_cuda;
  r->base = p;
  r->len = n;
  r->own = named("regMrDmaBuf", m.dev, [&] {
    return mem::register_dmabuf_range(*m.net, m.rank, be.kind(), be.device(), mem::DmaBuf{fd, offset, n}, p, n, range);
  });
  r->dev = r->own.get();
  r->mr = r->dev->mr;
  m.regions.insert(r.get());
  return r.release();
}

void Link::dereg(Region* r) {
  if (!impl_->regions.erase(r)) {
    char at[32];
    snprintf(at, sizeof(at), "%p", static_cast<void*>(r));
    core::raise(dcclInvalidArgument, "NET/dccl deregMr on " + impl_->dev.name + ": mhandle " + at +
                                         " is not a live registration of this comm (never registered on it, or "
                                         "deregistered already)");
  }
  delete r;
}

Op* Link::send(const void* p, size_t n, uint32_t tag, Region* r) {
  return impl_->post(true, const_cast<void*>(p), n, tag, r);
}

Op* Link::recv(void* p, size_t n, uint32_t tag, Region* r) { return impl_->post(false, p, n, tag, r); }

bool Link::test(Op* op, size_t* bytes) {
  Impl& m = *impl_;
  if (op->active) {
    m.net->progress();
    const std::string what = op->req.is_send ? "isend" : "irecv";
    const size_t posted = op->req.len;
    if (!op->req.done.load(std::memory_order_acquire)) {
      if (!m.broken.empty())
        core::raise(dcclRemoteError, "NET/dccl " + what + " on " + m.dev.name + ": the connection is unusable: " + m.broken);
      // Not at once: on sockets each link's progress is a system call, which would
      // slow every small message; a rendezvous waiting on another link can wait.
      const auto now = std::chrono::steady_clock::now();
      const auto waited = now - op->posted;
      if (waited > std::chrono::microseconds(20)) progress_others(m.net.get());
      // The socket path holds a message longer than the receive of its tag and
      // never completes the receive: look for one every millisecond.
      if (!op->req.is_send && m.dev.kind == "sock" && now - op->checked >= std::chrono::milliseconds(1)) {
        op->checked = now;
        const size_t sent = sent_bytes(m.net->mismatch_note(op->req));
        if (sent > posted)
          m.truncated(what, "the sender sent " + std::to_string(sent) + " bytes to this " + std::to_string(posted) +
                                "-byte receive");
      }
      if (waited <= timeout()) return false;
      m.failed = true;
      core::raise(dcclTimeout, "NET/dccl " + what + " on " + m.dev.name + ": not complete within " +
                                   core::timeout_text(m.cfg) + m.net->mismatch_note(op->req));
    }
    op->active = false;
    // The NIC wrote into device memory: visible to the device before NCCL sees it done.
    if (!op->req.failed && op->flush) mem::cuda_backend()->flush_remote_writes();
  }
  // A failed op fails every test of it, not only the first (a second test must not
  // report the failed transfer complete).
  if (op->req.failed) {
    m.failed = true;
    const std::string what = op->req.is_send ? "isend" : "irecv";
    // A provider's truncation (FI_ETRUNC): its own text may misstate the lengths.
    if (!op->req.is_send && op->req.misuse)
      m.truncated(what, "the sender's message is longer than this " + std::to_string(op->req.len) + "-byte receive");
    core::raise(dcclRemoteError, "NET/dccl " + what + " on " + m.dev.name + ": " + op->req.error);
  }
  *bytes = op->req.bytes.load(std::memory_order_relaxed);
  return true;
}

void Link::free_op(Op* op) {
  if (op && op->live) impl_->drop(op);
}

void Link::cancel() {
  impl_->failed = true;
  impl_->net->cancel_all();
}

}  // namespace dccl::plugin
