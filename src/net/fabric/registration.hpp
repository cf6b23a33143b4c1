// Registration of buffers with a transport's libfabric endpoints
// (Transport::register_memory / register_dmabuf): one MemRegion holds the buffer's
// registration with every endpoint, and each FabricLink takes its endpoint's
// descriptor from it.
#pragma once
#include <memory>
#include <vector>

#include "net/fabric/endpoint.hpp"

namespace dccl::net {

using Endpoints = std::vector<std::unique_ptr<Endpoint>>;

// Host memory [buf, buf+len) with every endpoint; throws core::Error.
MemRegion* register_host(const Endpoints& eps, const void* buf, size_t len);
// Device memory exported as a dma-buf, with every endpoint (Endpoint::register_dmabuf).
MemRegion* register_dmabuf(const Endpoints& eps, int fd, uint64_t offset, size_t len, void* base, int iface,
                           int device);
// Closes every registration of `mr` and frees it.
void deregister(MemRegion* mr);

}  // namespace dccl::net
