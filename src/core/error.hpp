// Errors inside the C++ core. The C shim (api/) turns them into dcclResult_t.
#pragma once
#include <stdexcept>
#include <string>

#include "dccl/dccl.h"

namespace dccl::core {

class Error : public std::runtime_error {
 public:
  Error(dcclResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  dcclResult_t code() const noexcept { return code_; }

 private:
  dcclResult_t code_;
};

[[noreturn]] inline void raise(dcclResult_t code, const std::string& what) { throw Error(code, what); }

// "rank 3: all_reduce #17: <cause>" — every error names rank, operation and cause
// (a rank below 0, not known yet: "operation: cause").
std::string describe(int rank, const std::string& op, const std::string& cause);

}  // namespace dccl::core
