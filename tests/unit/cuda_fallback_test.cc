// Where the CUDA path falls back instead of failing, over the fake runtime
// (fake_cuda.hpp): a provider that cannot import a dma-buf (the trial registration
// layer), a refused page-lock (pageable staging slots, tried once), a foreign buffer
// not on whole pages (staged); and the direct path's latent issues: the flush after
// the NIC wrote into device memory, a fresh thread's context.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_seam_util.hpp"
#include "mem/viability.hpp"

using namespace cuda_test;

namespace {

// Every platform layer passes (kernel dma-buf, libfabric 1.20) for the test's duration,
// so that the CUDA decision reaches the layers under test.
struct Platform {
  mem::PlatformOverride old;
  Platform() {
    mem::PlatformOverride o;
    o.fabric_version = FI_VERSION(1, 20);
    o.kernel_dmabuf = 1;
    old = mem::override_platform(o);
  }
  ~Platform() { mem::override_platform(old); }
};

mem::PathOptions options(const char* mode) {
  mem::PathOptions o;
  o.rank = 2;
  o.nranks = 2;
  o.mode = mode;
  o.slot_bytes = 64 << 10;
  o.slots = 2;
  return o;
}

// Sends `bytes` of a pattern from device buffer `src` to device buffer `dst` over
// `path` (a loop transport: rank 0 to itself), then reads dst back and compares.
void round_trip(mem::Backend& be, mem::DataPath& path, char* src, char* dst, size_t bytes) {
  std::vector<char> want(bytes), got(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) want[i] = static_cast<char>(i * 131 + 7);
  be.wait(be.copy_async(src, want.data(), bytes), 1000);
  be.wait(be.memset_async(dst, 0, bytes), 1000);
  mem::Xfer s, r;
  path.post_recv(0, dst, bytes, 5, r);
  path.post_send(0, src, bytes, 5, s);
  bool sd = false, rd = false;
  for (int i = 0; i < 10000 && !(sd && rd); ++i) {
    if (!sd) sd = path.progress(s);
    if (!rd) rd = path.progress(r);
  }
  ASSERT_TRUE(sd && rd) << "the transfer did not complete";
  be.wait(be.copy_async(got.data(), dst, bytes), 1000);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), bytes)) << "the data changed on its way";
}

}  // namespace

TEST(CudaFallback, ProviderThatCannotImportDmabufFallsBackToStaging) {
  Platform platform;
  Installed in;
  const size_t bytes = 200 << 10;
  char* a = static_cast<char*>(in.be->alloc(bytes));
  char* b = static_cast<char*>(in.be->alloc(bytes));
  const auto opname = [] { return std::string("allreduce"); };
  {  // The control: a provider that imports it takes the direct path, the trial undone.
    FakeNet net;
    Counters c;
    mem::PathChooser chooser(net, options("auto"), c.get());
    EXPECT_TRUE(chooser.select(a, b, opname).direct);
    ASSERT_GE(net.dmabufs.size(), 1u) << "no trial registration was made";
    EXPECT_EQ(net.dmabufs[0].iface, FI_HMEM_CUDA);
    EXPECT_EQ(net.dmabufs[0].len, kPage);
    EXPECT_EQ(net.deregistrations, 1) << "the trial registration was not undone";
  }
  FakeNet net;
  net.loop = true;
  net.refuse_dmabuf = "fi_mr_regattr failed: Function not implemented (-38)";
  Counters c;
  mem::PathChooser chooser(net, options("auto"), c.get());
  mem::PathSel sel = chooser.select(a, b, opname);
  EXPECT_FALSE(sel.direct) << "a provider that cannot import the dma-buf was given the direct path";
  ASSERT_NE(sel.path, nullptr);
  round_trip(*in.be, *sel.path, a, b, bytes);
  EXPECT_EQ(c.staged.load(), 2 * bytes) << "the bytes did not go through the staging slots";

  // DCCL_PEER_DIRECT=1: the call fails, naming the layer and the provider's reason.
  FakeNet strict_net;
  strict_net.refuse_dmabuf = net.refuse_dmabuf;
  mem::PathChooser strict(strict_net, options("1"), c.get());
  try {
    strict.select(a, b, opname);
    FAIL() << "peer-direct was required and not viable, yet the call went ahead";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), dcclUnavailable);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("trial registration"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Function not implemented"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
  }
  in.be->free(a);
  in.be->free(b);
}

TEST(CudaFallback, TrialRegistrationLayerNamesTheFailure) {
  Installed in;
  FakeNet net;
  net.refuse_dmabuf = "fi_mr_regattr failed: Invalid argument (-22)";
  mem::Layer l = mem::trial_registration_layer(*in.be, net);
  EXPECT_EQ(l.name, "trial registration");
  EXPECT_FALSE(l.pass);
  EXPECT_NE(l.detail.find("Invalid argument"), std::string::npos) << l.detail;
  net.refuse_dmabuf.clear();
  l = mem::trial_registration_layer(*in.be, net);
  EXPECT_TRUE(l.pass) << l.detail;
  ASSERT_EQ(net.dmabufs.size(), 1u);
  EXPECT_EQ(net.dmabufs[0].device, 1) << "registered for the device this process drives";
}

TEST(CudaFallback, RefusedPageLockFallsBackToPageableOnce) {
  Installed in;
  in.api.refuse_host_register = "cudaErrorNotSupported (operation not supported)";
  FakeNet net;
  net.loop = true;
  Counters c;
  const size_t bytes = 200 << 10;
  char* a = static_cast<char*>(in.be->alloc(bytes));
  char* b = static_cast<char*>(in.be->alloc(bytes));
  {
    mem::StagedPath path(net, 0, 1, 64 << 10, 2, c.get());
    for (int i = 0; i < 3; ++i) round_trip(*in.be, path, a, b, bytes);
    EXPECT_TRUE(in.api.host_pinned.empty());
  }
  EXPECT_EQ(in.api.host_register_calls, 1) << "page-locking was tried again after it was refused";
  EXPECT_NE(in.be->pin_refusal().find("cudaErrorNotSupported"), std::string::npos) << in.be->pin_refusal();
  std::vector<char> host(4096);
  EXPECT_FALSE(in.be->pin_host(host.data(), host.size())) << "pin_host must return false, not throw";
  EXPECT_EQ(in.api.host_register_calls, 1);
  EXPECT_EQ(in.api.host_unregisters, 0) << "unpinned memory that was never pinned";
  in.be->free(a);
  in.be->free(b);
}

TEST(CudaFallback, ForeignBufferNotOnWholePagesIsStaged) {
  Platform platform;
  Installed in;
  FakeNet net;
  net.loop = true;
  Counters c;
  mem::PathChooser chooser(net, options("auto"), c.get());
  const auto opname = [] { return std::string("allgather"); };
  const size_t bytes = 100 << 10;
  // The application's cudaMalloc on the device this process drives: 256 bytes into a
  // page, its end mid-page.
  in.api.current = 1;
  char* foreign = static_cast<char*>(in.api.malloc(bytes + 100));
  char* mine = static_cast<char*>(in.be->alloc(bytes));
  EXPECT_TRUE(chooser.select(mine, mine, opname).direct) << "the control: whole pages go direct";
  const std::string why = in.be->direct_unfit(foreign);
  EXPECT_NE(why.find("page boundaries"), std::string::npos) << why;
  mem::PathSel sel;
  ASSERT_NO_THROW(sel = chooser.select(foreign, mine, opname));
  EXPECT_FALSE(sel.direct);
  ASSERT_NE(sel.path, nullptr);
  const size_t before = net.dmabufs.size();
  round_trip(*in.be, *sel.path, foreign, mine, bytes);
  EXPECT_EQ(net.dmabufs.size(), before) << "the foreign buffer was registered";
  for (const auto& e : in.api.exports) EXPECT_TRUE(e.inside_one_allocation);
  // dcclCommRegister of it: valid, and nothing registered.
  void* h = chooser.register_user(foreign, bytes);
  EXPECT_EQ(net.dmabufs.size(), before);
  chooser.deregister_user(h);
  in.be->free(mine);
  in.api.free(foreign);
}

TEST(CudaFallback, DirectReceiveIsFlushedBeforeUse) {
  Installed in;
  FakeNet net;
  Counters c;
  mem::DirectPath path(net, 0, 0, c.get());
  char* d = static_cast<char*>(in.be->alloc(4 * kPage));
  send_once(path, d, kPage);
  EXPECT_EQ(in.api.flushes, 0) << "a send needs no flush";
  mem::Xfer x;
  path.post_recv(1, d, 2 * kPage, 9, x);
  ASSERT_TRUE(path.progress(x));
  EXPECT_EQ(in.api.flushes, 1) << "data the NIC wrote into device memory was not flushed before use";
  in.api.flush_supported = false;  // a device without the flush: the receive still completes
  mem::Xfer y;
  path.post_recv(1, d, kPage, 9, y);
  EXPECT_TRUE(path.progress(y));
  in.be->free(d);
}

TEST(CudaFallback, FreshThreadGetsTheDevicesContext) {
  Installed in(0);  // the device a fresh thread's cudaGetDevice already answers
  char* p = static_cast<char*>(in.be->alloc(2 * kPage));
  std::string err;
  int fd = -1;
  std::thread t([&] {
    try {
      fd = in.be->export_dmabuf(p, kPage).fd;
      in.be->flush_remote_writes();
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  t.join();
  EXPECT_EQ(err, "") << "a driver call on a fresh thread ran without a current context";
  EXPECT_GE(fd, 0);
  in.be->free(p);
}
