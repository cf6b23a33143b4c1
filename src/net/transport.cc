#include <cerrno>
#include <sys/stat.h>
#include <signal.h>
#include <dirent.h>
#include <map>
#include <unistd.h>
#include <sys/syscall.h>
#include <poll.h>
// Transport: routes each peer to an endpoint (shm on the same host, tcp;ofi_rxm across
// hosts, or one forced provider), posts tagged messages and drives completions.
#include "net/transport.hpp"

#include <sched.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "core/log.hpp"
#include "net/blob.hpp"
#include "net/endpoint.hpp"
#include "net/provider.hpp"

namespace dccl::net {

namespace {

using Clock = std::chrono::steady_clock;

// wait(): busy-poll for spin_us, then poll + sched_yield for kYieldWindow, then poll +
// nanosleep from 1 us doubling up to kMaxNapNs (the kernel's 50 us timer slack applies).
// fi_cq_sread is not used: shm peers do not signal the CQ's wait fd in 1.17 (it would be
// a timed sleep), and blocking inside the domain lock would stall posting threads.
constexpr auto kYieldWindow = std::chrono::microseconds(500);
constexpr int64_t kMaxNapNs = 50000;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

class FabricTransport final : public Transport {
 public:
  explicit FabricTransport(const TransportOptions& o);
  ~FabricTransport() override {
    for (auto& [a, fd] : pidfds_) close(fd);
  }

  std::string local_blob() const override;
  void connect(const std::vector<std::string>& blobs) override;
  std::string provider_summary() const override;
  std::string hmem_missing() const override;
  void isend(int peer, const void* buf, size_t len, uint64_t tag, Request* req,
             MemRegion* mr) override {
    post(true, peer, const_cast<void*>(buf), len, tag, req, mr);
  }
  void irecv(int peer, void* buf, size_t len, uint64_t tag, Request* req,
             MemRegion* mr) override {
    post(false, peer, buf, len, tag, req, mr);
  }
  void progress() override {
    for (auto& ep : eps_) ep->progress(false);
  }
  void wait(Request* const* reqs, size_t n, const std::string& what) override;
  void cancel_all() override {
    for (auto& ep : eps_) ep->cancel_all();
  }
  MemRegion* register_memory(const void* buf, size_t len) override;
  void deregister_memory(MemRegion* mr) override;
  MemRegion* register_dmabuf(int fd, uint64_t offset, size_t len, void* base, int iface, int device) override {
    auto mr = std::make_unique<MemRegion>();
    mr->base = base;
    mr->len = len;
    for (auto& ep : eps_) mr->regs.emplace_back(ep.get(), ep->register_dmabuf(fd, offset, len, base, iface, device));
    return mr.release();
  }
  void abandon() override {
    bool any = false;
    for (auto& ep : eps_) any = any || ep->cancelled_any();
    if (!any) return;  // nothing in the provider's hands: close normally
    abandoned_ = true;
    for (auto& ep : eps_) (void)ep.release();
    eps_.clear();
  }

 private:
  bool open(const std::string& prov, std::string* why);
  void post(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req,
            MemRegion* mr);
  std::string describe_req(const Request& r) const;
  [[noreturn]] void unavailable(const std::string& what) const;

  struct Route {
    Endpoint* ep = nullptr;
    fi_addr_t addr = FI_ADDR_UNSPEC;
  };

  TransportOptions opts_;
  std::string forced_;  // "" = automatic
  Blob self_;
  std::vector<std::unique_ptr<Endpoint>> eps_;
  std::vector<Route> routes_;
  std::map<fi_addr_t, int> pidfds_;  // same-host shm peers' processes
  bool abandoned_ = false;
  bool connected_ = false;
};

namespace {
// libfabric's shm provider names its region /dev/shm/<pid>:<n>:<m> and leaves it
// behind when the process is killed; a later process with the same pid then fails
// fi_enable with EBUSY. Remove such regions whose process no longer exists.
void reap_orphaned_shm_regions() {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    unsigned long pid = 0, a = 0, b = 0;
    char tail = 0;
    if (sscanf(e->d_name, "%lu:%lu:%lu%c", &pid, &a, &b, &tail) != 3 || pid == 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::string path = std::string("/dev/shm/") + e->d_name;
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && st.st_uid == getuid()) unlink(path.c_str());
  }
  closedir(d);
}
}  // namespace

FabricTransport::FabricTransport(const TransportOptions& o) : opts_(o) {
  reap_orphaned_shm_regions();
  if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks)
    core::raise(dcclInvalidArgument, "transport: rank " + std::to_string(o.rank) +
                                         " out of range for " + std::to_string(o.nranks) +
                                         " ranks");
  api_version();  // throws when the runtime is too old
  forced_ = canonical_provider(o.provider);
  if (forced_.empty()) {
    // FI_PROVIDER filters libfabric's own provider list; a single plain name is a choice.
    const char* env = getenv("FI_PROVIDER");
    std::string e = env ? env : "";
    if (!e.empty() && e.find_first_of("^,") == std::string::npos) {
      forced_ = canonical_provider(e);
      DCCL_INFO("net: FI_PROVIDER=%s selects provider %s for every peer", env, forced_.c_str());
    }
  }
  self_.host = o.host.empty() ? local_hostname() : o.host;
  self_.boot_id = local_boot_id();
  self_.pid = getpid();

  std::string why;
  if (!forced_.empty()) {
    if (!open(forced_, &why)) unavailable("provider '" + forced_ + "' is unavailable: " + why);
  } else {
    std::string why_tcp;
    bool shm = open(kShmProvider, &why);
    bool tcp = open(kTcpProvider, &why_tcp);
    if (!shm && !tcp)
      unavailable("neither shm (" + why + ") nor tcp;ofi_rxm (" + why_tcp + ") can be opened");
    if (!shm)
      DCCL_WARN("net: shm unavailable (%s); same-host peers will use tcp;ofi_rxm", why.c_str());
    if (!tcp)  // connect() fails with the reason if a peer turns out to be remote
      DCCL_INFO("net: tcp;ofi_rxm unavailable (%s); only same-host peers are reachable",
                why_tcp.c_str());
  }
  for (auto& ep : eps_) self_.endpoints.emplace_back(ep->provider(), ep->address());
}

bool FabricTransport::open(const std::string& prov, std::string* why) {
  ProviderInfo pi = find_provider(prov, why, opts_.want_hmem);
  if (!pi.info) return false;
  try {
    eps_.push_back(std::make_unique<Endpoint>(prov, std::move(pi), opts_.rank, opts_.nranks,
                                              opts_.max_part_bytes));
  } catch (const core::Error& e) {
    *why = e.what();
    return false;
  }
  if (opts_.want_hmem)
    DCCL_INFO("net: %s opened %s FI_HMEM", prov.c_str(),
              eps_.back()->hmem() ? "with" : "without (the provider does not offer it)");
  if (eps_.back()->max_part() < (size_t(1) << 40))
    DCCL_INFO("net: %s splits messages above %zu bytes", prov.c_str(), eps_.back()->max_part());
  return true;
}

void FabricTransport::unavailable(const std::string& what) const {
  std::vector<std::string> avail = available_providers();
  core::raise(dcclUnavailable,
              core::describe(opts_.rank, "transport",
                             what + "; available RDM providers: " +
                                 (avail.empty() ? std::string("none") : join(avail, ", "))));
}

std::string FabricTransport::local_blob() const { return self_.encode(); }

std::string FabricTransport::provider_summary() const {
  std::vector<std::string> names;
  for (const auto& ep : eps_) names.push_back(ep->provider());
  return join(names, "+");
}

std::string FabricTransport::hmem_missing() const {
  if (eps_.empty()) return "no endpoint is open";
  std::vector<std::string> lacking;
  for (const auto& ep : eps_)
    if (!ep->hmem()) lacking.push_back(ep->provider());
  if (lacking.empty()) return "";
  return "the " + join(lacking, ", ") + (lacking.size() == 1 ? " endpoint was" : " endpoints were") +
         " opened without FI_HMEM (" +
         (opts_.want_hmem ? "the provider does not offer it"
                          : "not requested: no device backend in this process") +
         ")";
}

void FabricTransport::connect(const std::vector<std::string>& blobs) {
  const int rank = opts_.rank;
  if (connected_) core::raise(dcclInvalidUsage, core::describe(rank, "connect", "called twice"));
  if (blobs.size() != static_cast<size_t>(opts_.nranks))
    core::raise(dcclInvalidArgument,
                core::describe(rank, "connect",
                               std::to_string(blobs.size()) + " blobs for " +
                                   std::to_string(opts_.nranks) + " ranks"));
  auto find_ep = [&](const std::string& prov) -> Endpoint* {
    for (auto& ep : eps_)
      if (ep->provider() == prov) return ep.get();
    return nullptr;
  };
  std::vector<Route> routes(blobs.size());
  std::vector<int> users(eps_.size(), 0);
  for (size_t r = 0; r < blobs.size(); ++r) {
    const std::string who = "rank " + std::to_string(r);
    Blob b = Blob::decode(blobs[r], who);
    std::vector<std::string> theirs;
    for (const auto& e : b.endpoints) theirs.push_back(e.first);
    std::string prov;
    if (!forced_.empty()) {
      prov = forced_;
    } else if (self_.same_host(b) && find_ep(kShmProvider) && b.address_for(kShmProvider)) {
      prov = kShmProvider;
    } else {
      prov = kTcpProvider;
    }
    Endpoint* ep = find_ep(prov);
    const std::string* addr = b.address_for(prov);
    if (!ep || !addr)
      core::raise(dcclUnavailable,
                  core::describe(rank, "connect",
                                 "no common provider with " + who + " (host " + b.host +
                                     ", offers " + join(theirs, ", ") + "; this rank on " +
                                     self_.host + " offers " + provider_summary() + ")" +
                                     (forced_.empty()
                                          ? std::string()
                                          : "; every rank must use the same DCCL_PROVIDER")));
    routes[r].ep = ep;
    routes[r].addr = ep->insert(*addr, static_cast<int>(r));
    if (prov == kShmProvider && static_cast<int>(r) != rank && b.pid > 0) {
      int fd = static_cast<int>(syscall(SYS_pidfd_open, b.pid, 0));
      if (fd >= 0) pidfds_[routes[r].addr] = fd;
    }
    for (size_t i = 0; i < eps_.size(); ++i)
      if (eps_[i].get() == ep) ++users[i];
  }
  // Automatic mode opened tcp;ofi_rxm in case a peer was remote: close what nobody uses.
  std::string log;
  std::vector<std::unique_ptr<Endpoint>> keep;
  for (size_t i = 0; i < eps_.size(); ++i) {
    if (users[i] == 0 && forced_.empty()) continue;
    log += (log.empty() ? "" : ", ") + eps_[i]->provider() + " for " + std::to_string(users[i]) +
           (users[i] == 1 ? " rank" : " ranks");
    keep.push_back(std::move(eps_[i]));
  }
  eps_ = std::move(keep);
  routes_ = std::move(routes);
  for (auto& ep : eps_)
    if (ep->provider() == kShmProvider && !pidfds_.empty())
      ep->set_liveness([this](fi_addr_t a) {
        auto it = pidfds_.find(a);
        if (it == pidfds_.end()) return true;
        pollfd p{it->second, POLLIN, 0};
        return poll(&p, 1, 0) == 0;  // readable once the process has exited
      });
  connected_ = true;
  DCCL_INFO("net: rank %d of %d on %s uses %s", rank, opts_.nranks, self_.host.c_str(),
            log.c_str());
}

void FabricTransport::post(bool send, int peer, void* buf, size_t len, uint64_t tag,
                           Request* req, MemRegion* mr) {
  const char* op = send ? "isend" : "irecv";
  if (!connected_)
    core::raise(dcclInvalidUsage, core::describe(opts_.rank, op, "connect() was not called"));
  if (peer < 0 || peer >= opts_.nranks || !req || (!buf && len))
    core::raise(dcclInvalidArgument,
                core::describe(opts_.rank, op,
                               "bad arguments (peer " + std::to_string(peer) + " of " +
                                   std::to_string(opts_.nranks) + ", request " +
                                   (req ? "set" : "null") + ", " + std::to_string(len) +
                                   " bytes at " + (buf ? "a buffer" : "null") + ")"));
  req->reset();
  req->peer = peer;
  req->tag = tag;
  req->is_send = send;
  const Route& rt = routes_[peer];
  void* desc = mr ? mr->desc_for(rt.ep) : nullptr;
  rt.ep->post(send, rt.addr, buf, len, tag, desc, req);
}

std::string FabricTransport::describe_req(const Request& r) const {
  std::string s = std::string(r.is_send ? "send to" : "recv from") + " rank " +
                  std::to_string(r.peer) + " (tag " + hex(r.tag);
  if (r.peer >= 0 && static_cast<size_t>(r.peer) < routes_.size() && routes_[r.peer].ep)
    s += ", " + routes_[r.peer].ep->provider();
  return s + ")";
}

void FabricTransport::wait(Request* const* reqs, size_t n, const std::string& what) {
  const auto t0 = Clock::now();
  const auto spin_end = t0 + std::chrono::microseconds(std::max<int64_t>(opts_.spin_us, 0));
  const auto deadline = t0 + opts_.timeout;
  size_t first = 0;  // reqs[0, first) are done
  int64_t nap_ns = 1000;
  for (;;) {
    bool all = true;
    for (size_t i = first; i < n; ++i) {
      const Request* r = reqs[i];
      if (!r) continue;
      if (!r->done.load(std::memory_order_acquire)) {
        all = false;
        continue;
      }
      if (r->failed)
        core::raise(dcclRemoteError,
                    core::describe(opts_.rank, what, describe_req(*r) + " failed: " + r->error));
      if (all) first = i + 1;
    }
    if (all) return;
    progress();
    const auto now = Clock::now();
    if (now < spin_end) continue;
    if (now >= deadline) break;
    // Past the spin budget, first yield (the peer we wait for may need this core: 8 ranks
    // can share 2), then sleep in short, growing naps so that oversubscribed ranks leave
    // the CPU to those with work (8 ranks on 2 cores, ring of 1 MiB: ~4x faster than
    // yielding forever; 2-rank ping-pong keeps its ~1-5 us since it never gets here).
    if (now < spin_end + kYieldWindow) {
      sched_yield();
    } else {
      timespec ts{0, static_cast<long>(nap_ns)};
      nanosleep(&ts, nullptr);
      nap_ns = std::min<int64_t>(nap_ns * 2, kMaxNapNs);
    }
  }
  std::string pending;
  size_t count = 0;
  for (size_t i = first; i < n; ++i) {
    if (!reqs[i] || reqs[i]->done.load(std::memory_order_acquire)) continue;
    if (count++ < 8) pending += (pending.empty() ? "" : ", ") + describe_req(*reqs[i]);
  }
  if (count > 8) pending += " and " + std::to_string(count - 8) + " more";
  core::raise(dcclTimeout,
              core::describe(opts_.rank, what,
                             "timed out after " + std::to_string(opts_.timeout.count()) +
                                 " ms waiting for " + pending));
}

MemRegion* FabricTransport::register_memory(const void* buf, size_t len) {
  if (!connected_)
    core::raise(dcclInvalidUsage,
                core::describe(opts_.rank, "register memory", "connect() was not called"));
  auto mr = std::make_unique<MemRegion>();
  mr->base = buf;
  mr->len = len;
  for (auto& ep : eps_) mr->regs.emplace_back(ep.get(), ep->register_buffer(buf, len));
  return mr.release();
}

void FabricTransport::deregister_memory(MemRegion* mr) {
  if (!mr || abandoned_) return;
  for (auto& [ep, fid] : mr->regs) const_cast<Endpoint*>(ep)->close_buffer(fid);
  delete mr;
}

}  // namespace

std::unique_ptr<Transport> Transport::create(const TransportOptions& opts) {
  return std::make_unique<FabricTransport>(opts);
}

}  // namespace dccl::net
