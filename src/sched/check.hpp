// DCCL_CHECK=1: before each collective, every rank's signature (sequence,
// collective, count, datatype, op, root) is exchanged with every other rank; a
// mismatch fails on every rank with both signatures, instead of a hang or garbage.
#pragma once
#include "sched/executor.hpp"

namespace dccl::sched {

void check_signature(ExecutorInputs& res, const Op& op);

}  // namespace dccl::sched
