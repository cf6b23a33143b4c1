#include "net/fabric/registration.hpp"

#include "net/link.hpp"

namespace dccl::net {

MemRegion* register_host(const Endpoints& eps, const void* buf, size_t len) {
  auto mr = std::make_unique<MemRegion>();
  mr->base = buf;
  mr->len = len;
  for (const auto& ep : eps) mr->regs.emplace_back(ep.get(), ep->register_buffer(buf, len));
  return mr.release();
}

MemRegion* register_dmabuf(const Endpoints& eps, int fd, uint64_t offset, size_t len, void* base, int iface,
                           int device) {
  auto mr = std::make_unique<MemRegion>();
  mr->base = base;
  mr->len = len;
  mr->device = true;
  for (const auto& ep : eps) mr->regs.emplace_back(ep.get(), ep->register_dmabuf(fd, offset, len, base, iface, device));
  return mr.release();
}

void deregister(MemRegion* mr) {
  for (auto& [ep, fid] : mr->regs) const_cast<Endpoint*>(ep)->close_buffer(fid);
  delete mr;
}

bool device_memory(const MemRegion* mr) { return mr->device; }

}  // namespace dccl::net
