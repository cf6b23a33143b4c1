// Input pattern and expected results of dccl-perf; see expect.hpp.
//
// Inputs are small positive integers chosen per (collective, dtype, op,
// nranks) so that the exact result is representable and every partial result
// of any reduction order is too:
//  - sum/avg: 1 + (7*rank + 3*i) % K, K = clamp(limit/nranks, 1, 5), where
//    limit is the largest integer the dtype holds exactly (bfloat16 256,
//    float16 2048, int8 127, ...): sums never round and never wrap.
//  - prod: 1, or 2 on ranks below a dtype-specific bound T where
//    i % 4 == 0 or (rank + i) % 3 == 0: the product is a power of two
//    <= 2^T (int8 2^6, float16 2^15, ...), reached at every 4th element.
//  - max/min and the data-movement collectives: 1 + (13*rank + 7*i) % 100,
//    exact in every dtype and distinct between ranks (for nranks <= 100).
// Expected values are computed independently: integer types in 64-bit
// modular arithmetic then narrowed, float types in double then rounded.
// Every expected value is >= 1, so a zero-filled receive buffer never passes.
#include "expect.hpp"

#include <algorithm>
#include <cmath>

namespace dcclperf {
namespace {

double exact_limit(dcclDataType_t t) {
  switch (t) {
    case dcclInt8: return 127;
    case dcclUint8: return 255;
    case dcclInt32: return 2147483647.0;
    case dcclUint32: return 4294967295.0;
    case dcclFloat16: return 2048;
    case dcclBfloat16: return 256;
    case dcclFloat32: return 16777216.0;
    case dcclFloat64: return 9007199254740992.0;
    default: return 9.2e18;  // int64, uint64
  }
}

// Most ranks that may contribute a factor 2 to a product.
int prod_twos(dcclDataType_t t) {
  switch (t) {
    case dcclInt8: return 6;
    case dcclUint8: return 7;
    case dcclInt32: return 30;
    case dcclUint32: return 31;
    case dcclInt64: return 62;
    case dcclUint64: return 63;
    case dcclFloat16: return 15;
    case dcclFloat64: return 62;
    default: return 30;  // float, bfloat16
  }
}

uint64_t sum_range(dcclDataType_t t, int nranks) {
  double k = std::floor(exact_limit(t) / std::max(nranks, 1));
  return static_cast<uint64_t>(std::clamp(k, 1.0, 5.0));
}

double pattern(int rank, size_t i) {
  return 1.0 + static_cast<double>((static_cast<uint64_t>(rank) * 13 + (i % 100) * 7) % 100);
}

// Wraps a 64-bit two's-complement value to the integer dtype.
double narrow(dcclDataType_t t, uint64_t x) {
  switch (t) {
    case dcclInt8: return static_cast<int8_t>(x);
    case dcclUint8: return static_cast<uint8_t>(x);
    case dcclInt32: return static_cast<int32_t>(x);
    case dcclUint32: return static_cast<uint32_t>(x);
    case dcclInt64: return static_cast<double>(static_cast<int64_t>(x));
    default: return static_cast<double>(x);
  }
}

// The reduction of element `idx` of every rank's send buffer.
double reduce_expected(const Case& k, size_t idx) {
  const int n = k.nranks;
  if (!dtype_is_float(k.type)) {
    uint64_t acc = to_u64(input_value(k, 0, idx));
    int64_t mx = static_cast<int64_t>(acc), mn = mx;
    for (int r = 1; r < n; ++r) {
      uint64_t v = to_u64(input_value(k, r, idx));
      if (k.op == dcclProd) acc *= v; else acc += v;
      mx = std::max(mx, static_cast<int64_t>(v));
      mn = std::min(mn, static_cast<int64_t>(v));
    }
    switch (k.op) {
      case dcclMax: return narrow(k.type, static_cast<uint64_t>(mx));
      case dcclMin: return narrow(k.type, static_cast<uint64_t>(mn));
      case dcclAvg: return narrow(k.type, static_cast<uint64_t>(static_cast<int64_t>(acc) / n));
      default: return narrow(k.type, acc);
    }
  }
  double acc = input_value(k, 0, idx), mx = acc, mn = acc;
  for (int r = 1; r < n; ++r) {
    double v = input_value(k, r, idx);
    if (k.op == dcclProd) acc *= v; else acc += v;
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  switch (k.op) {
    case dcclMax: return round_to(k.type, mx);
    case dcclMin: return round_to(k.type, mn);
    case dcclAvg: return round_to(k.type, acc / n);
    default: return round_to(k.type, acc);
  }
}

}  // namespace

double input_value(const Case& k, int rank, size_t i) {
  if (!coll_has_op(k.coll)) return pattern(rank, i);
  switch (k.op) {
    case dcclSum:
    case dcclAvg: {
      const uint64_t range = sum_range(k.type, k.nranks);
      return 1.0 + static_cast<double>((static_cast<uint64_t>(rank) * 7 + (i % range) * 3) % range);
    }
    case dcclProd:
      return (rank < prod_twos(k.type) && (i % 4 == 0 || (static_cast<size_t>(rank) + i % 3) % 3 == 0))
                 ? 2.0 : 1.0;
    default:
      return pattern(rank, i);
  }
}

bool expected_value(const Case& k, int rank, size_t i, double* out) {
  const int n = k.nranks;
  const size_t p = k.lay.param_count;
  switch (k.coll) {
    case Coll::AllReduce: *out = reduce_expected(k, i); return true;
    case Coll::Reduce:
      if (rank != k.root) return false;
      *out = reduce_expected(k, i);
      return true;
    case Coll::ReduceScatter: *out = reduce_expected(k, static_cast<size_t>(rank) * p + i); return true;
    case Coll::AllGather: *out = input_value(k, static_cast<int>(i / p), i % p); return true;
    case Coll::AllToAll:
      *out = input_value(k, static_cast<int>(i / p), static_cast<size_t>(rank) * p + i % p);
      return true;
    case Coll::Broadcast: *out = input_value(k, k.root, i); return true;
    case Coll::SendRecv: *out = input_value(k, (rank - 1 + n) % n, i); return true;
  }
  return false;
}

double tolerance(const Case& k, double expected) {
  if (!coll_has_op(k.coll) || !dtype_is_float(k.type)) return 0.0;
  const bool inexact_sum =
      k.op == dcclSum && static_cast<double>(sum_range(k.type, k.nranks)) * k.nranks > exact_limit(k.type);
  if (k.op != dcclAvg && !inexact_sum) return 0.0;
  double eps = 0x1p-52;
  if (k.type == dcclFloat16) eps = 0x1p-10;
  if (k.type == dcclBfloat16) eps = 0x1p-7;
  if (k.type == dcclFloat32) eps = 0x1p-23;
  // Each of the n roundings (pre-scaling by 1/n, or the partial sums) may be
  // off by half an ulp of a value no larger than the result.
  return eps * std::fabs(expected) * k.nranks;
}

bool matches(double got, double expected, double tol) {
  if (std::isnan(got) || std::isnan(expected)) return false;
  return got == expected || std::fabs(got - expected) <= tol;
}

size_t count_wrong(const Case& k, int rank, const void* data) {
  size_t wrong = 0;
  for (size_t i = 0; i < k.lay.recv_count; ++i) {
    double e;
    if (!expected_value(k, rank, i, &e)) return 0;
    if (!matches(load(k.type, data, i), e, tolerance(k, e))) ++wrong;
  }
  return wrong;
}

void fill_input(const Case& k, int rank, void* data) {
  for (size_t i = 0; i < k.lay.send_count; ++i) store(k.type, data, i, input_value(k, rank, i));
}

}  // namespace dcclperf
