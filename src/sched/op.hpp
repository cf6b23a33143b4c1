// One user call, as queued for execution.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "core/types.hpp"
#include "dccl/dccl.h"
#include "mem/backend.hpp"
#include "tune/tuner.hpp"

namespace dccl::sched {

struct Op {
  tune::Coll coll = tune::Coll::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  dcclDataType_t dt = dcclFloat32;
  dcclRedOp_t op = dcclSum;
  int root = 0;
  int peer = -1;           // send/recv
  bool is_send = false;    // send/recv
  uint64_t seq = 0;        // collective sequence number (tags)
  uint64_t p2p_tag = 0;    // send/recv: tag from the per-pair counter
  // A step of a hierarchical call (coll::SubOp::parent): that call's step mark,
  // mixed into this step's call mark. 0: a call of its own.
  uint32_t parent_mark = 0;
  // PreMulSum (op is then dcclSum): each rank's input is first multiplied by its
  // scalar, one element of dt: `scalar` itself, or read from scalar_ptr (host or
  // device memory) when the operation runs.
  bool premul = false;
  alignas(8) unsigned char scalar[8] = {};
  const void* scalar_ptr = nullptr;
  // The memory both buffers are in, when the API already looked it up (null:
  // looked up again where needed). One lookup per call instead of several.
  mem::Backend* backend = nullptr;
  // A step of a larger call (the hierarchy's sub-communicator steps): that call's
  // deadline, which the step shares. Zero: the step is a call of its own, whose
  // deadline is DCCL_TIMEOUT_S after it starts.
  std::chrono::steady_clock::time_point deadline{};
};

// The op as ranks must agree on it (core::wire_op: a PreMulSum is an op of its own).
inline int wire_op(const Op& op) { return core::wire_op(op.op, op.premul); }

// A hash of what must agree between ranks for a collective to pair (collective,
// count, datatype, and op and root where they matter), 16 bits: carried in every
// message tag of the operation (coll::make_coll_tag), so that ranks whose calls
// differ never pair their messages (65,535 in 65,536 such differences; with 8
// bits, 1 count in 256 let a float32 call pair with an int32 one of that count).
inline uint32_t call_mark(const Op& op) {
  const bool reducing = op.coll == tune::Coll::AllReduce || op.coll == tune::Coll::Reduce ||
                        op.coll == tune::Coll::ReduceScatter;
  const bool rooted = op.coll == tune::Coll::Reduce || op.coll == tune::Coll::Broadcast;
  uint64_t h = static_cast<uint64_t>(op.coll) + 1;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x9E3779B97F4A7C15ULL; h ^= h >> 29; };
  if (op.coll != tune::Coll::Barrier) {
    mix(op.count);
    mix(static_cast<uint64_t>(op.dt));
  }
  if (reducing) mix(static_cast<uint64_t>(wire_op(op)));
  if (rooted) mix(static_cast<uint64_t>(op.root));
  if (op.parent_mark) mix(op.parent_mark);
  return static_cast<uint32_t>(h >> 48);
}

// What a hierarchical call's steps carry (coll::SubOp::parent): its call mark and
// its sequence number, never 0. With the sequence, steps of two calls pair only when
// they are the same call on every rank, whatever the steps' own counts.
inline uint32_t step_of(const Op& op) {
  uint64_t h = (static_cast<uint64_t>(call_mark(op)) << 32 | (op.seq & 0xffffffffULL)) * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 29;
  const uint32_t m = static_cast<uint32_t>(h >> 48);
  return m ? m : 1;
}

}  // namespace dccl::sched
