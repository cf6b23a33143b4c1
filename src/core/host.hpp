// This machine's host name (gethostname), the one wrapper every layer uses.
#pragma once
#include <string>

namespace dccl::core {

// "unknown" when the system call fails; never empty.
std::string host_name();

}  // namespace dccl::core
