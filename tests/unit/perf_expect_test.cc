// dccl-perf's expected values (tools/dccl-perf/expect.cc) against a
// brute-force simulation of each collective that reduces in the dtype itself,
// in several orders, as a library would.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

// The expectation code is pure and not part of libdccl: compile it into this test.
#include "../../tools/dccl-perf/codec.cc"
#include "../../tools/dccl-perf/expect.cc"
#include "../../tools/dccl-perf/layout.cc"
#include "../../tools/dccl-perf/names.cc"

using namespace dcclperf;

namespace {

constexpr dcclDataType_t kAllTypes[] = {dcclInt8,    dcclUint8,   dcclInt32,   dcclUint32,
                                     dcclInt64,   dcclUint64,  dcclFloat16, dcclFloat32,
                                     dcclFloat64, dcclBfloat16};
constexpr dcclRedOp_t kOps[] = {dcclSum, dcclProd, dcclMax, dcclMin, dcclAvg};

bool is_float(dcclDataType_t t) {
  return t == dcclFloat16 || t == dcclBfloat16 || t == dcclFloat32 || t == dcclFloat64;
}

// Integer wrap, written independently of expect.cc.
double wrap(dcclDataType_t t, uint64_t x) {
  unsigned char b[8];
  switch (t) {
    case dcclInt8: { int8_t v = static_cast<int8_t>(x); std::memcpy(b, &v, 1); break; }
    case dcclUint8: { uint8_t v = static_cast<uint8_t>(x); std::memcpy(b, &v, 1); break; }
    case dcclInt32: { int32_t v = static_cast<int32_t>(x); std::memcpy(b, &v, 4); break; }
    case dcclUint32: { uint32_t v = static_cast<uint32_t>(x); std::memcpy(b, &v, 4); break; }
    default: std::memcpy(b, &x, 8); break;
  }
  return load(t, b, 0);
}
uint64_t bits64(double v) {
  return v < 0 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v);
}

enum class AvgMode { SumThenDivide, PreScale };

// One step of a reduction in the dtype's own arithmetic.
double combine(dcclDataType_t t, dcclRedOp_t op, double a, double b) {
  if (op == dcclMax) return std::max(a, b);
  if (op == dcclMin) return std::min(a, b);
  const bool mul = op == dcclProd;
  if (is_float(t)) return round_to(t, mul ? a * b : a + b);
  return wrap(t, mul ? bits64(a) * bits64(b) : bits64(a) + bits64(b));
}

// Reduces element idx of every rank's buffer, visiting ranks in `order`.
double sim_reduce(const Case& k, const std::vector<std::vector<unsigned char>>& send, size_t idx,
                  const std::vector<int>& order, AvgMode mode) {
  const int n = k.nranks;
  auto in = [&](int r) {
    double v = load(k.type, send[r].data(), idx);
    if (k.op == dcclAvg && mode == AvgMode::PreScale && is_float(k.type)) v = round_to(k.type, v / n);
    return v;
  };
  double acc = in(order[0]);
  for (size_t j = 1; j < order.size(); ++j) acc = combine(k.type, k.op, acc, in(order[j]));
  if (k.op == dcclAvg) {
    if (!is_float(k.type)) return wrap(k.type, static_cast<uint64_t>(static_cast<int64_t>(acc) / n));
    if (mode == AvgMode::SumThenDivide) return round_to(k.type, acc / n);
  }
  return acc;
}

// Runs the collective on simulated ranks; returns each rank's receive buffer.
std::vector<std::vector<unsigned char>> simulate(const Case& k, const std::vector<int>& order,
                                                 AvgMode mode, int only_rank = -1) {
  const int n = k.nranks;
  const size_t es = dtype_bytes(k.type), p = k.lay.param_count;
  std::vector<std::vector<unsigned char>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r].assign(k.lay.send_count * es + 1, 0);
    fill_input(k, r, send[r].data());
    recv[r].assign(k.lay.recv_count * es + 1, 0);
  }
  for (int q = 0; q < n; ++q) {
    if (only_rank >= 0 && q != only_rank) continue;
    unsigned char* out = recv[q].data();
    auto copy = [&](size_t dst, int from, size_t src, size_t cnt) {
      std::memcpy(out + dst * es, send[from].data() + src * es, cnt * es);
    };
    switch (k.coll) {
      case Coll::AllReduce:
        for (size_t i = 0; i < k.lay.recv_count; ++i) store(k.type, out, i, sim_reduce(k, send, i, order, mode));
        break;
      case Coll::Reduce:
        if (q == k.root)
          for (size_t i = 0; i < k.lay.recv_count; ++i) store(k.type, out, i, sim_reduce(k, send, i, order, mode));
        break;
      case Coll::ReduceScatter:
        for (size_t i = 0; i < p; ++i) store(k.type, out, i, sim_reduce(k, send, q * p + i, order, mode));
        break;
      case Coll::AllGather:
        for (int r = 0; r < n; ++r) copy(r * p, r, 0, p);
        break;
      case Coll::AllToAll:
        for (int r = 0; r < n; ++r) copy(r * p, r, q * p, p);
        break;
      case Coll::Broadcast: copy(0, k.root, 0, k.lay.recv_count); break;
      case Coll::SendRecv: copy(0, (q - 1 + n) % n, 0, k.lay.recv_count); break;
    }
  }
  return recv;
}

void check_case(const Case& k, int only_rank = -1) {
  std::vector<int> fwd(k.nranks), rev(k.nranks), mid(k.nranks);
  for (int r = 0; r < k.nranks; ++r) {
    fwd[r] = r;
    rev[r] = k.nranks - 1 - r;
    mid[r] = (r + k.nranks / 2) % k.nranks;
  }
  for (const auto* order : {&fwd, &rev, &mid}) {
    for (AvgMode mode : {AvgMode::SumThenDivide, AvgMode::PreScale}) {
      auto recv = simulate(k, *order, mode, only_rank);
      for (int q = 0; q < k.nranks; ++q) {
        if (only_rank >= 0 && q != only_rank) continue;
        size_t checked = 0;
        for (size_t i = 0; i < k.lay.recv_count; ++i) {
          double e;
          if (!expected_value(k, q, i, &e)) continue;
          ++checked;
          ASSERT_GE(e, 1.0) << "expected values must never equal the zero fill";
          ASSERT_TRUE(std::isfinite(e));
          const double got = load(k.type, recv[q].data(), i);
          ASSERT_TRUE(matches(got, e, tolerance(k, e)))
              << coll_name(k.coll) << " " << dtype_label(k.type) << " " << op_label(k.op)
              << " n=" << k.nranks << " root=" << k.root << " rank=" << q << " i=" << i
              << " got=" << got << " expected=" << e;
        }
        EXPECT_EQ(count_wrong(k, q, recv[q].data()), 0u);
        const bool skipped = k.coll == Coll::Reduce && q != k.root;
        EXPECT_EQ(checked, skipped ? 0 : k.lay.recv_count);
      }
    }
  }
}

void sweep(const std::vector<int>& world_sizes, const std::vector<size_t>& elem_counts) {
  for (Coll c : kAllColls) {
    for (dcclDataType_t t : kAllTypes) {
      for (dcclRedOp_t op : kOps) {
        if (!coll_has_op(c) && op != dcclSum) continue;
        for (int n : world_sizes) {
          for (size_t elems : elem_counts) {
            for (int root : {0, n - 1}) {
              if (!coll_has_root(c) && root != 0) continue;
              Case k;
              k.coll = c;
              k.type = t;
              k.op = op;
              k.nranks = n;
              k.root = root;
              // Sizes that are not multiples of the element or of nranks are floored.
              k.lay = layout(c, elems * dtype_bytes(t) + (elems % 2), dtype_bytes(t), n);
              check_case(k);
              if (::testing::Test::HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }
}

}  // namespace

TEST(PerfExpect, SmallWorldsAllCollectivesTypesOps) { sweep({1, 2, 3, 4, 5}, {0, 1, 7, 13, 40}); }

TEST(PerfExpect, LargerWorldsStayExact) { sweep({7, 16, 64}, {64}); }

// Worlds large enough that the input range per dtype must shrink to keep
// sums exact (float16 beyond 409 ranks, bfloat16 beyond 51, int8 beyond 25).
TEST(PerfExpect, HugeWorldsAllReduceStayExact) {
  for (dcclDataType_t t : kAllTypes) {
    for (dcclRedOp_t op : {dcclSum, dcclProd, dcclMax}) {
      for (int n : {30, 100, 255, 600}) {
        if (t == dcclBfloat16 && n > 256 && op == dcclSum) continue;  // beyond exact range
        if ((t == dcclInt8 && n > 127) || (t == dcclUint8 && n > 255)) continue;  // wraps
        Case k;
        k.type = t;
        k.op = op;
        k.nranks = n;
        k.lay = layout(Coll::AllReduce, 12 * dtype_bytes(t), dtype_bytes(t), n);
        check_case(k, 0);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(PerfExpect, WrongDataIsCounted) {
  Case k;
  k.coll = Coll::AllReduce;
  k.nranks = 3;
  k.lay = layout(k.coll, 64, 4, 3);
  std::vector<float> buf(k.lay.recv_count, 0.0f);
  EXPECT_EQ(count_wrong(k, 0, buf.data()), k.lay.recv_count);
  auto good = simulate(k, {0, 1, 2}, AvgMode::SumThenDivide);
  std::memcpy(buf.data(), good[0].data(), buf.size() * 4);
  EXPECT_EQ(count_wrong(k, 0, buf.data()), 0u);
  buf[3] += 1.0f;
  buf[7] = NAN;
  EXPECT_EQ(count_wrong(k, 0, buf.data()), 2u);
}

TEST(PerfExpect, LayoutMatchesNcclTests) {
  Layout l = layout(Coll::AllGather, 1048576, 4, 8);
  EXPECT_EQ(l.param_count, 32768u);
  EXPECT_EQ(l.send_count, 32768u);
  EXPECT_EQ(l.recv_count, 262144u);
  EXPECT_EQ(l.bytes, 1048576u);
  EXPECT_EQ(l.send_inplace_off, 32768u);
  l = layout(Coll::ReduceScatter, 1048576, 4, 8);
  EXPECT_EQ(l.param_count, 32768u);
  EXPECT_EQ(l.send_count, 262144u);
  EXPECT_EQ(l.recv_inplace_off, 32768u);
  l = layout(Coll::AllToAll, 1000, 4, 3);  // 250 elements -> 83 per peer
  EXPECT_EQ(l.param_count, 83u);
  EXPECT_EQ(l.send_count, 249u);
  EXPECT_EQ(l.bytes, 996u);
  l = layout(Coll::AllGather, 8, 4, 8);
  EXPECT_EQ(l.bytes, 0u);
  l = layout(Coll::AllReduce, 8, 4, 8);
  EXPECT_EQ(l.param_count, 2u);
  EXPECT_EQ(l.bytes, 8u);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::AllToAll, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::SendRecv, 4), 1.0);
  EXPECT_FALSE(in_place_checked(Coll::SendRecv));
  EXPECT_FALSE(in_place_checked(Coll::AllToAll));
  EXPECT_TRUE(in_place_checked(Coll::AllGather));
}

TEST(PerfExpect, HalfAndBfloat16Encoding) {
  EXPECT_EQ(encode_float(1.0, 10, 5), 0x3C00u);
  EXPECT_EQ(encode_float(-2.0, 10, 5), 0xC000u);
  EXPECT_EQ(encode_float(65504.0, 10, 5), 0x7BFFu);
  EXPECT_EQ(encode_float(65519.0, 10, 5), 0x7BFFu);
  EXPECT_EQ(encode_float(65520.0, 10, 5), 0x7C00u);  // rounds to infinity
  EXPECT_EQ(encode_float(0x1p-24, 10, 5), 0x0001u);   // smallest subnormal
  EXPECT_EQ(encode_float(1.0 + 0x1p-11, 10, 5), 0x3C00u);  // tie to even
  EXPECT_EQ(encode_float(1.0 + 3 * 0x1p-11, 10, 5), 0x3C02u);
  EXPECT_EQ(encode_float(1.0, 7, 8), 0x3F80u);
  EXPECT_EQ(round_to(dcclBfloat16, 257.0), 256.0);
  EXPECT_EQ(round_to(dcclBfloat16, 259.0), 260.0);
  EXPECT_EQ(round_to(dcclFloat16, 2049.0), 2048.0);
  EXPECT_TRUE(std::isnan(decode_float(0x7E00u, 10, 5)));
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    for (auto [m, e] : {std::pair{10, 5}, std::pair{7, 8}}) {
      double v = decode_float(b, m, e);
      if (std::isnan(v)) continue;
      ASSERT_EQ(encode_float(v, m, e), b) << std::hex << b;
    }
  }
  // The generic encoder agrees with the hardware's double -> float rounding.
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    double d;
    std::memcpy(&d, &x, 8);
    if (std::isnan(d) || std::fabs(d) > 1e39 || std::fabs(d) < 1e-46) {
      d = std::ldexp(static_cast<double>(x >> 11), -static_cast<int>(x % 190));
    }
    float f = static_cast<float>(d);
    uint32_t fb;
    std::memcpy(&fb, &f, 4);
    ASSERT_EQ(encode_float(d, 23, 8), fb) << d;
  }
}

TEST(PerfExpect, IntegerWrapAndNames) {
  EXPECT_EQ(round_to(dcclInt8, 130.0), -126.0);
  EXPECT_EQ(round_to(dcclUint8, 256.0), 0.0);
  EXPECT_EQ(round_to(dcclUint8, -1.0), 255.0);
  EXPECT_EQ(round_to(dcclUint64, 0x1p63), 0x1p63);
  Coll c;
  ASSERT_TRUE(parse_coll("all_reduce", &c));
  EXPECT_EQ(c, Coll::AllReduce);
  ASSERT_TRUE(parse_coll("reduce_scatter_perf", &c));
  EXPECT_EQ(c, Coll::ReduceScatter);
  ASSERT_TRUE(parse_coll("alltoall", &c));
  EXPECT_FALSE(parse_coll("allreduceX", &c));
  dcclDataType_t t;
  ASSERT_TRUE(parse_dtype("float16", &t));
  EXPECT_EQ(t, dcclFloat16);
  ASSERT_TRUE(parse_dtype("bfloat16", &t));
  EXPECT_EQ(t, dcclBfloat16);
  EXPECT_STREQ(dtype_label(dcclFloat32), "float");
  dcclRedOp_t op;
  ASSERT_TRUE(parse_op("avg", &op));
  EXPECT_EQ(op, dcclAvg);
  EXPECT_FALSE(parse_op("xor", &op));
}
