// The one shape of every torch_dccl error: "torch_dccl rank R/N: op: cause".
#pragma once

#include <string>

#include <dccl/dccl.h>

namespace torch_dccl {

std::string describe(int rank, int size, const std::string& op, const std::string& cause);
// Throws std::runtime_error (RuntimeError in Python) with describe()'s text.
[[noreturn]] void fail(int rank, int size, const std::string& op, const std::string& cause);
// DirectCCL's text for this thread's last error, with the result's name.
std::string dccl_text(dcclResult_t r, dcclComm_t comm);

}  // namespace torch_dccl
