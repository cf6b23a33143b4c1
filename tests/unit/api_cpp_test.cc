// The C++ API (dccl/dccl.hpp): RAII Communicator and Stream, std::span
// collectives, Group, stats() and dccl::Error. Ranks are threads of this
// process; every result is compared with a reference computed here (float64
// for floating types, exact for integers).
#include <gtest/gtest.h>

#include <array>
#include <barrier>
#include <cstring>
#include <random>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.hpp"
#include "kernels/reduce.hpp"
#include "rank_threads.hpp"

namespace {

[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new ShmApiEnv("10"));

// Makes an n-rank world and runs body(comm) on one thread per rank. The ranks
// meet before destroying their communicators (see InProcessDestroyRace below).
void with_world(int n, const std::function<void(dccl::Communicator&)>& body) {
  const dcclUniqueId id = dccl::Communicator::unique_id();
  std::barrier<> done(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      std::unique_ptr<dccl::Communicator> c;
      try {
        c = std::make_unique<dccl::Communicator>(n, id, r);
        EXPECT_EQ(c->rank(), r);
        EXPECT_EQ(c->size(), n);
        body(*c);
      } catch (const dccl::Error& e) {
        ADD_FAILURE() << "rank " << r << ": dccl::Error " << e.code() << ": " << e.what();
      }
      done.arrive_and_wait();
    });
  for (auto& t : ts) t.join();
}

// Input element i of rank r; exactly representable in every type used below.
double input(int r, size_t i) {
  return static_cast<double>((i * 13 + static_cast<size_t>(r) * 5) % 41) - 20.0 + 0.5 * r;
}

template <class T>
T as(double v) {
  return static_cast<T>(std::is_integral_v<T> ? std::floor(v) : v);
}

template <class T>
void expect_near(T got, double want, const std::string& what) {
  if constexpr (std::is_integral_v<T>)
    EXPECT_EQ(static_cast<double>(got), want) << what;
  else
    EXPECT_NEAR(static_cast<double>(got), want, 1e-6 * (1 + std::abs(want))) << what;
}

class Cpp : public ::testing::TestWithParam<int> {};

template <class T>
void all_reduce_case(dccl::Communicator& c, size_t count) {
  const int n = c.size(), r = c.rank();
  std::vector<T> in(count), out(count), inplace(count), mx(count);
  for (size_t i = 0; i < count; ++i) in[i] = inplace[i] = as<T>(input(r, i));
  c.all_reduce(std::span<const T>(in), std::span<T>(out));
  c.all_reduce(std::span<T>(inplace));  // in place
  c.all_reduce(std::span<const T>(in), std::span<T>(mx), dcclMax);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0, best = -1e300;
    for (int q = 0; q < n; ++q) {
      sum += static_cast<double>(as<T>(input(q, i)));
      best = std::max(best, static_cast<double>(as<T>(input(q, i))));
    }
    expect_near(out[i], sum, "sum at " + std::to_string(i));
    expect_near(inplace[i], sum, "in-place sum at " + std::to_string(i));
    expect_near(mx[i], best, "max at " + std::to_string(i));
  }
}

TEST_P(Cpp, AllReduceFloatInt32Double) {
  with_world(GetParam(), [](dccl::Communicator& c) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{70001}}) {
      all_reduce_case<float>(c, count);
      all_reduce_case<int32_t>(c, count);
      all_reduce_case<double>(c, count);
    }
  });
}

TEST_P(Cpp, BroadcastReduceAllGatherReduceScatterAllToAll) {
  with_world(GetParam(), [](dccl::Communicator& c) {
    const int n = c.size(), r = c.rank();
    const size_t un = static_cast<size_t>(n), ur = static_cast<size_t>(r), k = 513;
    for (int root = 0; root < n; ++root) {
      std::vector<double> b(k, r == root ? 0 : -7);
      for (size_t i = 0; r == root && i < k; ++i) b[i] = input(root, i);
      c.broadcast(std::span<double>(b), root);
      for (size_t i = 0; i < k; ++i) ASSERT_EQ(b[i], input(root, i)) << "broadcast root " << root;

      std::vector<int32_t> in(k), out(r == root ? k : 0);
      for (size_t i = 0; i < k; ++i) in[i] = as<int32_t>(input(r, i));
      c.reduce(std::span<const int32_t>(in), std::span<int32_t>(out), root);
      for (size_t i = 0; i < out.size(); ++i) {
        int64_t want = 0;
        for (int q = 0; q < n; ++q) want += as<int32_t>(input(q, i));
        ASSERT_EQ(out[i], want) << "reduce root " << root << " at " << i;
      }
    }

    std::vector<float> mine(k), all(k * un);
    for (size_t i = 0; i < k; ++i) mine[i] = as<float>(input(r, i));
    c.all_gather(std::span<const float>(mine), std::span<float>(all));
    for (size_t q = 0; q < un; ++q)
      for (size_t i = 0; i < k; ++i) ASSERT_EQ(all[q * k + i], as<float>(input(static_cast<int>(q), i)));

    std::vector<double> rs_in(k * un), rs_out(k);
    for (size_t i = 0; i < rs_in.size(); ++i) rs_in[i] = input(r, i);
    c.reduce_scatter(std::span<const double>(rs_in), std::span<double>(rs_out));
    for (size_t i = 0; i < k; ++i) {
      double want = 0;
      for (int q = 0; q < n; ++q) want += input(q, ur * k + i);
      expect_near(rs_out[i], want, "reduce_scatter at " + std::to_string(i));
    }

    // Block p of rank q's input is (q, p, i); rank r receives block r from everyone.
    std::vector<int64_t> a_in(k * un), a_out(k * un, -1);
    for (size_t p = 0; p < un; ++p)
      for (size_t i = 0; i < k; ++i) a_in[p * k + i] = static_cast<int64_t>((ur * 1000 + p) * 100000 + i);
    c.all_to_all(std::span<const int64_t>(a_in), std::span<int64_t>(a_out));
    for (size_t q = 0; q < un; ++q)
      for (size_t i = 0; i < k; ++i) ASSERT_EQ(a_out[q * k + i], static_cast<int64_t>((q * 1000 + ur) * 100000 + i));
  });
}

TEST_P(Cpp, SendRecvInGroupAndBarrier) {
  with_world(GetParam(), [](dccl::Communicator& c) {
    const int n = c.size(), r = c.rank();
    const int to = (r + 1) % n, from = (r + n - 1) % n;
    std::vector<uint32_t> out(4099), in(4099, 0), back(4099, 0);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint32_t>(r * 1000000 + static_cast<int>(i));
    {
      dccl::Group g;
      c.send(std::span<const uint32_t>(out), to);
      c.recv(std::span<uint32_t>(in), from);
      g.end();
    }
    for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(in[i], static_cast<uint32_t>(from * 1000000) + i);
    {  // the other direction, on a stream
      dccl::Stream s;
      dccl::Group g;
      c.send(std::span<const uint32_t>(out), from, &s);
      c.recv(std::span<uint32_t>(back), to, &s);
      g.end();
      s.synchronize();
      EXPECT_TRUE(s.done());
    }
    for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], static_cast<uint32_t>(to * 1000000) + i);
    c.barrier();
    dccl::Stream s;
    c.barrier(&s);
    s.synchronize();
  });
}

TEST_P(Cpp, StreamsAndStats) {
  with_world(GetParam(), [](dccl::Communicator& c) {
    const int n = c.size();
    const dcclStats_t before = c.stats();
    dccl::Stream s;
    EXPECT_TRUE(s.done()) << "a new stream is idle";
    std::vector<std::vector<float>> bufs(5, std::vector<float>(20000));
    for (size_t b = 0; b < bufs.size(); ++b)
      for (size_t i = 0; i < bufs[b].size(); ++i) bufs[b][i] = static_cast<float>(b + i % 7) + c.rank();
    for (auto& b : bufs) c.all_reduce(std::span<float>(b), dcclSum, &s);
    s.synchronize();
    EXPECT_TRUE(s.done());
    for (size_t b = 0; b < bufs.size(); ++b)
      for (size_t i = 0; i < bufs[b].size(); i += 97)
        ASSERT_EQ(bufs[b][i], static_cast<float>(n * static_cast<double>(b + i % 7) + n * (n - 1) / 2.0));
    const dcclStats_t after = c.stats();
    EXPECT_GE(after.ops, before.ops + bufs.size());
    // Host buffers take neither the peer-direct nor the staged path: nothing staged.
    EXPECT_EQ(after.bytesRelayedHost, before.bytesRelayedHost);
    EXPECT_EQ(after.hostCopies, before.hostCopies);

    // Host memory the transport sends and receives in place counts as direct,
    // each byte once on each side (before: sent_direct stayed 0 for host buffers).
    const int r = c.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<int64_t> out(3001 + static_cast<size_t>(r)), in(3001 + static_cast<size_t>(prev));
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(i) * 7 + r;
    const dcclStats_t b2 = c.stats();
    {
      dccl::Group g;
      c.send(out, next);
      c.recv(in, prev);
      g.end();
    }
    const dcclStats_t a2 = c.stats();
    for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(in[i], static_cast<int64_t>(i) * 7 + prev);
    EXPECT_EQ(a2.bytesSentDirect - b2.bytesSentDirect, out.size() * sizeof(int64_t));
    EXPECT_EQ(a2.bytesRecvDirect - b2.bytesRecvDirect, in.size() * sizeof(int64_t));
    EXPECT_EQ(a2.bytesRelayedHost, b2.bytesRelayedHost);
  });
}

// Bad calls throw dccl::Error with the right code on one rank alone (nothing is
// communicated), and the communicator keeps working.
TEST_P(Cpp, ErrorsCarryTheirCode) {
  with_world(GetParam(), [](dccl::Communicator& c) {
    const int n = c.size(), r = c.rank();
    if (r == n - 1) {
      std::vector<float> a(8), b(9);
      try {
        c.all_reduce(std::span<const float>(a), std::span<float>(b));
        ADD_FAILURE() << "size mismatch accepted";
      } catch (const dccl::Error& e) {
        EXPECT_EQ(e.code(), dcclInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("size"), std::string::npos) << e.what();
      }
      for (int root : {-1, n}) {
        try {
          c.broadcast(std::span<float>(a), root);
          ADD_FAILURE() << "root " << root << " accepted";
        } catch (const dccl::Error& e) {
          EXPECT_EQ(e.code(), dcclInvalidArgument);
          EXPECT_NE(std::string(e.what()).find("root"), std::string::npos) << e.what();
        }
      }
      EXPECT_THROW(c.all_gather(std::span<const float>(a), std::span<float>(b)), dccl::Error);
      EXPECT_THROW(c.reduce_scatter(std::span<const float>(b), std::span<float>(a)), dccl::Error);
      EXPECT_THROW(c.send(std::span<const float>(a), n), dccl::Error);
      try {
        c.all_reduce(std::span<float>(a), static_cast<dcclRedOp_t>(dcclNumOps));
        ADD_FAILURE() << "bad op accepted";
      } catch (const dccl::Error& e) {
        EXPECT_EQ(e.code(), dcclInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("op"), std::string::npos) << e.what();
      }
    }
    std::vector<int32_t> v(100, r + 1);
    c.all_reduce(std::span<int32_t>(v));
    for (int32_t x : v) ASSERT_EQ(x, n * (n + 1) / 2);
  });
}

// Non-const vectors and arrays as sources, float16/bfloat16 element types, and
// the untyped overloads. Inputs are small multiples of 0.25, exact in float16
// and bfloat16, so the float64 reference sums are exact too.
TEST_P(Cpp, NonConstSourcesHalfTypesAndUntypedOverloads) {
  with_world(GetParam(), [](dccl::Communicator& c) {
    const int n = c.size(), r = c.rank();
    const size_t un = static_cast<size_t>(n), k = 301;
    auto val = [](int q, size_t i) { return 0.25 * static_cast<double>((i * 7 + static_cast<size_t>(q) * 3) % 29) - 3.0; };
    auto sum = [&](size_t i) {
      double s = 0;
      for (int q = 0; q < n; ++q) s += val(q, i);
      return s;
    };

    std::vector<float> f_in(k), f_out(k);  // a non-const vector as the source
    for (size_t i = 0; i < k; ++i) f_in[i] = static_cast<float>(val(r, i));
    c.all_reduce(f_in, f_out);
    for (size_t i = 0; i < k; ++i) ASSERT_EQ(static_cast<double>(f_out[i]), sum(i)) << "float at " << i;

    std::vector<dccl::half> h(k);
    std::vector<dccl::bfloat16> b_in(k), b_out(k);
    for (size_t i = 0; i < k; ++i) {
      h[i] = dccl::half(static_cast<float>(val(r, i)));
      b_in[i] = dccl::bfloat16(static_cast<float>(val(r, i)));
    }
    c.all_reduce(h);  // in place
    c.all_reduce(b_in, b_out, dcclSum);
    for (size_t i = 0; i < k; ++i) {
      ASSERT_EQ(static_cast<double>(static_cast<float>(h[i])), sum(i)) << "half at " << i;
      ASSERT_EQ(static_cast<double>(static_cast<float>(b_out[i])), sum(i)) << "bfloat16 at " << i;
    }

    std::array<int32_t, 5> mine{};
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<int32_t>(r * 10 + static_cast<int>(i));
    std::vector<int32_t> all(mine.size() * un);
    c.all_gather(mine, all);  // a non-const std::array as the source
    for (size_t q = 0; q < un; ++q)
      for (size_t i = 0; i < mine.size(); ++i) ASSERT_EQ(all[q * mine.size() + i], static_cast<int32_t>(q * 10 + i));

    std::vector<dccl::half> rs_in(k * un), rs_out(k);
    for (size_t i = 0; i < rs_in.size(); ++i) rs_in[i] = dccl::half(static_cast<float>(val(r, i)));
    c.reduce_scatter(rs_in, rs_out);
    for (size_t i = 0; i < k; ++i) {
      double want = 0;
      for (int q = 0; q < n; ++q) want += val(q, static_cast<size_t>(r) * k + i);
      ASSERT_EQ(static_cast<double>(static_cast<float>(rs_out[i])), want) << "half reduce_scatter at " << i;
    }

    // Untyped: raw float16 bits through the C datatypes.
    std::vector<uint16_t> raw(k), raw_out(k);
    for (size_t i = 0; i < k; ++i) raw[i] = dccl::half(static_cast<float>(val(r, i))).bits;
    c.all_reduce(raw.data(), raw_out.data(), k, dcclFloat16, dcclMax);
    for (size_t i = 0; i < k; ++i) {
      double want = val(0, i);
      for (int q = 1; q < n; ++q) want = std::max(want, val(q, i));
      ASSERT_EQ(static_cast<double>(dccl::half::to_float(raw_out[i])), want) << "untyped max at " << i;
    }
    std::vector<uint16_t> bc(k, r == 0 ? 0x3c00 : 0);
    c.broadcast(bc.data(), bc.data(), k, dcclFloat16, 0);
    for (uint16_t x : bc) ASSERT_EQ(x, 0x3c00);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Cpp, ::testing::Values(2, 3), [](const ::testing::TestParamInfo<int>& i) {
  std::string name = "n";
  name += std::to_string(i.param);
  return name;
});

TEST(CppHandles, MoveAbortAndGroupScope) {
  dccl::Communicator a(1, dccl::Communicator::unique_id(), 0);
  dcclComm_t raw = a.get();
  dccl::Communicator b(std::move(a));
  EXPECT_EQ(a.get(), nullptr);
  EXPECT_EQ(b.get(), raw);
  std::vector<double> v{1.5, -2.0};
  b.all_reduce(std::span<double>(v));
  EXPECT_EQ(v[0], 1.5);
  b.abort();
  EXPECT_EQ(b.get(), nullptr);

  try {
    dccl::Communicator bad(2, dccl::Communicator::unique_id(), 2);
    ADD_FAILURE() << "rank 2 of 2 accepted";
  } catch (const dccl::Error& e) {
    EXPECT_EQ(e.code(), dcclInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
  }

  { dccl::Group g; }  // the destructor closes the open group
  EXPECT_EQ(dcclGroupEnd(), dcclInvalidUsage) << "the scoped group was left open";

  dccl::Stream s1;
  dcclStream_t raw_s = s1.get();
  dccl::Stream s2(std::move(s1));
  EXPECT_EQ(s1.get(), nullptr);
  EXPECT_EQ(s2.get(), raw_s);
  s2.synchronize();
}

// Ranks as threads of one process over the shm provider: a rank that destroys its
// communicator as soon as its last call returns must not crash a peer still
// finishing that call (its progress touched the shm region of the closed endpoint:
// SIGSEGV in fi_cq_read, before destroy met the other ranks first).
TEST(CppInProcess, DestroyRightAfterTheLastCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        for (int rep = 0; rep < 10; ++rep) {
          const dcclUniqueId id = dccl::Communicator::unique_id();
          std::vector<std::thread> ts;
          for (int r = 0; r < 2; ++r)
            ts.emplace_back([&id, r] {
              dccl::Communicator c(2, id, r);
              std::vector<int64_t> in(2 * 513, r), out(2 * 513);
              c.all_to_all(std::span<const int64_t>(in), std::span<int64_t>(out));
            });
          for (auto& t : ts) t.join();
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace

// The header's conversions agree with the library's kernels on every float16
// and bfloat16 value and on a million float bit patterns, and with hand-checked
// values at the edges (largest, overflow, subnormals, ties to even).
TEST(CppTypes, HalfAndBfloat16ConvertLikeTheKernels) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float a = dccl::half::to_float(h), k = dccl::kernels::half_to_float(h);
    if (std::isnan(k)) ASSERT_TRUE(std::isnan(a)) << b;
    else ASSERT_EQ(std::memcmp(&a, &k, sizeof a), 0) << "half bits " << b << ": " << a << " vs " << k;
    const float ba = dccl::bfloat16::to_float(h), bk = dccl::kernels::bf16_to_float(h);
    if (std::isnan(bk)) ASSERT_TRUE(std::isnan(ba)) << b;
    else ASSERT_EQ(std::memcmp(&ba, &bk, sizeof ba), 0) << "bfloat16 bits " << b;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t x = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &x, sizeof f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(dccl::half::to_float(dccl::half::from_float(f))));
      EXPECT_TRUE(std::isnan(dccl::bfloat16::to_float(dccl::bfloat16::from_float(f))));
      continue;
    }
    ASSERT_EQ(dccl::half::from_float(f), dccl::kernels::float_to_half(f)) << "float bits " << x;
    ASSERT_EQ(dccl::bfloat16::from_float(f), dccl::kernels::float_to_bf16(f)) << "float bits " << x;
  }
  const std::pair<float, uint16_t> halves[] = {
      {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff}, {65519.0f, 0x7bff}, {65520.0f, 0x7c00},
      {1e9f, 0x7c00}, {std::ldexp(1.0f, -24), 0x0001}, {std::ldexp(1.0f, -25), 0x0000},
      {std::ldexp(1.5f, -25), 0x0001}, {std::ldexp(1.0f, -14), 0x0400}, {0.1f, 0x2e66}, {-0.0f, 0x8000},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00}, {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02}};
  for (auto [f, want] : halves) EXPECT_EQ(dccl::half::from_float(f), want) << f;
  EXPECT_EQ(dccl::bfloat16::from_float(1.0f), 0x3f80);
  EXPECT_EQ(dccl::bfloat16::from_float(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: to even
  EXPECT_EQ(dccl::bfloat16::from_float(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}
