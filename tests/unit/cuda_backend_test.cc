// The CUDA backend on a real GPU: skipped where the library was built without CUDA
// or the machine has no device (and failed instead when DCCL_REQUIRE_CUDA=1, as
// scripts/gpu-check sets); otherwise round trips, every dtype x op reduction
// against the host kernels, NaN in max/min from either side, dma-buf exports of
// aligned and unaligned ranges, buffer ids that change across free + malloc,
// page-locking or its refusal, the copy streams' order, event-timed copies, and a
// fresh thread's export and flush.
// The backend's logic is also tested without a GPU in cuda_seam_test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"

using namespace dccl;

namespace {

constexpr int64_t kWaitMs = 60000;

mem::Backend* cuda_or_skip_reason(std::string* reason) {
  mem::Backend* b = mem::cuda_backend();
  if (!b) *reason = mem::cuda_unavailable_reason();
  return b;
}

bool cuda_required() {
  const char* v = getenv("DCCL_REQUIRE_CUDA");
  return v && std::string(v) == "1";
}

#define CUDA_BACKEND_OR_SKIP(var)                                                          \
  std::string skip_reason_;                                                                \
  mem::Backend* var = cuda_or_skip_reason(&skip_reason_);                                  \
  if (!var && cuda_required()) FAIL() << "CUDA backend unavailable: " << skip_reason_;      \
  if (!var) GTEST_SKIP() << "CUDA backend unavailable: " << skip_reason_

double get(const std::vector<uint8_t>& v, size_t i, dcclDataType_t dt) {
  const uint8_t* p = v.data() + i * core::dtype_size(dt);
  auto rd = [p](auto x) { std::memcpy(&x, p, sizeof x); return x; };
  switch (dt) {
    case dcclInt8: return rd(int8_t{});
    case dcclUint8: return rd(uint8_t{});
    case dcclInt32: return rd(int32_t{});
    case dcclUint32: return rd(uint32_t{});
    case dcclInt64: return static_cast<double>(rd(int64_t{}));
    case dcclUint64: return static_cast<double>(rd(uint64_t{}));
    case dcclFloat16: return kernels::half_to_float(rd(uint16_t{}));
    case dcclBfloat16: return kernels::bf16_to_float(rd(uint16_t{}));
    case dcclFloat32: return rd(float{});
    case dcclFloat64: return rd(double{});
    default: return 0;
  }
}

void put(std::vector<uint8_t>& v, size_t i, dcclDataType_t dt, double x) {
  uint8_t* p = v.data() + i * core::dtype_size(dt);
  auto wr = [p](auto y) { std::memcpy(p, &y, sizeof y); };
  switch (dt) {
    case dcclInt8: wr(static_cast<int8_t>(x)); break;
    case dcclUint8: wr(static_cast<uint8_t>(x)); break;
    case dcclInt32: wr(static_cast<int32_t>(x)); break;
    case dcclUint32: wr(static_cast<uint32_t>(x)); break;
    case dcclInt64: wr(static_cast<int64_t>(x)); break;
    case dcclUint64: wr(static_cast<uint64_t>(x)); break;
    case dcclFloat16: wr(kernels::float_to_half(static_cast<float>(x))); break;
    case dcclBfloat16: wr(kernels::float_to_bf16(static_cast<float>(x))); break;
    case dcclFloat32: wr(static_cast<float>(x)); break;
    case dcclFloat64: wr(x); break;
    default: break;
  }
}

// Relative tolerance between the device and host kernels (0: bit exact).
double tolerance(dcclDataType_t dt, dcclRedOp_t op) {
  if (op != dcclAvg) return 0;  // the same operation rounded the same way
  switch (dt) {
    case dcclFloat16: return 1.0 / 1024;
    case dcclBfloat16: return 1.0 / 128;
    case dcclFloat32: return 1e-6;
    case dcclFloat64: return 1e-14;
    default: return 0;
  }
}

}  // namespace

TEST(CudaBackend, AllocOwnsRoundTrip) {
  CUDA_BACKEND_OR_SKIP(b);
  EXPECT_EQ(b->kind(), mem::Kind::Cuda);
  for (size_t n : {size_t{1}, size_t{4097}, (size_t{1} << 20) + 3, size_t{8} << 20}) {
    std::vector<uint8_t> src(n), out(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    for (auto& x : src) x = static_cast<uint8_t>(rng());
    char* d1 = static_cast<char*>(b->alloc(n));
    char* d2 = static_cast<char*>(b->alloc(n));
    EXPECT_TRUE(b->owns(d1, n));
    EXPECT_FALSE(b->owns(src.data()));
    EXPECT_EQ(&mem::backend_of(d1), b);
    void* base = nullptr;
    size_t size = 0;
    ASSERT_TRUE(b->range_of(d1 + n - 1, &base, &size));
    EXPECT_EQ(base, d1);
    EXPECT_GE(size, n);
    b->copy_async(d1, src.data(), n);
    b->copy_async(d2, d1, n);
    mem::Ticket t = b->copy_async(out.data(), d2, n);
    b->wait(t, kWaitMs);
    EXPECT_TRUE(b->done(t));
    EXPECT_EQ(0, std::memcmp(src.data(), out.data(), n)) << "size " << n;
    b->wait(b->memset_async(d2, 0x3c, n), kWaitMs);
    b->wait(b->copy_async(out.data(), d2, n), kWaitMs);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 0x3c);
    b->free(d1);
    b->free(d2);
  }
}

TEST(CudaBackend, ReduceEveryDtypeAndOpMatchesHost) {
  CUDA_BACKEND_OR_SKIP(b);
  const size_t n = 100003;
  for (int t = 0; t < dcclNumTypes; ++t) {
    const auto dt = static_cast<dcclDataType_t>(t);
    const size_t es = core::dtype_size(dt), bytes = n * es;
    const bool is_unsigned = dt == dcclUint8 || dt == dcclUint32 || dt == dcclUint64;
    for (int o = 0; o < dcclNumOps; ++o) {
      const auto op = static_cast<dcclRedOp_t>(o);
      std::vector<uint8_t> a(bytes), c(bytes), want(bytes), got(bytes);
      std::mt19937 rng(t * 16 + o);
      std::uniform_int_distribution<int> small(is_unsigned ? 0 : -8, 8);
      for (size_t i = 0; i < n; ++i) {
        put(a, i, dt, small(rng) + (i % 4) * 0.25);
        put(c, i, dt, small(rng));
      }
      kernels::reduce(want.data(), a.data(), c.data(), n, dt, op);
      if (op == dcclAvg) kernels::finish_avg(want.data(), n, dt, 2);

      void* da = b->alloc(bytes);
      void* dc = b->alloc(bytes);
      b->copy_async(da, a.data(), bytes);
      b->copy_async(dc, c.data(), bytes);
      b->reduce_async(da, da, dc, n, dt, op);
      if (op == dcclAvg) b->avg_async(da, n, dt, 2);
      b->wait(b->copy_async(got.data(), da, bytes), kWaitMs);
      const double tol = tolerance(dt, op);
      for (size_t i = 0; i < n; ++i) {
        const double w = get(want, i, dt), g = get(got, i, dt);
        ASSERT_LE(std::fabs(w - g), tol * std::fabs(w))
            << core::dtype_name(dt) << " " << core::op_name(op) << " i=" << i;
      }
      b->free(da);
      b->free(dc);
    }
  }
}

TEST(CudaBackend, MaxMinPropagateNanFromEitherSide) {
  CUDA_BACKEND_OR_SKIP(b);
  const double nan = std::nan("");
  // Pairs (a, b): NaN first, NaN second, both, neither.
  const double as[] = {nan, 1.0, nan, 2.0, -0.5, nan, 3.0, nan};
  const double bs[] = {1.0, nan, nan, 1.0, nan, -7.0, nan, nan};
  const size_t n = sizeof as / sizeof as[0];
  for (dcclDataType_t dt : {dcclFloat16, dcclBfloat16, dcclFloat32, dcclFloat64}) {
    for (dcclRedOp_t op : {dcclMax, dcclMin}) {
      const size_t bytes = n * core::dtype_size(dt);
      std::vector<uint8_t> a(bytes), c(bytes), want(bytes), got(bytes);
      for (size_t i = 0; i < n; ++i) {
        put(a, i, dt, as[i]);
        put(c, i, dt, bs[i]);
      }
      kernels::reduce(want.data(), a.data(), c.data(), n, dt, op);
      void* da = b->alloc(bytes);
      void* dc = b->alloc(bytes);
      b->copy_async(da, a.data(), bytes);
      b->copy_async(dc, c.data(), bytes);
      b->reduce_async(da, da, dc, n, dt, op);
      b->wait(b->copy_async(got.data(), da, bytes), kWaitMs);
      for (size_t i = 0; i < n; ++i) {
        const double ref = std::isnan(as[i]) || std::isnan(bs[i]) ? nan : (op == dcclMax ? std::max(as[i], bs[i])
                                                                                          : std::min(as[i], bs[i]));
        const double g = get(got, i, dt), h = get(want, i, dt);
        EXPECT_EQ(std::isnan(g), std::isnan(ref)) << core::dtype_name(dt) << " " << core::op_name(op) << " i=" << i;
        EXPECT_EQ(std::isnan(h), std::isnan(ref)) << "host kernel: " << core::dtype_name(dt) << " i=" << i;
        if (!std::isnan(ref)) {
          EXPECT_EQ(g, ref) << core::dtype_name(dt) << " " << core::op_name(op) << " i=" << i;
        }
      }
      b->free(da);
      b->free(dc);
    }
  }
}

TEST(CudaBackend, AllocationsArePageAligned) {
  CUDA_BACKEND_OR_SKIP(b);
  for (size_t n : {size_t{1}, size_t{300}, size_t{5000}, size_t{3} << 20}) {
    char* d = static_cast<char*>(b->alloc(n));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 4096, 0u) << n;
    void* base = nullptr;
    size_t size = 0;
    ASSERT_TRUE(b->range_of(d, &base, &size));
    EXPECT_EQ(size % 4096, 0u);
    b->free(d);
  }
}

TEST(CudaBackend, DmabufExportOfAlignedAndUnalignedRanges) {
  CUDA_BACKEND_OR_SKIP(b);
  const size_t n = size_t{4} << 20;
  char* d = static_cast<char*>(b->alloc(n));
  struct Case {
    size_t off, len;
  } cases[] = {{0, n}, {0, 4096}, {100, 5000}, {4096 + 17, 3 * 4096}, {n - 10, 10}};
  for (const Case& k : cases) {
    try {
      mem::DmaBuf db = b->export_dmabuf(d + k.off, k.len);
      ASSERT_GE(db.fd, 0);
      EXPECT_EQ(db.len, k.len);
      EXPECT_EQ(db.offset, k.off % 4096);
      // The dma-buf covers whole pages from the page of the range's start.
      const off_t fd_size = lseek(db.fd, 0, SEEK_END);
      const size_t want = (k.off % 4096 + k.len + 4095) / 4096 * 4096;
      EXPECT_EQ(static_cast<size_t>(fd_size), want) << "off " << k.off << " len " << k.len;
    } catch (const core::Error& e) {
      // No dma-buf on this machine (driver/kernel): the reason must say so.
      EXPECT_EQ(e.code(), dcclUnavailable) << e.what();
      EXPECT_NE(std::string(e.what()), "");
      printf("dma-buf export unavailable: %s\n", e.what());
      break;
    }
  }
  b->free(d);
}

TEST(CudaBackend, BufferIdChangesAcrossFreeAndMalloc) {
  CUDA_BACKEND_OR_SKIP(b);
  void* d1 = b->alloc(1 << 20);
  const uint64_t id1 = b->buffer_id(d1);
  EXPECT_NE(id1, 0u);
  EXPECT_EQ(b->buffer_id(static_cast<char*>(d1) + 1000), id1);
  b->free(d1);
  void* d2 = b->alloc(1 << 20);
  EXPECT_NE(b->buffer_id(d2), id1) << (d1 == d2 ? "same address" : "new address");
  EXPECT_EQ(b->unusable_reason(d2), "");
  b->free(d2);
}

// Pinned where the system allows page-locking; where it refuses (gVisor), pin_host
// says so with the reason instead of throwing, and copies of pageable memory work.
TEST(CudaBackend, PinnedHostMemory) {
  CUDA_BACKEND_OR_SKIP(b);
  std::vector<char> host(1 << 20, 7);
  const bool pinned = b->pin_host(host.data(), host.size());
  EXPECT_EQ(pinned, b->pin_refusal().empty()) << b->pin_refusal();
  char* d = static_cast<char*>(b->alloc(host.size()));
  b->wait(b->copy_async(d, host.data(), host.size()), kWaitMs);
  std::vector<char> back(host.size());
  b->wait(b->copy_async(back.data(), d, back.size()), kWaitMs);
  EXPECT_EQ(back, host);
  if (pinned) b->unpin_host(host.data());
  b->free(d);
}

// Copy-out and copy-in run on their own streams: large enough that a missing event
// dependency shows as wrong data. x = x + y; copy x out while z comes in; z = z + x.
TEST(CudaBackend, CopyStreamsKeepTheOrder) {
  CUDA_BACKEND_OR_SKIP(b);
  const size_t n = 16 << 20;  // floats: 64 MiB per buffer
  std::vector<float> hx(n, 1.0f), hy(n, 2.0f), hz(n, 4.0f), out(n, 0.0f), zz(n, 0.0f);
  auto* x = static_cast<float*>(b->alloc(n * sizeof(float)));
  auto* y = static_cast<float*>(b->alloc(n * sizeof(float)));
  auto* z = static_cast<float*>(b->alloc(n * sizeof(float)));
  b->copy_async(x, hx.data(), n * sizeof(float));
  b->copy_async(y, hy.data(), n * sizeof(float));
  b->reduce_async(x, x, y, n, dcclFloat32, dcclSum);
  const mem::Ticket t_out = b->copy_async(out.data(), x, n * sizeof(float));
  b->copy_async(z, hz.data(), n * sizeof(float));
  b->reduce_async(z, z, x, n, dcclFloat32, dcclSum);
  b->wait(b->copy_async(zz.data(), z, n * sizeof(float)), kWaitMs);
  EXPECT_TRUE(b->done(t_out));
  for (size_t i = 0; i < n; i += 4093) {
    ASSERT_EQ(out[i], 3.0f) << i;
    ASSERT_EQ(zz[i], 7.0f) << i;
  }
  for (float* p : {x, y, z}) b->free(p);
}

TEST(CudaBackend, CopiesTimedWithEvents) {
  CUDA_BACKEND_OR_SKIP(b);
  const size_t bytes = 8 << 20;
  std::vector<char> host(bytes, 5), back(bytes, 0);
  char* d = static_cast<char*>(b->alloc(bytes));
  char* d2 = static_cast<char*>(b->alloc(bytes));
  mem::Backend::Copy up{d, host.data(), bytes};
  EXPECT_GT(b->time_copies_us(&up, 1, kWaitMs), 0.0);
  mem::Backend::Copy both[] = {{back.data(), d, bytes}, {d2, host.data(), bytes}};
  EXPECT_GT(b->time_copies_us(both, 2, kWaitMs), 0.0);
  EXPECT_EQ(back, host);
  std::vector<char> back2(bytes, 0);
  b->wait(b->copy_async(back2.data(), d2, bytes), kWaitMs);
  EXPECT_EQ(back2, host);
  b->free(d);
  b->free(d2);
}

// A thread that made no CUDA call: the export (a driver call) finds the context.
TEST(CudaBackend, ExportAndFlushFromAFreshThread) {
  CUDA_BACKEND_OR_SKIP(b);
  char* d = static_cast<char*>(b->alloc(1 << 20));
  std::string err;
  std::thread t([&] {
    try {
      b->flush_remote_writes();
      if (mem::cuda_unavailable_reason().empty()) {
        try {
          b->export_dmabuf(d, 4096);
        } catch (const core::Error& e) {
          if (e.code() != dcclUnavailable) throw;  // no dma-buf support is not this test's concern
        }
      }
    } catch (const std::exception& e) {
      err = e.what();
    }
  });
  t.join();
  EXPECT_EQ(err, "");
  b->free(d);
}

TEST(CudaBackend, UnavailableWithoutDevice) {
  // Holds everywhere: either a backend, or a reason and no crash.
  mem::Backend* b = mem::cuda_backend();
  if (b) {
    EXPECT_EQ(mem::cuda_unavailable_reason(), "");
  } else {
    EXPECT_FALSE(mem::cuda_unavailable_reason().empty());
  }
}
