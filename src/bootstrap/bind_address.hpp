// The address the bootstrap store binds when no host is given.
#pragma once
#include <string>

namespace dccl::boot {

// The IPv4 (else IPv6) address of DCCL_SOCKET_IFNAME if set (throws
// dcclInvalidArgument if that interface has none), else of the default-route
// interface, else 127.0.0.1.
std::string default_bind_host();

}  // namespace dccl::boot
