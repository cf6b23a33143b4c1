// FI_MR_DMABUF and struct fi_mr_dmabuf appeared in libfabric 1.20. Built against
// older headers, declare them locally (layout as in 1.20: the struct sits in a
// union with mr_iov inside fi_mr_attr) and use them only when fi_version() at run
// time is >= 1.20 and the domain was opened asking for API 1.20.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>

#ifndef FI_MR_DMABUF
#define FI_MR_DMABUF (1ULL << 40)
#define DCCL_LOCAL_FI_MR_DMABUF 1
struct fi_mr_dmabuf {
  int fd;
  uint64_t offset;
  size_t len;
  void* base_addr;
};
#endif

namespace dccl::mem {
constexpr uint32_t kDmabufMinVersion = FI_VERSION(1, 20);
}
