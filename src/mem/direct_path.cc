#include "mem/direct_path.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "core/log.hpp"
#include "net/fabric/fi_dmabuf_compat.hpp"

namespace dccl::mem {

namespace {

char g_zero[8];

// A transfer's hold on its registration, and for a receive into device memory the
// backend that must make the NIC's writes visible before the data is used.
struct InFlight {
  RegCache::Ref ref;
  Backend* flush = nullptr;
};

}  // namespace

DmaBufRegistration::~DmaBufRegistration() {
  if (mr) net->deregister_memory(mr);
  if (map) munmap(map, len);
}

std::shared_ptr<DmaBufRegistration> register_dmabuf_range(net::Transport& net, int rank, Kind kind, int device,
                                                          const DmaBuf& d, void* base, size_t size,
                                                          const RegRange& range) {
  auto m = std::make_shared<DmaBufRegistration>();
  m->dev_base = static_cast<const char*>(base);
  m->net = &net;
  if (kind == Kind::Cuda) {
    m->addr = base;  // the transport is given device addresses
    // fi_mr_dmabuf: the region's address is base_addr + offset, base_addr being
    // where the dma-buf's first byte is seen, so pass base less its offset.
    void* fd_start = static_cast<char*>(base) - d.offset;
    m->mr = net.register_dmabuf(d.fd, d.offset, size, fd_start, FI_HMEM_CUDA, device);
    if (!m->mr)
      core::raise(dcclUnavailable, core::describe(rank, "peer-direct", "the transport cannot register dma-bufs"));
    return m;
  }
  // Map the dma-buf (whole pages, as a NIC would) and register the mapping.
  const uint64_t lead = reinterpret_cast<uintptr_t>(base) - range.start;  // base's offset in its page
  if (d.offset < lead)
    core::raise(dcclInternalError, core::describe(rank, "peer-direct", "dma-buf offset is not page-consistent"));
  m->len = range.len();
  void* a = mmap(nullptr, m->len, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd, static_cast<off_t>(d.offset - lead));
  if (a == MAP_FAILED)
    core::raise(dcclSystemError, core::describe(rank, "peer-direct", std::string("mapping the dma-buf failed: ") +
                                                                        strerror(errno)));
  m->map = a;
  m->addr = static_cast<char*>(a) + lead;
  m->mr = net.register_memory(a, m->len);
  DCCL_TRACE("peer-direct: registered %s range of %zu bytes (dma-buf fd %d)", kind_name(kind), m->len, d.fd);
  return m;
}

DirectPath::DirectPath(net::Transport& net, int rank, size_t cache_bytes, PathCounters counters)
    : net_(net), rank_(rank), ctr_(counters), cache_(cache_bytes) {
  hook_ = add_free_hook([this](Kind kind, const void* base, size_t size) { cache_.invalidate(kind, base, size); });
}

DirectPath::~DirectPath() { remove_free_hook(hook_); }

RegCache::Ref DirectPath::acquire(const void* p, size_t bytes) {
  Backend& be = backend_of(p);
  void* base = nullptr;
  size_t size = 0;
  if (!be.range_of(p, &base, &size) || static_cast<const char*>(p) + bytes > static_cast<char*>(base) + size)
    core::raise(dcclInvalidArgument,
                core::describe(rank_, "peer-direct", std::string("buffer is not inside one live ") + be.name() +
                                                         " allocation"));
  // Export the allocation, map the dma-buf (whole pages, as a NIC would) and register it.
  // Real devices: the NIC reaches the memory itself through FI_MR_DMABUF.
  auto reg = [&](const RegRange& range) -> RegCache::Handle {
    return register_dmabuf_range(net_, rank_, be.kind(), be.device(), be.export_dmabuf(base, size), base, size, range);
  };
  // Keyed by the allocation's id too: memory freed and allocated again at the same
  // address behind DirectCCL's back (cudaFree + cudaMalloc) must not hit.
  const uint64_t id = be.buffer_id(base);
  return cache_.acquire(be.kind(), base, size, id ? static_cast<int64_t>(id) : -1, reg);
}

void DirectPath::forget(const void* p) {
  Backend& be = backend_of(p);
  void* base = nullptr;
  size_t size = 0;
  if (be.range_of(p, &base, &size)) cache_.invalidate(be.kind(), base, size);
}

void* DirectPath::reach(const void* p, size_t bytes, Xfer& x, net::MemRegion** mr) {
  // The reference keeps the mapping alive until the transfer completes.
  auto* st = new InFlight{acquire(p, bytes), nullptr};
  x.path_state = st;
  auto* m = static_cast<DmaBufRegistration*>(st->ref.handle().get());
  *mr = m->mr;
  return m->at(p);
}

void DirectPath::post_send(int peer, const void* p, size_t bytes, uint64_t tag, Xfer& x) {
  x.path_state = nullptr;
  net::MemRegion* mr = nullptr;
  const void* at = bytes ? reach(p, bytes, x, &mr) : g_zero;
  net_.isend(peer, at, bytes, tag, &x.req, mr);
  ctr_.sent_direct->fetch_add(bytes, std::memory_order_relaxed);
}

void DirectPath::post_recv(int peer, void* p, size_t bytes, uint64_t tag, Xfer& x) {
  x.path_state = nullptr;
  net::MemRegion* mr = nullptr;
  void* at = g_zero;
  if (bytes) {
    at = reach(p, bytes, x, &mr);
    Backend& be = backend_of(p);
    if (be.kind() == Kind::Cuda) static_cast<InFlight*>(x.path_state)->flush = &be;
  }
  net_.irecv(peer, at, bytes, tag, &x.req, mr);
  ctr_.recv_direct->fetch_add(bytes, std::memory_order_relaxed);
}

bool DirectPath::progress(Xfer& x) {
  if (!x.req.done.load(std::memory_order_acquire)) return false;
  std::unique_ptr<InFlight> st(static_cast<InFlight*>(x.path_state));
  x.path_state = nullptr;
  if (x.req.failed)
    throw core::Error(dcclRemoteError, core::describe(rank_, "peer-direct transfer", x.req.error));
  // The NIC wrote into device memory: flush before anything on the device reads it
  // (the caller reduces or copies it next).
  if (st && st->flush) st->flush->flush_remote_writes();
  return true;
}

}  // namespace dccl::mem
