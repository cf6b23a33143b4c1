// dcclRedOpCreatePreMulSum / dcclRedOpDestroy and dcclCommRegister /
// dcclCommDeregister on 1-4 ranks (threads of this process), host and sim memory.
// Results are checked against float64 references computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"
#include "rank_threads.hpp"

namespace {

std::vector<dcclComm_t> make_comms(int n, dcclConfig_t* cfg = nullptr) {
  dcclUniqueId id;
  EXPECT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
  std::vector<dcclComm_t> cs(static_cast<size_t>(n), nullptr);
  on_ranks(n, [&](int r) {
    EXPECT_EQ(dcclCommInitRankConfig(&cs[static_cast<size_t>(r)], n, id, r, cfg), dcclSuccess) << last_error();
  });
  return cs;
}

[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new ShmApiEnv("20"));

double input(int r, size_t i) { return static_cast<double>(static_cast<int>(i % 23) - 11) + 0.25 * r; }
double scalar_of(int r) { return 0.5 * (r + 1); }

// allreduce, reduce (root n-1) and reduce-scatter with a PreMulSum whose scalar
// differs per rank, in float32 and float64, immediate and read at run time.
TEST(PreMulSum, ScalesEachRanksInputBeforeTheSum) {
  for (int n : {1, 2, 3, 4}) {
    auto cs = make_comms(n);
    on_ranks(n, [&](int r) {
      dcclComm_t c = cs[static_cast<size_t>(r)];
      const size_t count = 3000;  // divisible by 1..4 ranks for reduce-scatter
      for (dcclDataType_t dt : {dcclFloat32, dcclFloat64}) {
        for (dcclScalarResidence_t res : {dcclScalarHostImmediate, dcclScalarDevice}) {
          const size_t es = dt == dcclFloat32 ? 4 : 8;
          auto put = [&](std::vector<char>& v, size_t i, double x) {
            if (dt == dcclFloat32) {
              float f = static_cast<float>(x);
              memcpy(v.data() + i * es, &f, 4);
            } else {
              memcpy(v.data() + i * es, &x, 8);
            }
          };
          auto get = [&](const std::vector<char>& v, size_t i) {
            if (dt == dcclFloat32) {
              float f;
              memcpy(&f, v.data() + i * es, 4);
              return static_cast<double>(f);
            }
            double d;
            memcpy(&d, v.data() + i * es, 8);
            return d;
          };
          std::vector<char> scalar(8);
          // Run-time residence: created with a wrong value, corrected before the call.
          put(scalar, 0, res == dcclScalarDevice ? 99.0 : scalar_of(r));
          dcclRedOp_t op;
          ASSERT_EQ(dcclRedOpCreatePreMulSum(&op, scalar.data(), dt, res, c), dcclSuccess) << last_error();
          EXPECT_GE(static_cast<int>(op), static_cast<int>(dcclNumOps));
          if (res == dcclScalarDevice) put(scalar, 0, scalar_of(r));
          else put(scalar, 0, 77.0);  // immediate: copied at creation, later changes do not count
          std::vector<char> in(count * es), out(count * es);
          for (size_t i = 0; i < count; ++i) put(in, i, input(r, i));
          auto ref = [&](size_t i) {
            double s = 0;
            for (int q = 0; q < n; ++q) s += scalar_of(q) * input(q, i);
            return s;
          };
          const double tol = dt == dcclFloat32 ? 1e-4 : 1e-12;
          ASSERT_EQ(dcclAllReduce(in.data(), out.data(), count, dt, op, c, nullptr), dcclSuccess) << last_error();
          for (size_t i = 0; i < count; ++i) ASSERT_NEAR(get(out, i), ref(i), tol) << "allreduce n " << n << " i " << i;
          std::vector<char> inplace = in;
          ASSERT_EQ(dcclAllReduce(inplace.data(), inplace.data(), count, dt, op, c, nullptr), dcclSuccess);
          for (size_t i = 0; i < count; ++i) ASSERT_NEAR(get(inplace, i), ref(i), tol) << "in place";
          ASSERT_EQ(dcclReduce(in.data(), out.data(), count, dt, op, n - 1, c, nullptr), dcclSuccess) << last_error();
          if (r == n - 1) {
            for (size_t i = 0; i < count; ++i) ASSERT_NEAR(get(out, i), ref(i), tol) << "reduce";
          }
          const size_t rc = count / static_cast<size_t>(n);
          ASSERT_EQ(dcclReduceScatter(in.data(), out.data(), rc, dt, op, c, nullptr), dcclSuccess) << last_error();
          for (size_t i = 0; i < rc; ++i)
            ASSERT_NEAR(get(out, i), ref(static_cast<size_t>(r) * rc + i), tol) << "reduce-scatter";
          // The input was not changed by the scaling.
          for (size_t i = 0; i < count; ++i) ASSERT_NEAR(get(in, i), input(r, i), 1e-6);
          ASSERT_EQ(dcclRedOpDestroy(op, c), dcclSuccess) << last_error();
        }
      }
    });
    destroy_all(cs);
  }
}

// Integer and half types, and sim (device) memory with the scalar in sim memory.
TEST(PreMulSum, IntegersHalvesAndDeviceMemory) {
  const int n = 2;
  auto cs = make_comms(n);
  on_ranks(n, [&](int r) {
    dcclComm_t c = cs[static_cast<size_t>(r)];
    const size_t count = 1 << 16;
    // int32: scalar r + 2 on rank r.
    int32_t s = r + 2;
    dcclRedOp_t op;
    ASSERT_EQ(dcclRedOpCreatePreMulSum(&op, &s, dcclInt32, dcclScalarHostImmediate, c), dcclSuccess);
    std::vector<int32_t> x(count), y(count);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<int32_t>(i % 1000) - 500 + r;
    ASSERT_EQ(dcclAllReduce(x.data(), y.data(), count, dcclInt32, op, c, nullptr), dcclSuccess) << last_error();
    for (size_t i = 0; i < count; ++i) {
      int64_t ref = 0;
      for (int q = 0; q < n; ++q) ref += static_cast<int64_t>(q + 2) * (static_cast<int64_t>(i % 1000) - 500 + q);
      ASSERT_EQ(y[i], ref) << i;
    }
    ASSERT_EQ(dcclRedOpDestroy(op, c), dcclSuccess);
    // float16: scalar 0.5, values exact in half precision.
    const uint16_t half_half = 0x3800;  // 0.5
    ASSERT_EQ(dcclRedOpCreatePreMulSum(&op, const_cast<uint16_t*>(&half_half), dcclFloat16, dcclScalarHostImmediate, c),
              dcclSuccess);
    std::vector<uint16_t> h(count, 0x4000), ho(count);  // 2.0 -> 0.5 * 2.0 * n = n
    ASSERT_EQ(dcclAllReduce(h.data(), ho.data(), count, dcclFloat16, op, c, nullptr), dcclSuccess) << last_error();
    for (size_t i = 0; i < count; i += 7) ASSERT_EQ(ho[i], 0x4000) << "expected 2.0 (0x4000), i " << i;
    ASSERT_EQ(dcclRedOpDestroy(op, c), dcclSuccess);
    // sim memory: data and the scalar in device memory, read when the call runs.
    void *d = nullptr, *ds = nullptr;
    ASSERT_EQ(dcclMemAlloc(&d, count * 4, dcclMemSim), dcclSuccess);
    ASSERT_EQ(dcclMemAlloc(&ds, 4, dcclMemSim), dcclSuccess);
    float fs = 3.0f + static_cast<float>(r);
    ASSERT_EQ(dcclMemcpy(ds, &fs, 4), dcclSuccess);
    ASSERT_EQ(dcclRedOpCreatePreMulSum(&op, ds, dcclFloat32, dcclScalarDevice, c), dcclSuccess);
    std::vector<float> f(count);
    for (size_t i = 0; i < count; ++i) f[i] = static_cast<float>(i % 64) + static_cast<float>(r);
    ASSERT_EQ(dcclMemcpy(d, f.data(), count * 4), dcclSuccess);
    ASSERT_EQ(dcclAllReduce(d, d, count, dcclFloat32, op, c, nullptr), dcclSuccess) << last_error();
    ASSERT_EQ(dcclMemcpy(f.data(), d, count * 4), dcclSuccess);
    for (size_t i = 0; i < count; ++i) {
      double ref = 0;
      for (int q = 0; q < n; ++q) ref += (3.0 + q) * (static_cast<double>(i % 64) + q);
      ASSERT_NEAR(f[i], ref, 1e-3) << i;
    }
    ASSERT_EQ(dcclRedOpDestroy(op, c), dcclSuccess);
    EXPECT_EQ(dcclMemFree(d), dcclSuccess);
    EXPECT_EQ(dcclMemFree(ds), dcclSuccess);
  });
  destroy_all(cs);
}

TEST(PreMulSum, BadUseIsRefused) {
  auto cs = make_comms(1);
  dcclComm_t c = cs[0];
  float s = 2, v = 1;
  dcclRedOp_t op;
  EXPECT_EQ(dcclRedOpCreatePreMulSum(nullptr, &s, dcclFloat32, dcclScalarHostImmediate, c), dcclInvalidArgument);
  EXPECT_EQ(dcclRedOpCreatePreMulSum(&op, nullptr, dcclFloat32, dcclScalarHostImmediate, c), dcclInvalidArgument);
  EXPECT_NE(last_error().find("scalar is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(dcclRedOpCreatePreMulSum(&op, &s, static_cast<dcclDataType_t>(42), dcclScalarHostImmediate, c),
            dcclInvalidArgument);
  EXPECT_EQ(dcclRedOpCreatePreMulSum(&op, &s, dcclFloat32, static_cast<dcclScalarResidence_t>(9), c), dcclInvalidArgument);
  EXPECT_EQ(dcclRedOpCreatePreMulSum(&op, &s, dcclFloat32, dcclScalarHostImmediate, nullptr), dcclInvalidArgument);
  ASSERT_EQ(dcclRedOpCreatePreMulSum(&op, &s, dcclFloat32, dcclScalarHostImmediate, c), dcclSuccess);
  double dv = 1;
  EXPECT_EQ(dcclAllReduce(&dv, &dv, 1, dcclFloat64, op, c, nullptr), dcclInvalidArgument);  // made for float32
  EXPECT_NE(last_error().find("created for float32"), std::string::npos) << last_error();
  ASSERT_EQ(dcclAllReduce(&v, &v, 1, dcclFloat32, op, c, nullptr), dcclSuccess);
  EXPECT_EQ(v, 2.0f);
  EXPECT_EQ(dcclRedOpDestroy(dcclSum, c), dcclInvalidArgument);
  EXPECT_NE(last_error().find("built-in"), std::string::npos) << last_error();
  ASSERT_EQ(dcclRedOpDestroy(op, c), dcclSuccess);
  EXPECT_EQ(dcclRedOpDestroy(op, c), dcclInvalidArgument);  // twice
  EXPECT_EQ(dcclAllReduce(&v, &v, 1, dcclFloat32, op, c, nullptr), dcclInvalidArgument);  // destroyed
  EXPECT_NE(last_error().find("not a dcclRedOp_t or a live op"), std::string::npos) << last_error();
  // Slots are reused lowest first: ranks creating in the same order agree on values.
  dcclRedOp_t a, b;
  ASSERT_EQ(dcclRedOpCreatePreMulSum(&a, &s, dcclFloat32, dcclScalarHostImmediate, c), dcclSuccess);
  ASSERT_EQ(dcclRedOpCreatePreMulSum(&b, &s, dcclFloat32, dcclScalarHostImmediate, c), dcclSuccess);
  EXPECT_EQ(a, op);
  EXPECT_EQ(static_cast<int>(b), static_cast<int>(a) + 1);
  destroy_all(cs);
}

dcclStats_t stats_of(dcclComm_t c) {
  dcclStats_t s;
  EXPECT_EQ(dcclCommGetStats(c, &s), dcclSuccess);
  return s;
}

// Registered up front, sim memory over peer-direct: the calls then make no
// registration and miss nothing; unregistered memory is registered at its first
// call; after deregistering, the next call registers again.
TEST(CommRegister, RegisteredBuffersNeedNoRegistrationPerCall) {
  dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
  cfg.peerDirect = 1;
  auto cs = make_comms(2, &cfg);
  on_ranks(2, [&](int r) {
    dcclComm_t c = cs[static_cast<size_t>(r)];
    const size_t count = 1 << 18;
    void *sb = nullptr, *rb = nullptr, *other = nullptr;
    ASSERT_EQ(dcclMemAlloc(&sb, count * 4, dcclMemSim), dcclSuccess);
    ASSERT_EQ(dcclMemAlloc(&rb, count * 4, dcclMemSim), dcclSuccess);
    ASSERT_EQ(dcclMemAlloc(&other, count * 4, dcclMemSim), dcclSuccess);
    const dcclStats_t s0 = stats_of(c);
    void *hs = nullptr, *hr = nullptr;
    ASSERT_EQ(dcclCommRegister(c, sb, count * 4, &hs), dcclSuccess) << last_error();
    ASSERT_EQ(dcclCommRegister(c, rb, count * 4, &hr), dcclSuccess) << last_error();
    ASSERT_NE(hs, nullptr);
    const dcclStats_t s1 = stats_of(c);
    EXPECT_EQ(s1.registrations - s0.registrations, 2u) << "registered up front";
    const int peer = 1 - r;
    for (int k = 0; k < 5; ++k) {
      std::vector<float> h(count, static_cast<float>(10 * r + k));
      ASSERT_EQ(dcclMemcpy(sb, h.data(), count * 4), dcclSuccess);
      ASSERT_EQ(dcclGroupStart(), dcclSuccess);
      ASSERT_EQ(dcclSend(sb, count, dcclFloat32, peer, c, nullptr), dcclSuccess) << last_error();
      ASSERT_EQ(dcclRecv(rb, count, dcclFloat32, peer, c, nullptr), dcclSuccess) << last_error();
      ASSERT_EQ(dcclGroupEnd(), dcclSuccess) << last_error();
      ASSERT_EQ(dcclMemcpy(h.data(), rb, count * 4), dcclSuccess);
      for (size_t i = 0; i < count; i += 1001) ASSERT_EQ(h[i], static_cast<float>(10 * peer + k));
    }
    const dcclStats_t s2 = stats_of(c);
    EXPECT_EQ(s2.registrations, s1.registrations) << "no registration per call";
    EXPECT_EQ(s2.regCacheMisses, s1.regCacheMisses);
    EXPECT_GE(s2.regCacheHits - s1.regCacheHits, 10u);
    EXPECT_EQ(s2.bytesSentDirect - s1.bytesSentDirect, 5 * count * 4);
    // Memory not registered: its first call registers it.
    ASSERT_EQ(dcclGroupStart(), dcclSuccess);
    ASSERT_EQ(dcclSend(other, count, dcclFloat32, peer, c, nullptr), dcclSuccess);
    ASSERT_EQ(dcclRecv(rb, count, dcclFloat32, peer, c, nullptr), dcclSuccess);
    ASSERT_EQ(dcclGroupEnd(), dcclSuccess) << last_error();
    EXPECT_EQ(stats_of(c).registrations - s2.registrations, 1u);
    // A second registration of rb (its second half), deregistered: the first still
    // holds the allocation, so calls on rb register nothing.
    void* hr2 = nullptr;
    ASSERT_EQ(dcclCommRegister(c, static_cast<char*>(rb) + count * 2, count * 2, &hr2), dcclSuccess) << last_error();
    ASSERT_EQ(dcclCommDeregister(c, hr2), dcclSuccess) << last_error();
    const dcclStats_t s25 = stats_of(c);
    ASSERT_EQ(dcclGroupStart(), dcclSuccess);
    ASSERT_EQ(dcclSend(sb, count, dcclFloat32, peer, c, nullptr), dcclSuccess);
    ASSERT_EQ(dcclRecv(rb, count, dcclFloat32, peer, c, nullptr), dcclSuccess);
    ASSERT_EQ(dcclGroupEnd(), dcclSuccess) << last_error();
    EXPECT_EQ(stats_of(c).registrations, s25.registrations) << "rb is still registered through hr";
    EXPECT_EQ(stats_of(c).regCacheMisses, s25.regCacheMisses);
    // Deregistered: the next call on it registers it again.
    ASSERT_EQ(dcclCommDeregister(c, hs), dcclSuccess) << last_error();
    const dcclStats_t s3 = stats_of(c);
    ASSERT_EQ(dcclGroupStart(), dcclSuccess);
    ASSERT_EQ(dcclSend(sb, count, dcclFloat32, peer, c, nullptr), dcclSuccess);
    ASSERT_EQ(dcclRecv(rb, count, dcclFloat32, peer, c, nullptr), dcclSuccess);
    ASSERT_EQ(dcclGroupEnd(), dcclSuccess) << last_error();
    EXPECT_EQ(stats_of(c).registrations - s3.registrations, 1u);
    EXPECT_EQ(dcclCommDeregister(c, hs), dcclInvalidArgument);  // twice
    EXPECT_NE(last_error().find("not returned by dcclCommRegister"), std::string::npos) << last_error();
    EXPECT_EQ(dcclCommDeregister(c, hr), dcclSuccess);
    EXPECT_EQ(dcclMemFree(sb), dcclSuccess);
    EXPECT_EQ(dcclMemFree(rb), dcclSuccess);
    EXPECT_EQ(dcclMemFree(other), dcclSuccess);
  });
  destroy_all(cs);
}

TEST(CommRegister, HostMemoryAndBadInput) {
  for (int n : {1, 3}) {
    auto cs = make_comms(n);
    on_ranks(n, [&](int r) {
      dcclComm_t c = cs[static_cast<size_t>(r)];
      std::vector<double> x(4096, r + 1.0);
      void* h = nullptr;
      ASSERT_EQ(dcclCommRegister(c, x.data(), x.size() * 8, &h), dcclSuccess) << last_error();
      ASSERT_NE(h, nullptr);
      ASSERT_EQ(dcclAllReduce(x.data(), x.data(), x.size(), dcclFloat64, dcclSum, c, nullptr), dcclSuccess);
      EXPECT_EQ(x[17], n * (n + 1) / 2.0);
      EXPECT_EQ(dcclCommDeregister(c, h), dcclSuccess);
      void* hh = nullptr;
      EXPECT_EQ(dcclCommRegister(c, nullptr, 8, &hh), dcclInvalidArgument);
      EXPECT_NE(last_error().find("rank " + std::to_string(r) + ": dcclCommRegister: buff is NULL"), std::string::npos)
          << last_error();
      EXPECT_EQ(dcclCommRegister(c, x.data(), 0, &hh), dcclInvalidArgument);
      EXPECT_EQ(dcclCommRegister(c, x.data(), 8, nullptr), dcclInvalidArgument);
      EXPECT_EQ(dcclCommDeregister(c, nullptr), dcclInvalidArgument);
      int junk = 0;
      EXPECT_EQ(dcclCommDeregister(c, &junk), dcclInvalidArgument);
    });
    // A registration left at destroy is released with the communicator.
    std::vector<float> y(64);
    void* h = nullptr;
    ASSERT_EQ(dcclCommRegister(cs[0], y.data(), 256, &h), dcclSuccess);
    destroy_all(cs);
  }
}

}  // namespace
