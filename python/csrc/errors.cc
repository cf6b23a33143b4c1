// Error texts: rank, operation and cause in every message.
#include "errors.hpp"

#include <stdexcept>

namespace torch_dccl {

std::string describe(int rank, int size, const std::string& op, const std::string& cause) {
  std::string s = "torch_dccl rank ";
  s.append(std::to_string(rank)).append("/").append(std::to_string(size));
  s.append(": ").append(op).append(": ").append(cause);
  return s;
}

void fail(int rank, int size, const std::string& op, const std::string& cause) {
  throw std::runtime_error(describe(rank, size, op, cause));
}

std::string dccl_text(dcclResult_t r, dcclComm_t comm) {
  const char* last = dcclGetLastError(comm);
  std::string s = (last && *last) ? std::string(last) : std::string("(no error text)");
  s.append(" [").append(dcclGetErrorString(r)).append("]");
  return s;
}

}  // namespace torch_dccl
