// The sim backend: an emulated accelerator whose memory the host cannot touch.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "mem/backend.hpp"
#include "mem/sim/sim_views.hpp"

using namespace dccl;
using mem::Backend;

namespace {

constexpr int64_t kWaitMs = 30000;

template <class F>
dcclResult_t code_of(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const core::Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return dcclSuccess;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

Backend& sim() { return mem::sim_backend(); }

}  // namespace

TEST(SimBackend, AllocFreeOwnsRangeOf) {
  Backend& b = sim();
  EXPECT_EQ(b.kind(), mem::Kind::Sim);
  EXPECT_STREQ(b.name(), "sim");
  char* p = static_cast<char*>(b.alloc(1000));
  char* q = static_cast<char*>(b.alloc(1 << 20));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 4096, 0u);
  EXPECT_TRUE(b.owns(p));
  EXPECT_TRUE(b.owns(p, 1000));
  EXPECT_TRUE(b.owns(p + 999, 1));
  EXPECT_FALSE(b.owns(p, 1001));
  EXPECT_FALSE(b.owns(p + 1000, 1));
  int on_stack = 0;
  EXPECT_FALSE(b.owns(&on_stack));
  void* base = nullptr;
  size_t size = 0;
  ASSERT_TRUE(b.range_of(p + 500, &base, &size));
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 1000u);
  ASSERT_TRUE(b.range_of(q + 12345, &base, &size));
  EXPECT_EQ(base, q);
  EXPECT_EQ(size, size_t{1} << 20);
  EXPECT_TRUE(mem::sim_in_reservation(p));
  EXPECT_EQ(&mem::backend_of(p), &b);
  EXPECT_EQ(&mem::backend_of(&on_stack), &mem::host_backend());
  b.free(p);
  EXPECT_FALSE(b.owns(p));
  EXPECT_FALSE(b.range_of(p, &base, &size));
  EXPECT_EQ(&mem::backend_of(p), &b);  // still in the reservation: sim reports misuse
  b.free(q);
  b.free(nullptr);
  EXPECT_EQ(code_of([&] { b.alloc(0); }), dcclInvalidArgument);
  EXPECT_EQ(code_of([&] { b.alloc(size_t{1} << 62); }), dcclInvalidArgument);
}

TEST(SimBackend, FreeOfInteriorOrDeadPointerRejected) {
  Backend& b = sim();
  char* p = static_cast<char*>(b.alloc(4096));
  std::string what;
  EXPECT_EQ(code_of([&] { b.free(p + 16); }, &what), dcclInvalidArgument);
  EXPECT_NE(what.find("inside the allocation"), std::string::npos) << what;
  EXPECT_TRUE(b.owns(p, 4096));  // untouched by the failed free
  b.free(p);
  EXPECT_EQ(code_of([&] { b.free(p); }), dcclInvalidArgument);  // double free
  int x;
  EXPECT_EQ(code_of([&] { b.free(&x); }), dcclInvalidArgument);
}

TEST(SimBackend, RoundTripHostSimSimHost) {
  Backend& b = sim();
  for (size_t n : {size_t{1}, size_t{3}, size_t{255}, size_t{256}, size_t{4095}, size_t{4096},
                   size_t{65537}, (size_t{1} << 20) + 7, size_t{8} << 20}) {
    auto src = pattern(n, static_cast<uint32_t>(n));
    std::vector<uint8_t> out(n, 0);
    void* d1 = b.alloc(n);
    void* d2 = b.alloc(n);
    mem::Ticket t1 = b.copy_async(d1, src.data(), n);
    mem::Ticket t2 = b.copy_async(d2, d1, n);
    mem::Ticket t3 = b.copy_async(out.data(), d2, n);
    EXPECT_LT(t1, t2);
    EXPECT_LT(t2, t3);
    b.wait(t3, kWaitMs);
    EXPECT_TRUE(b.done(t1));
    EXPECT_EQ(0, std::memcmp(out.data(), src.data(), n)) << "size " << n;
    // The backend's own view holds the same bytes.
    EXPECT_EQ(0, std::memcmp(mem::sim_shadow(d2), src.data(), n)) << "size " << n;
    b.free(d1);
    b.free(d2);
  }
}

TEST(SimBackend, ReduceFloat32SumMatchesFloat64Reference) {
  Backend& b = sim();
  const size_t n = 100003;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1000.f, 1000.f);
  std::vector<float> x(n), y(n), r(n);
  for (size_t i = 0; i < n; ++i) x[i] = u(rng), y[i] = u(rng);
  const size_t bytes = n * sizeof(float);
  void* dx = b.alloc(bytes);
  void* dy = b.alloc(bytes);
  void* dr = b.alloc(bytes);
  b.copy_async(dx, x.data(), bytes);
  b.copy_async(dy, y.data(), bytes);
  b.reduce_async(dr, dx, dy, n, dcclFloat32, dcclSum);
  b.reduce_async(dx, dx, dy, n, dcclFloat32, dcclSum);  // in place (dst aliases a)
  b.wait(b.copy_async(r.data(), dr, bytes), kWaitMs);
  for (size_t i = 0; i < n; ++i) {
    const float ref = static_cast<float>(static_cast<double>(x[i]) + static_cast<double>(y[i]));
    ASSERT_EQ(r[i], ref) << "i=" << i;
  }
  b.wait(b.copy_async(r.data(), dx, bytes), kWaitMs);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(r[i], static_cast<float>(static_cast<double>(x[i]) + y[i])) << "i=" << i;
  // avg over 4 "ranks".
  b.wait(b.avg_async(dr, n, dcclFloat32, 4), kWaitMs);
  b.wait(b.copy_async(r.data(), dr, bytes), kWaitMs);
  for (size_t i = 0; i < n; i += 97) {
    const double ref = (static_cast<double>(x[i]) + y[i]) / 4;
    ASSERT_NEAR(r[i], ref, std::fabs(ref) * 1e-6 + 1e-6) << "i=" << i;
  }
  b.free(dx);
  b.free(dy);
  b.free(dr);
}

TEST(SimBackend, ReduceBf16SumMatchesFloat64Reference) {
  Backend& b = sim();
  const size_t n = 65536 + 3;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-64.f, 64.f);
  std::vector<uint16_t> x(n), y(n), r(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = kernels::float_to_bf16(u(rng));
    y[i] = kernels::float_to_bf16(u(rng));
  }
  const size_t bytes = n * 2;
  void* dx = b.alloc(bytes);
  void* dy = b.alloc(bytes);
  b.copy_async(dx, x.data(), bytes);
  b.copy_async(dy, y.data(), bytes);
  b.reduce_async(dy, dx, dy, n, dcclBfloat16, dcclSum);  // dst aliases b
  b.wait(b.copy_async(r.data(), dy, bytes), kWaitMs);
  for (size_t i = 0; i < n; ++i) {
    const double ref = static_cast<double>(kernels::bf16_to_float(x[i])) + kernels::bf16_to_float(y[i]);
    const double got = kernels::bf16_to_float(r[i]);
    // Round to nearest: within half a bf16 ulp (8 significant bits) of the exact sum.
    const double half_ulp = ref == 0 ? 0 : std::ldexp(1.0, std::ilogb(ref) - 8);
    ASSERT_LE(std::fabs(got - ref), half_ulp) << "i=" << i << " ref " << ref << " got " << got;
  }
  b.free(dx);
  b.free(dy);
}

TEST(SimBackend, ReduceRejectsHostPointersAndPartialOverlap) {
  Backend& b = sim();
  float* d = static_cast<float*>(b.alloc(1024 * sizeof(float)));
  std::vector<float> h(1024);
  EXPECT_EQ(code_of([&] { b.reduce_async(d, d, h.data(), 1024, dcclFloat32, dcclSum); }),
            dcclInvalidArgument);
  EXPECT_EQ(code_of([&] { b.memset_async(h.data(), 0, 16); }), dcclInvalidArgument);
  EXPECT_EQ(code_of([&] { b.reduce_async(d + 1, d, d, 512, dcclFloat32, dcclSum); }),
            dcclInvalidArgument);
  EXPECT_EQ(code_of([&] { b.reduce_async(d, d, d, 2048, dcclFloat32, dcclSum); }),
            dcclInvalidArgument);  // beyond the allocation
  EXPECT_EQ(code_of([&] { b.copy_async(d, h.data(), 8192); }), dcclInvalidArgument);
  EXPECT_EQ(code_of([&] { b.reduce_async(d, d, d, 4, static_cast<dcclDataType_t>(42), dcclSum); }),
            dcclInvalidArgument);
  b.free(d);
}

TEST(SimBackend, Memset) {
  Backend& b = sim();
  const size_t n = (3 << 20) + 11;
  char* d = static_cast<char*>(b.alloc(n));
  std::vector<uint8_t> out(n);
  b.memset_async(d, 0xab, n);
  b.memset_async(d + 100, 0x11, 50);
  b.wait(b.copy_async(out.data(), d, n), kWaitMs);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], (i >= 100 && i < 150) ? 0x11 : 0xab) << "i=" << i;
  b.free(d);
}

TEST(SimBackend, TicketsAreOrderedAndWaitTimesOut) {
  Backend& b = sim();
  const size_t n = size_t{64} << 20;
  void* d = b.alloc(n);
  mem::Ticket last = 0;
  for (int i = 0; i < 6; ++i) {
    mem::Ticket t = b.memset_async(d, i, n);
    EXPECT_GT(t, last);
    last = t;
  }
  std::string what;
  EXPECT_EQ(code_of([&] { b.wait(last, 0); }, &what), dcclTimeout);
  EXPECT_NE(what.find("ticket " + std::to_string(last)), std::string::npos) << what;
  EXPECT_NE(what.find("memset"), std::string::npos) << what;
  b.wait(last, kWaitMs);
  for (mem::Ticket t = last - 5; t <= last; ++t) EXPECT_TRUE(b.done(t));
  EXPECT_FALSE(b.done(last + 1000));
  EXPECT_EQ(code_of([&] { b.wait(last + 1000, 10); }), dcclInvalidArgument);
  uint8_t probe = 0;
  b.wait(b.copy_async(&probe, static_cast<char*>(d) + n - 1, 1), kWaitMs);
  EXPECT_EQ(probe, 5);
  b.free(d);
}

TEST(SimBackend, ExportedDmabufShowsDeviceBytes) {
  Backend& b = sim();
  mem::sim_set_dmabuf_enabled(true);
  const size_t n = 300000;
  (void)b.alloc(300);  // the buffer need not start the arena or a page
  char* d = static_cast<char*>(b.alloc(n));
  auto src = pattern(n, 99);
  b.wait(b.copy_async(d, src.data(), n), kWaitMs);
  const size_t off_in = 1000, len = 200000;
  mem::DmaBuf db = b.export_dmabuf(d + off_in, len);
  ASSERT_GE(db.fd, 0);
  EXPECT_EQ(db.len, len);
  // What the transport does: map the fd at the page below the offset.
  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t map_off = db.offset / page * page;
  const size_t map_len = db.offset - map_off + len;
  void* m = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, db.fd, map_off);
  ASSERT_NE(m, MAP_FAILED) << std::strerror(errno);
  char* view = static_cast<char*>(m) + (db.offset - map_off);
  EXPECT_EQ(0, std::memcmp(view, src.data() + off_in, len));
  // A NIC write through the mapping is seen by the device.
  std::memset(view, 0x5a, 64);
  std::vector<uint8_t> back(64);
  b.wait(b.copy_async(back.data(), d + off_in, 64), kWaitMs);
  for (uint8_t v : back) ASSERT_EQ(v, 0x5a);
  munmap(m, map_len);
  EXPECT_EQ(code_of([&] { b.export_dmabuf(d, n + 1); }), dcclInvalidArgument);
  b.free(d);
}

TEST(SimBackend, DmabufSwitchMakesExportUnavailable) {
  Backend& b = sim();
  void* d = b.alloc(4096);
  mem::sim_set_dmabuf_enabled(false);
  std::string what;
  EXPECT_EQ(code_of([&] { b.export_dmabuf(d, 4096); }, &what), dcclUnavailable);
  EXPECT_NE(what.find("DCCL_SIM_DMABUF=0"), std::string::npos) << what;
  mem::sim_set_dmabuf_enabled(true);
  EXPECT_NO_THROW(b.export_dmabuf(d, 4096));
  b.free(d);
  EXPECT_EQ(code_of([] { mem::host_backend().export_dmabuf(nullptr, 1); }), dcclUnavailable);
}

TEST(SimBackendDeathTest, EnvironmentSwitchDisablesExport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // In a fresh process, so that the variable is read at first use.
  EXPECT_EXIT(
      {
        setenv("DCCL_SIM_DMABUF", "0", 1);
        void* d = mem::sim_backend().alloc(64);
        int rc = code_of([&] { mem::sim_backend().export_dmabuf(d, 64); }) == dcclUnavailable ? 0 : 1;
        _exit(rc);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(SimBackendDeathTest, HostDereferenceFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // libinfinipath (pulled in by libfabric's psm2 provider) installs a SIGSEGV
        // handler that prints a backtrace and exits 1: restore the default action.
        signal(SIGSEGV, SIG_DFL);
        volatile char* p = static_cast<volatile char*>(mem::sim_backend().alloc(64));
        char c = *p;  // device memory is not host memory
        _exit(c == 42 ? 3 : 4);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST(SimBackend, FreeHookSeesBaseAndSize) {
  Backend& b = sim();
  void* seen = nullptr;
  size_t seen_size = 0;
  int id = mem::add_free_hook([&](mem::Kind k, const void* base, size_t size) {
    if (k == mem::Kind::Sim) seen = const_cast<void*>(base), seen_size = size;
  });
  void* d = b.alloc(777);
  b.free(d);
  mem::remove_free_hook(id);
  EXPECT_EQ(seen, d);
  EXPECT_EQ(seen_size, 777u);
}

TEST(SimBackend, ConcurrentAllocFree) {
  Backend& b = sim();
  std::vector<std::thread> th;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<void*, size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 16 && rng() % 3) {
          size_t n = 1 + rng() % 200000;
          live.emplace_back(b.alloc(n), n);
        } else if (!live.empty()) {
          auto [p, n] = live.back();
          live.pop_back();
          void* base;
          size_t size;
          if (!b.range_of(static_cast<char*>(p) + n - 1, &base, &size) || base != p || size != n) ++bad;
          b.free(p);
        }
      }
      for (auto& [p, n] : live) b.free(p);
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(SimBackend, CopyBandwidth64MiB) {
  Backend& b = sim();
  const size_t n = size_t{64} << 20;
  std::vector<uint8_t> h(n, 1);
  void* d = b.alloc(n);
  for (int pass = 0; pass < 3; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    b.wait(b.copy_async(d, h.data(), n), kWaitMs);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto t1 = std::chrono::steady_clock::now();
    b.wait(b.copy_async(h.data(), d, n), kWaitMs);
    double s2 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    printf("[ info ] pass %d: host->sim 64 MiB %.2f GB/s, sim->host %.2f GB/s\n", pass,
           n / s / 1e9, n / s2 / 1e9);
  }
  b.free(d);
}

TEST(HostBackend, SynchronousWorkAndOwnAllocationsOnly) {
  Backend& h = mem::host_backend();
  EXPECT_EQ(h.kind(), mem::Kind::Host);
  float* a = static_cast<float*>(h.alloc(1000 * sizeof(float)));
  float* b = static_cast<float*>(h.alloc(1000 * sizeof(float)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_TRUE(h.owns(a + 999, sizeof(float)));
  EXPECT_FALSE(h.owns(a + 999, 2 * sizeof(float)));
  std::vector<float> user(1000, 2.f);
  EXPECT_FALSE(h.owns(user.data()));  // host memory, but not the backend's
  EXPECT_EQ(&mem::backend_of(user.data()), &h);
  for (int i = 0; i < 1000; ++i) a[i] = static_cast<float>(i);
  mem::Ticket t = h.copy_async(b, user.data(), 1000 * sizeof(float));
  EXPECT_TRUE(h.done(t));
  h.reduce_async(a, a, b, 1000, dcclFloat32, dcclSum);
  EXPECT_EQ(a[10], 12.f);
  h.wait(h.avg_async(a, 1000, dcclFloat32, 2), 0);
  EXPECT_EQ(a[10], 6.f);
  h.memset_async(b, 0, 1000 * sizeof(float));
  EXPECT_EQ(b[999], 0.f);
  void* s = sim().alloc(64);
  EXPECT_EQ(code_of([&] { h.copy_async(a, s, 64); }), dcclInvalidArgument);  // not host memory
  sim().free(s);
  EXPECT_EQ(code_of([&] { h.free(a + 1); }), dcclInvalidArgument);
  EXPECT_EQ(code_of([&] { h.free(user.data()); }), dcclInvalidArgument);
  h.free(a);
  h.free(b);
  EXPECT_FALSE(h.owns(a));
}
