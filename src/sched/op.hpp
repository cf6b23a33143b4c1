// One user call, as queued for execution.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>

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

}  // namespace dccl::sched
