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
#include <cstring>

namespace dcclperf {
namespace {

struct TypeInfo {
  const char* label;
  dcclDataType_t type;
};
constexpr TypeInfo kTypes[] = {
    {"int8", dcclInt8},       {"uint8", dcclUint8},        {"int32", dcclInt32},
    {"uint32", dcclUint32},   {"int64", dcclInt64},        {"uint64", dcclUint64},
    {"half", dcclFloat16},    {"float", dcclFloat32},      {"double", dcclFloat64},
    {"bfloat16", dcclBfloat16}};

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

uint64_t to_u64(double v) {
  if (v < 0) return static_cast<uint64_t>(static_cast<int64_t>(v));
  if (v >= 18446744073709551615.0) return ~uint64_t{0};
  return static_cast<uint64_t>(v);
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

bool parse_coll(const std::string& in, Coll* out) {
  std::string s = in;
  if (s.size() > 5 && s.compare(s.size() - 5, 5, "_perf") == 0) s.resize(s.size() - 5);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  static const struct { const char* name; Coll c; } names[] = {
      {"allreduce", Coll::AllReduce}, {"allgather", Coll::AllGather},
      {"reducescatter", Coll::ReduceScatter}, {"broadcast", Coll::Broadcast},
      {"reduce", Coll::Reduce}, {"alltoall", Coll::AllToAll}, {"sendrecv", Coll::SendRecv}};
  for (const auto& n : names) {
    if (s == n.name) { *out = n.c; return true; }
  }
  return false;
}

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllToAll: return "alltoall";
    case Coll::SendRecv: return "sendrecv";
  }
  return "?";
}

bool coll_has_op(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce;
}
bool coll_has_root(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }
bool in_place_checked(Coll c) { return c != Coll::SendRecv && c != Coll::AllToAll; }

bool parse_dtype(const std::string& s, dcclDataType_t* out) {
  static const struct { const char* name; dcclDataType_t t; } aliases[] = {
      {"char", dcclInt8}, {"int", dcclInt32}, {"float16", dcclFloat16}, {"fp16", dcclFloat16},
      {"float32", dcclFloat32}, {"fp32", dcclFloat32}, {"float64", dcclFloat64},
      {"fp64", dcclFloat64}, {"bf16", dcclBfloat16}};
  for (const auto& t : kTypes) {
    if (s == t.label) { *out = t.type; return true; }
  }
  for (const auto& a : aliases) {
    if (s == a.name) { *out = a.t; return true; }
  }
  return false;
}

const char* dtype_label(dcclDataType_t t) {
  for (const auto& x : kTypes) {
    if (x.type == t) return x.label;
  }
  return "?";
}

size_t dtype_bytes(dcclDataType_t t) {
  switch (t) {
    case dcclInt8: case dcclUint8: return 1;
    case dcclFloat16: case dcclBfloat16: return 2;
    case dcclInt32: case dcclUint32: case dcclFloat32: return 4;
    case dcclInt64: case dcclUint64: case dcclFloat64: return 8;
    default: return 0;
  }
}

bool dtype_is_float(dcclDataType_t t) {
  return t == dcclFloat16 || t == dcclBfloat16 || t == dcclFloat32 || t == dcclFloat64;
}

bool parse_op(const std::string& s, dcclRedOp_t* out) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  for (int o = 0; o < dcclNumOps; ++o) {
    if (s == names[o]) { *out = static_cast<dcclRedOp_t>(o); return true; }
  }
  return false;
}

const char* op_label(dcclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < dcclNumOps ? names[op] : "?";
}

Layout layout(Coll c, size_t bytes, size_t elem_size, int nranks) {
  Layout l;
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  const size_t count = elem_size ? bytes / elem_size : 0;
  const size_t per_rank = count / n;
  switch (c) {
    case Coll::AllGather:
      l.send_count = per_rank;
      l.recv_count = per_rank * n;
      l.param_count = per_rank;
      l.send_inplace_off = per_rank;
      break;
    case Coll::ReduceScatter:
      l.send_count = per_rank * n;
      l.recv_count = per_rank;
      l.param_count = per_rank;
      l.recv_inplace_off = per_rank;
      break;
    case Coll::AllToAll:
      l.send_count = l.recv_count = per_rank * n;
      l.param_count = per_rank;
      break;
    default:  // all_reduce, broadcast, reduce, sendrecv
      l.send_count = l.recv_count = l.param_count = count;
      break;
  }
  l.bytes = std::max(l.send_count, l.recv_count) * elem_size;
  return l;
}

double bus_factor(Coll c, int nranks) {
  const double n = std::max(nranks, 1);
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather: case Coll::ReduceScatter: case Coll::AllToAll: return (n - 1) / n;
    default: return 1.0;
  }
}

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

uint32_t encode_float(double v, int mant, int exp) {
  const uint32_t sign = std::signbit(v) ? (1u << (mant + exp)) : 0u;
  const uint32_t exp_all = ((1u << exp) - 1u) << mant;
  if (std::isnan(v)) return sign | exp_all | (1u << (mant - 1));
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | exp_all;
  if (a == 0) return sign;
  const int bias = (1 << (exp - 1)) - 1;
  const int emin = 1 - bias;
  int e;
  std::frexp(a, &e);
  int x = e - 1;  // a = 1.f * 2^x
  if (x < emin) {  // subnormal; rounding up to 2^mant yields the smallest normal
    return sign | static_cast<uint32_t>(std::nearbyint(std::ldexp(a, mant - emin)));
  }
  double r = std::nearbyint(std::ldexp(a, mant - x));  // in [2^mant, 2^(mant+1)]
  if (r == std::ldexp(1.0, mant + 1)) {
    r = std::ldexp(1.0, mant);
    ++x;
  }
  if (x > bias) return sign | exp_all;  // overflow: infinity
  return sign | (static_cast<uint32_t>(x + bias) << mant) |
         (static_cast<uint32_t>(r) - (1u << mant));
}

double decode_float(uint32_t bits, int mant, int exp) {
  const uint32_t ef = (bits >> mant) & ((1u << exp) - 1u);
  const uint32_t frac = bits & ((1u << mant) - 1u);
  const int bias = (1 << (exp - 1)) - 1;
  double v;
  if (ef == (1u << exp) - 1u) {
    v = frac ? NAN : INFINITY;
  } else if (ef == 0) {
    v = std::ldexp(static_cast<double>(frac), 1 - bias - mant);
  } else {
    v = std::ldexp(static_cast<double>(frac + (1u << mant)), static_cast<int>(ef) - bias - mant);
  }
  return ((bits >> (mant + exp)) & 1u) ? -v : v;
}

void store(dcclDataType_t t, void* base, size_t i, double v) {
  char* p = static_cast<char*>(base) + i * dtype_bytes(t);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (t) {
    case dcclInt8: put(static_cast<int8_t>(to_u64(v))); break;
    case dcclUint8: put(static_cast<uint8_t>(to_u64(v))); break;
    case dcclInt32: put(static_cast<int32_t>(to_u64(v))); break;
    case dcclUint32: put(static_cast<uint32_t>(to_u64(v))); break;
    case dcclInt64: put(static_cast<int64_t>(to_u64(v))); break;
    case dcclUint64: put(to_u64(v)); break;
    case dcclFloat16: put(static_cast<uint16_t>(encode_float(v, 10, 5))); break;
    case dcclBfloat16: put(static_cast<uint16_t>(encode_float(v, 7, 8))); break;
    case dcclFloat32: put(static_cast<float>(v)); break;
    case dcclFloat64: put(v); break;
    default: break;
  }
}

double load(dcclDataType_t t, const void* base, size_t i) {
  const char* p = static_cast<const char*>(base) + i * dtype_bytes(t);
  auto get = [p](auto x) { std::memcpy(&x, p, sizeof(x)); return x; };
  switch (t) {
    case dcclInt8: return get(int8_t{});
    case dcclUint8: return get(uint8_t{});
    case dcclInt32: return get(int32_t{});
    case dcclUint32: return get(uint32_t{});
    case dcclInt64: return static_cast<double>(get(int64_t{}));
    case dcclUint64: return static_cast<double>(get(uint64_t{}));
    case dcclFloat16: return decode_float(get(uint16_t{}), 10, 5);
    case dcclBfloat16: return decode_float(get(uint16_t{}), 7, 8);
    case dcclFloat32: return get(float{});
    case dcclFloat64: return get(double{});
    default: return NAN;
  }
}

double round_to(dcclDataType_t t, double v) {
  unsigned char buf[8];
  store(t, buf, 0, v);
  return load(t, buf, 0);
}

}  // namespace dcclperf
