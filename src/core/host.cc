#include "core/host.hpp"

#include <unistd.h>

namespace dccl::core {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

}  // namespace dccl::core
