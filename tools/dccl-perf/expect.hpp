// dccl-perf's pure logic: collective names, nccl-tests' size/count layout and
// bus-bandwidth factors, the deterministic input pattern, the expected result
// of every collective, and the dtype conversions used to fill and read buffers;
// defined in names.cc, layout.cc, expect.cc (the oracle) and codec.cc.
// No library calls: tests/unit/perf_expect_test.cc checks it against a
// brute-force simulation of each collective.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "dccl/dccl.h"

namespace dcclperf {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv };
inline constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter,
                                     Coll::Broadcast, Coll::Reduce,    Coll::AllToAll,
                                     Coll::SendRecv};

// "all_reduce", "all_gather", ... (also accepts "allreduce" and a "_perf" suffix).
bool parse_coll(const std::string& s, Coll* out);
const char* coll_name(Coll c);
bool coll_has_op(Coll c);    // all_reduce, reduce_scatter, reduce
bool coll_has_root(Coll c);  // broadcast, reduce
// False for sendrecv and alltoall: in place they send from and receive into
// one buffer, a race by definition, so (as nccl-tests) they are timed but
// their data is not checked ("N/A").
bool in_place_checked(Coll c);

// Datatype names as nccl-tests accepts them (-d) and prints them ("type" column).
bool parse_dtype(const std::string& s, dcclDataType_t* out);
const char* dtype_label(dcclDataType_t t);  // int8 ... half float double bfloat16
size_t dtype_bytes(dcclDataType_t t);
bool dtype_is_float(dcclDataType_t t);
bool parse_op(const std::string& s, dcclRedOp_t* out);
const char* op_label(dcclRedOp_t op);  // sum prod max min avg

// nccl-tests' getCollByteCount: how a benchmark size maps onto buffers.
struct Layout {
  size_t send_count = 0;   // elements in each rank's send buffer
  size_t recv_count = 0;   // elements in each rank's receive buffer
  size_t param_count = 0;  // the count argument of the call; the "count" column
  // In-place: send pointer = base + send_inplace_off*rank elements, receive
  // pointer = base + recv_inplace_off*rank elements (all_gather: base is the
  // receive buffer; reduce_scatter: base is the send buffer; otherwise both
  // point at the receive buffer).
  size_t send_inplace_off = 0;
  size_t recv_inplace_off = 0;
  size_t bytes = 0;  // the "size" column: max(send, recv) bytes
};
Layout layout(Coll c, size_t bytes, size_t elem_size, int nranks);
// busbw = algbw * bus_factor (nccl-tests): all_reduce 2(n-1)/n; all_gather,
// reduce_scatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1.
double bus_factor(Coll c, int nranks);

// What one check is about: everything the expected values depend on.
struct Case {
  Coll coll = Coll::AllReduce;
  dcclDataType_t type = dcclFloat32;
  dcclRedOp_t op = dcclSum;  // ignored when !coll_has_op
  int nranks = 1;
  int root = 0;  // ignored when !coll_has_root
  Layout lay;
};

// Element i (0 <= i < lay.send_count) of `rank`'s send buffer: a small
// integer, chosen so that every result is exact in every dtype (see expect.cc).
double input_value(const Case& k, int rank, size_t i);
// Expected element i (0 <= i < lay.recv_count) of `rank`'s receive buffer,
// already rounded to the dtype. False when that buffer is not checked
// (reduce on a rank other than root).
bool expected_value(const Case& k, int rank, size_t i, double* out);
// Largest |got - expected| accepted: 0 except where a reduction order may
// legitimately change the rounding (float avg; float sums beyond the exact range).
double tolerance(const Case& k, double expected);
bool matches(double got, double expected, double tol);  // NaN never matches

// Counts the elements of `rank`'s received data (recv_count elements of type
// k.type at `data`) that differ from the expectation.
size_t count_wrong(const Case& k, int rank, const void* data);
// Writes `rank`'s input (send_count elements) into `data`.
void fill_input(const Case& k, int rank, void* data);

// Dtype representation. store() rounds to nearest-even for float types and
// wraps (two's complement) for integer types; load() is exact.
void store(dcclDataType_t t, void* base, size_t i, double v);
double load(dcclDataType_t t, const void* base, size_t i);
double round_to(dcclDataType_t t, double v);  // load(store(v))
// v as a 64-bit two's-complement pattern (negative values wrap; saturates above 2^64).
uint64_t to_u64(double v);
// Generic IEEE binary encoding with `mant` fraction bits and `exp` exponent bits.
uint32_t encode_float(double v, int mant, int exp);
double decode_float(uint32_t bits, int mant, int exp);

}  // namespace dcclperf
