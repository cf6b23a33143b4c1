// The settings init refuses beyond what loading them checks (core::load_config):
// DCCL_ALGO, DCCL_PROVIDER (or FI_PROVIDER), DCCL_NET_IFNAME, DCCL_ADDR, DCCL_SECRET
// and DCCL_SOCKET_IFNAME, each through the library's own parser where it has one.
#pragma once
#include <string>

// Why init would refuse `name` set to `value` in this environment ("" when it
// would not, or when init does not read it here).
std::string init_refusal(const char* name, const char* value);
// Why --plan's provider summary ("shm", "tcp", "shm+tcp;ofi_rxm") names no provider
// the library knows or this machine offers ("" when each part is one).
std::string unknown_plan_provider(const std::string& summary);
