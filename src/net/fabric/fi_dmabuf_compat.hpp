// libfabric's fi_mr_attr across versions, and FI_MR_DMABUF for headers older than 1.20.
//
// The domain is opened with the runtime library's API version (fi_version()), and
// fi_mr_regattr reads every field that version defines. Built against 1.17 headers,
// `struct fi_mr_attr` is the 1.17 size (80 bytes on LP64), while a newer runtime reads
// further: hmem_data (1.19), the mr_iov/dmabuf union (1.20, same place as mr_iov),
// page_size (1.22), base_mr and sub_mr_cnt (2.x). So the dma-buf registration passes
// FiMrAttr below: the newest layout we know, plus zeroed tail room for fields a later
// release may append (zero is "unused" for every such field so far). The common prefix
// must match the headers' fi_mr_attr; the static_asserts check it at build time.
//
// Chosen over requesting a fixed API version when opening the domain: FI_MR_DMABUF
// needs API >= 1.20, and 1.20 already reads past the 1.17 struct (hmem_data), so a
// pinned version would not remove the need for the larger struct; it would only hide
// newer providers' behaviour.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/uio.h>

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

// struct fi_mr_attr as libfabric 2.x lays it out (include/rdma/fi_domain.h).
struct FiMrAttr {
  union {
    const iovec* mr_iov;
    const fi_mr_dmabuf* dmabuf;  // with FI_MR_DMABUF (1.20)
  };
  size_t iov_count;
  uint64_t access;
  uint64_t offset;
  uint64_t requested_key;
  void* context;
  size_t auth_key_size;
  uint8_t* auth_key;
  fi_hmem_iface iface;
  union {
    uint64_t reserved;
    int cuda;
    int ze;
    int neuron;
    int synapseai;
    int rocr;
  } device;
  // Fields 1.17 lacks.
  void* hmem_data;       // 1.19
  size_t page_size;      // 1.22
  const fid_mr* base_mr; // 2.x
  size_t sub_mr_cnt;     // 2.x
  // Zeroed room for fields appended after 2.x.
  uint64_t tail_room[8];
};

// The prefix shared with the headers we build against (1.17 or newer). Used by the net
// layer too (header-only, no dependency on the rest of mem/).
#define DCCL_SAME_OFFSET(field) \
  static_assert(offsetof(FiMrAttr, field) == offsetof(fi_mr_attr, field), "fi_mr_attr." #field " moved")
DCCL_SAME_OFFSET(mr_iov);
DCCL_SAME_OFFSET(iov_count);
DCCL_SAME_OFFSET(access);
DCCL_SAME_OFFSET(offset);
DCCL_SAME_OFFSET(requested_key);
DCCL_SAME_OFFSET(context);
DCCL_SAME_OFFSET(auth_key_size);
DCCL_SAME_OFFSET(auth_key);
DCCL_SAME_OFFSET(iface);
DCCL_SAME_OFFSET(device);
#undef DCCL_SAME_OFFSET
static_assert(sizeof(FiMrAttr::device) == sizeof(fi_mr_attr::device), "fi_mr_attr.device changed size");
static_assert(sizeof(FiMrAttr) >= sizeof(fi_mr_attr), "FiMrAttr shorter than the headers' fi_mr_attr");
#if FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION < 19
// 1.17/1.18 headers: the struct ends where hmem_data begins.
static_assert(sizeof(fi_mr_attr) == offsetof(FiMrAttr, hmem_data), "fi_mr_attr does not end before hmem_data");
#endif

// fi_mr_regattr of a dma-buf on `domain` for sends and receives: attr zeroed and as
// long as the newest fi_mr_attr (the runtime reads the fields of the API version
// the domain was opened with, which may be newer than our headers). Returns its rc.
inline int regattr_dmabuf(fid_domain* domain, const fi_mr_dmabuf& dmabuf, int iface, int device, uint64_t key,
                          fid_mr** mr) {
  FiMrAttr attr{};
  attr.dmabuf = &dmabuf;
  attr.iov_count = 1;
  attr.access = FI_SEND | FI_RECV;
  attr.requested_key = key;
  attr.iface = static_cast<fi_hmem_iface>(iface);
  attr.device.cuda = device;
  return fi_mr_regattr(domain, reinterpret_cast<const fi_mr_attr*>(&attr), FI_MR_DMABUF, mr);
}

}  // namespace dccl::mem
