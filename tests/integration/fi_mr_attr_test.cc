// The dma-buf registration passes libfabric an fi_mr_attr as long as the newest layout
// (a newer runtime reads fields our 1.17 headers lack), and refuses clearly on a
// runtime without FI_MR_DMABUF instead of handing it a struct it cannot read.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "core/error.hpp"
#include "net/fabric/fi_dmabuf_compat.hpp"
#include "net/transport.hpp"

namespace dccl {
namespace {

using mem::FiMrAttr;

TEST(FiMrAttr, CommonPrefixMatchesHeaders) {
  EXPECT_EQ(offsetof(FiMrAttr, mr_iov), offsetof(fi_mr_attr, mr_iov));
  EXPECT_EQ(offsetof(FiMrAttr, dmabuf), offsetof(fi_mr_attr, mr_iov));  // the 1.20 union
  EXPECT_EQ(offsetof(FiMrAttr, iov_count), offsetof(fi_mr_attr, iov_count));
  EXPECT_EQ(offsetof(FiMrAttr, access), offsetof(fi_mr_attr, access));
  EXPECT_EQ(offsetof(FiMrAttr, offset), offsetof(fi_mr_attr, offset));
  EXPECT_EQ(offsetof(FiMrAttr, requested_key), offsetof(fi_mr_attr, requested_key));
  EXPECT_EQ(offsetof(FiMrAttr, context), offsetof(fi_mr_attr, context));
  EXPECT_EQ(offsetof(FiMrAttr, auth_key_size), offsetof(fi_mr_attr, auth_key_size));
  EXPECT_EQ(offsetof(FiMrAttr, auth_key), offsetof(fi_mr_attr, auth_key));
  EXPECT_EQ(offsetof(FiMrAttr, iface), offsetof(fi_mr_attr, iface));
  EXPECT_EQ(offsetof(FiMrAttr, device), offsetof(fi_mr_attr, device));
  EXPECT_GE(sizeof(FiMrAttr), sizeof(fi_mr_attr));
  // Past the 1.17 struct: what 1.19+ reads.
  EXPECT_GE(offsetof(FiMrAttr, hmem_data), offsetof(fi_mr_attr, device) + sizeof(fi_mr_attr::device));
}

#if defined(__LP64__)
// libfabric 2.x on LP64: 112 bytes, fields at these offsets; 1.17's struct is 80 bytes.
TEST(FiMrAttr, NewestLayoutOnLp64) {
  EXPECT_EQ(offsetof(FiMrAttr, mr_iov), 0u);
  EXPECT_EQ(offsetof(FiMrAttr, iov_count), 8u);
  EXPECT_EQ(offsetof(FiMrAttr, access), 16u);
  EXPECT_EQ(offsetof(FiMrAttr, offset), 24u);
  EXPECT_EQ(offsetof(FiMrAttr, requested_key), 32u);
  EXPECT_EQ(offsetof(FiMrAttr, context), 40u);
  EXPECT_EQ(offsetof(FiMrAttr, auth_key_size), 48u);
  EXPECT_EQ(offsetof(FiMrAttr, auth_key), 56u);
  EXPECT_EQ(offsetof(FiMrAttr, iface), 64u);
  EXPECT_EQ(offsetof(FiMrAttr, device), 72u);
  EXPECT_EQ(offsetof(FiMrAttr, hmem_data), 80u);
  EXPECT_EQ(offsetof(FiMrAttr, page_size), 88u);
  EXPECT_EQ(offsetof(FiMrAttr, base_mr), 96u);
  EXPECT_EQ(offsetof(FiMrAttr, sub_mr_cnt), 104u);
  EXPECT_EQ(offsetof(FiMrAttr, tail_room), 112u);
  EXPECT_EQ(sizeof(fi_mr_dmabuf), 32u);
#if FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION < 19
  EXPECT_EQ(sizeof(fi_mr_attr), 80u);
#endif
}
#endif

TEST(FiMrAttr, ZeroInitialisedBeyondTheHeaders) {
  FiMrAttr a{};
  a.iov_count = 1;
  EXPECT_EQ(a.hmem_data, nullptr);
  EXPECT_EQ(a.page_size, 0u);
  EXPECT_EQ(a.base_mr, nullptr);
  EXPECT_EQ(a.sub_mr_cnt, 0u);
  for (uint64_t w : a.tail_room) EXPECT_EQ(w, 0u);
}

// On a runtime older than 1.20 a dma-buf registration fails with dcclUnavailable naming
// the rank, the operation and the runtime version, before libfabric sees anything.
TEST(FiMrAttr, DmabufOnOldRuntimeFailsClearly) {
  const uint32_t v = fi_version();
  if (v >= mem::kDmabufMinVersion) GTEST_SKIP() << "runtime has FI_MR_DMABUF";
  net::TransportOptions o;
  o.provider = "shm";
  o.want_hmem = true;
  auto t = net::Transport::create(o);
  t->connect({t->local_blob()});
  int fd = memfd_create("dccl-dmabuf-test", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  void* base = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  try {
    t->register_dmabuf(fd, 0, 4096, base, FI_HMEM_CUDA, 0);
    ADD_FAILURE() << "register_dmabuf succeeded on libfabric " << FI_MAJOR(v) << "." << FI_MINOR(v);
  } catch (const core::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), dcclUnavailable) << m;
    EXPECT_NE(m.find("rank 0"), std::string::npos) << m;
    EXPECT_NE(m.find("register dma-buf on shm"), std::string::npos) << m;
    const std::string ver = std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
    EXPECT_NE(m.find("libfabric runtime " + ver), std::string::npos) << m;
    EXPECT_NE(m.find("FI_MR_DMABUF"), std::string::npos) << m;
  }
  munmap(base, 4096);
  close(fd);
}

}  // namespace
}  // namespace dccl
