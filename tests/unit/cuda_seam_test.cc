// The CUDA backend's logic and the data paths over a fake CUDA runtime (fake_cuda.hpp):
// device choice by local rank, memory on another GPU refused, allocations of whole
// pages so exports stay inside them, SYNC_MEMOPS at first export, registrations keyed
// by buffer id, the dma-buf address given to the transport, pinned staging slots, and
// the dma-buf probe's layers (dccl-info --dmabuf-check) on CUDA memory.
// Runs on every machine; the real runtime is exercised by cuda_backend_test on a GPU.
#include <gtest/gtest.h>
#include <rdma/fi_domain.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_seam_util.hpp"
#include "fake_cuda.hpp"
#include "mem/cuda/cuda_api.hpp"
#include "mem/dmabuf_probe.hpp"
#include "mem/direct_path.hpp"
#include "mem/path_choice.hpp"
#include "mem/staged_path.hpp"
#include "mem/viability.hpp"

using namespace dccl;
namespace cu = dccl::mem::cuda;

using namespace cuda_test;

TEST(CudaSeam, DeviceChosenByLocalRank) {
  for (const char* v : {"DCCL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    unsetenv(v);
  std::string how;
  EXPECT_EQ(cu::choose_device(4, 2, &how), 2);
  EXPECT_NE(how.find("current"), std::string::npos) << how;
  {
    EnvGuard env;
    env.set("LOCAL_RANK", "3");
    EXPECT_EQ(cu::choose_device(2, 0, &how), 1);
    EXPECT_NE(how.find("LOCAL_RANK=3"), std::string::npos) << how;
    env.set("DCCL_LOCAL_RANK", "2");  // DirectCCL's own launcher variable comes first
    EXPECT_EQ(cu::choose_device(8, 0, &how), 2);
    env.set("DCCL_LOCAL_RANK", "x");  // not a number: ignored, the next one counts
    EXPECT_EQ(cu::choose_device(2, 0, &how), 1);
  }
}

TEST(CudaSeam, MemoryOnAnotherGpuIsRefusedByName) {
  Installed in(1);
  in.api.current = 0;
  void* other = in.api.malloc(1000);  // the application's memory on GPU 0
  void* mine = in.be->alloc(1000);
  EXPECT_EQ(in.api.current, 0) << "the caller's current device is restored";
  EXPECT_EQ(in.be->unusable_reason(mine), "");
  const std::string why = in.be->unusable_reason(other);
  EXPECT_NE(why.find("on GPU 0"), std::string::npos) << why;
  EXPECT_NE(why.find("drives GPU 1"), std::string::npos) << why;
  EXPECT_EQ(&mem::backend_of(other), in.be.get()) << "device memory of any GPU is never treated as host memory";

  FakeNet net;
  Counters c;
  mem::PathOptions opts;
  opts.rank = 3;
  mem::PathChooser chooser(net, opts, c.get());
  try {
    chooser.select(other, mine, [] { return std::string("allreduce"); });
    FAIL() << "memory on another GPU was accepted";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), dcclInvalidArgument);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allreduce"), std::string::npos) << msg;
    EXPECT_NE(msg.find("GPU 0"), std::string::npos) << msg;
  }
  in.be->free(mine);
  in.api.free(other);
}

TEST(CudaSeam, AllocationsAreWholePagesAndExportsStayInside) {
  Installed in;
  for (size_t n : {size_t{1}, size_t{1000}, kPage, 3 * kPage + 5}) {
    char* p = static_cast<char*>(in.be->alloc(n));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kPage, 0u) << n;
    void* base = nullptr;
    size_t size = 0;
    ASSERT_TRUE(in.be->range_of(p + n - 1, &base, &size));
    EXPECT_EQ(base, p);
    EXPECT_EQ(size % kPage, 0u);
    EXPECT_GE(size, n);
    // A range ending mid-page and starting mid-page: its pages are exported.
    mem::DmaBuf d = in.be->export_dmabuf(p + n / 2, n - n / 2);
    EXPECT_EQ(d.offset, (n / 2) % kPage);
    EXPECT_EQ(d.len, n - n / 2);
    struct stat st {};
    ASSERT_EQ(fstat(d.fd, &st), 0);
    EXPECT_EQ(static_cast<size_t>(st.st_size) % kPage, 0u);
    EXPECT_GE(static_cast<size_t>(st.st_size), d.offset + d.len);
    ASSERT_FALSE(in.api.exports.empty());
    EXPECT_TRUE(in.api.exports.back().inside_one_allocation) << "export reaches outside the runtime's allocation, n=" << n;
    in.be->free(p);
  }
  // Memory the application allocated 256 bytes into a page: its pages would expose a
  // neighbour, so the export is refused with the reason instead.
  void* foreign = in.api.malloc(2 * kPage);
  try {
    in.be->export_dmabuf(foreign, 100);
    FAIL() << "an export reaching outside its allocation was made";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), dcclUnavailable);
    EXPECT_NE(std::string(e.what()).find("outside its allocation"), std::string::npos) << e.what();
  }
  in.api.free(foreign);
}

TEST(CudaSeam, SyncMemopsSetOnceAtFirstExport) {
  Installed in;
  char* p = static_cast<char*>(in.be->alloc(4 * kPage));
  in.be->export_dmabuf(p, kPage);
  in.be->export_dmabuf(p + kPage, kPage);
  in.be->export_dmabuf(p, kPage);
  ASSERT_EQ(in.api.sync_memops.size(), 1u);
  cu::PointerInfo info;
  ASSERT_TRUE(in.api.pointer_info(p, &info));
  EXPECT_EQ(in.api.sync_memops[0], info.base);
  in.be->free(p);
}

TEST(CudaSeam, DirectPathPassesTheDmabufStartAsBaseAddress) {
  // A dma-buf whose first byte sits 256 bytes before the buffer (a whole-page export
  // of memory that starts inside a page): libfabric reads base_addr + offset as the
  // region's address, so base_addr must be the buffer less the offset.
  Installed in(1);
  in.api.misalign = 0;
  char* page = static_cast<char*>(in.api.malloc(4 * kPage));
  char* buf = page + 256;
  struct OffsetBackend : mem::Backend {
    mem::Backend& b;
    char* buf;
    OffsetBackend(mem::Backend& be, char* p) : b(be), buf(p) {}
    mem::Kind kind() const override { return mem::Kind::Cuda; }
    const char* name() const override { return "cuda"; }
    int device() const override { return b.device(); }
    void* alloc(size_t n) override { return b.alloc(n); }
    void free(void* p) override { b.free(p); }
    bool owns(const void* p, size_t n) const override { return b.owns(p, n); }
    bool range_of(const void*, void** base, size_t* size) const override {
      *base = buf;
      *size = 2 * kPage;
      return true;
    }
    mem::Ticket copy_async(void* d, const void* s, size_t n) override { return b.copy_async(d, s, n); }
    mem::Ticket reduce_async(void* d, const void* x, const void* y, size_t n, dcclDataType_t t,
                             dcclRedOp_t o) override {
      return b.reduce_async(d, x, y, n, t, o);
    }
    mem::Ticket avg_async(void* p, size_t n, dcclDataType_t t, int r) override { return b.avg_async(p, n, t, r); }
    mem::Ticket memset_async(void* d, int v, size_t n) override { return b.memset_async(d, v, n); }
    void wait(mem::Ticket t, int64_t ms) override { b.wait(t, ms); }
    bool done(mem::Ticket t) override { return b.done(t); }
    mem::DmaBuf export_dmabuf(const void*, size_t len) override {
      mem::DmaBuf d = b.export_dmabuf(buf - 256, len + 256);
      d.offset = 256;
      d.len = len;
      return d;
    }
  } offset_be(*in.be, buf);
  cu::override_backend(&offset_be);

  FakeNet net;
  Counters c;
  mem::DirectPath path(net, 0, 0, c.get());
  send_once(path, buf + 100, 1000);
  ASSERT_EQ(net.dmabufs.size(), 1u);
  const auto& r = net.dmabufs[0];
  EXPECT_EQ(static_cast<char*>(r.base) + r.offset, buf) << "the registered region must start at the buffer";
  EXPECT_EQ(r.offset, 256u);
  EXPECT_EQ(r.len, 2 * kPage);
  EXPECT_EQ(r.iface, FI_HMEM_CUDA);
  EXPECT_EQ(r.device, 1) << "the device this process drives, not device 0";
  ASSERT_EQ(net.sent.size(), 1u);
  EXPECT_EQ(net.sent[0], buf + 100);
  cu::override_backend(in.be.get());
  in.api.free(page);
}

TEST(CudaSeam, RegistrationNotReusedAfterFreeAndMallocAtTheSameAddress) {
  Installed in;
  in.api.misalign = 0;  // the application's own cudaMalloc'd memory, page-aligned
  FakeNet net;
  Counters c;
  mem::DirectPath path(net, 0, 0, c.get());
  char* a = static_cast<char*>(in.api.malloc(8 * kPage));
  send_once(path, a, 4 * kPage);
  send_once(path, a + kPage, kPage);  // same allocation: a cache hit
  EXPECT_EQ(net.dmabufs.size(), 1u);
  in.api.free(a);  // behind DirectCCL's back: no free hook runs
  char* b = static_cast<char*>(in.api.malloc(8 * kPage));
  ASSERT_EQ(a, b) << "the fake runtime reuses the address";
  send_once(path, b, 4 * kPage);
  EXPECT_EQ(net.dmabufs.size(), 2u) << "a new allocation at the old address reused the stale registration";
  EXPECT_EQ(path.cache_stats().misses, 2u);
  in.api.free(b);
}

TEST(CudaSeam, StagedSlotsArePinnedWithTheDeviceBackend) {
  Installed in;
  FakeNet net;
  Counters c;
  const size_t slot = 64 << 10;
  const int slots = 3;
  {
    mem::StagedPath path(net, 0, 2, slot, slots, c.get());
    char* d = static_cast<char*>(in.be->alloc(200 << 10));
    send_once(path, d, 200 << 10);
    ASSERT_EQ(in.api.host_pinned.size(), 1u) << "the send slots were not page-locked";
    EXPECT_EQ(in.api.host_pinned.begin()->second, slot * slots);
    EXPECT_FALSE(in.be->owns(reinterpret_cast<void*>(in.api.host_pinned.begin()->first)));
    EXPECT_EQ(c.staged.load(), 200u << 10);
    send_once(path, d, 1000);  // the same pool: pinned once
    EXPECT_EQ(in.api.host_pinned.size(), 1u);
    in.be->free(d);
  }
  EXPECT_TRUE(in.api.host_pinned.empty()) << "slots still pinned after the path was destroyed";
  EXPECT_EQ(in.api.host_unregisters, 1);
}

TEST(CudaSeam, CopiesAndReductionsRunOnTheBackendsDevice) {
  Installed in(1);
  in.api.current = 0;
  const size_t n = 1000;
  std::vector<float> a(n), b(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i);
  }
  auto* da = static_cast<float*>(in.be->alloc(n * sizeof(float)));
  auto* db = static_cast<float*>(in.be->alloc(n * sizeof(float)));
  cu::PointerInfo info;
  ASSERT_TRUE(in.api.pointer_info(da, &info));
  EXPECT_EQ(info.ordinal, 1) << "allocated on the backend's device";
  in.be->copy_async(da, a.data(), n * sizeof(float));
  in.be->copy_async(db, b.data(), n * sizeof(float));
  in.be->reduce_async(da, da, db, n, dcclFloat32, dcclSum);
  in.be->wait(in.be->copy_async(got.data(), da, n * sizeof(float)), 1000);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(static_cast<double>(got[i]), 3.0 * static_cast<double>(i));
  EXPECT_EQ(in.api.current, 0) << "the caller's device is restored";
  in.be->free(da);
  in.be->free(db);
}

TEST(CudaSeam, DmabufProbeLayersOverTheFake) {
  Installed in;
  mem::PlatformOverride old = mem::override_platform({FI_VERSION(1, 17), -1});
  std::vector<mem::ProbeLayer> layers;
  std::string why;
  ASSERT_TRUE(mem::probe_dmabuf("cuda", {"tcp"}, &layers, &why)) << why;
  mem::override_platform(old);
  std::map<std::string, std::pair<net::Verdict, std::string>> got;
  for (const auto& l : layers) got[l.name] = {l.verdict, l.detail};
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got["export aligned"].first, net::Verdict::Pass) << got["export aligned"].second;
  EXPECT_NE(got["export aligned"].second.find("dma-buf size 8192"), std::string::npos) << got["export aligned"].second;
  EXPECT_EQ(got["export unaligned"].first, net::Verdict::Pass) << got["export unaligned"].second;
  EXPECT_NE(got["export unaligned"].second.find("offset 100"), std::string::npos);
  EXPECT_EQ(got["SYNC_MEMOPS"].first, net::Verdict::Pass) << got["SYNC_MEMOPS"].second;
  EXPECT_EQ(got["buffer-id invalidation"].first, net::Verdict::Pass) << got["buffer-id invalidation"].second;
  EXPECT_NE(got["buffer-id invalidation"].second.find("buffer id"), std::string::npos);
  EXPECT_EQ(got["trial registration"].first, net::Verdict::NotApplicable);
  EXPECT_EQ(got["trial registration"].second, "libfabric 1.17 has no FI_MR_DMABUF (needs 1.20)");
  // The fake's exports: every one inside its allocation.
  for (const auto& e : in.api.exports) EXPECT_TRUE(e.inside_one_allocation);
}
