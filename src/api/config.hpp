// dcclConfig_t: reading an application's per-communicator configuration.
#pragma once
#include "core/config.hpp"
#include "dccl/dccl.h"

namespace dccl::api {

// `base` with the fields `c` sets (c may be null; fields beyond c->size are left
// unset, so an older application's smaller struct works). Throws
// Error(dcclInvalidArgument) naming the call and the field for a bad value.
// *blocking (may be null) receives the blocking flag (default 1).
core::Config apply_config(const dcclConfig_t* c, core::Config base, int rank, const char* fn, bool* blocking);

}  // namespace dccl::api
