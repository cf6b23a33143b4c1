// Provider choice: names, fi_getinfo hints, the list of providers this node offers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "net/fid.hpp"
#include "net/rails.hpp"

namespace dccl::net {

inline constexpr const char* kShmProvider = "shm";
inline constexpr const char* kTcpProvider = "tcp;ofi_rxm";

// The newest API version the runtime library supports (fi_version()); throws
// core::Error(dcclUnavailable) when the runtime is older than 1.17.
uint32_t api_version();

// "tcp" -> "tcp;ofi_rxm", "udp" -> "udp;ofi_rxd", "verbs" -> "verbs;ofi_rxm"; other
// names are returned as given (trimmed).
std::string canonical_provider(const std::string& name);

// Providers offering RDM endpoints with tagged messages on this node, e.g.
// {"shm", "tcp;ofi_rxm", "sockets", "udp;ofi_rxd"}.
// libfabric provider settings DirectCCL prefers, applied to the environment once
// per process unless the user set them: FI_OFI_RXM_EAGER_LIMIT (rxm_eager_bytes,
// 0: leave it). They take effect only if libfabric was not initialised in this
// process before. Returns the effective value ("" when unset).
std::string set_provider_defaults(uint64_t rxm_eager_bytes);

std::vector<std::string> available_providers();

struct ProviderInfo {
  InfoPtr info;          // the one fi_info to open (a copy owned by us)
  bool mr_local = false; // the provider requires registered buffers (FI_MR_LOCAL)
  bool hmem = false;     // info->caps has FI_HMEM: the domain takes device memory
};

// fi_getinfo for `prov` (canonical name) with our hints: RDM, FI_TAGGED|FI_MSG|
// FI_DIRECTED_RECV, FI_ORDER_SAS, no FI_MR_LOCAL if avoidable. With want_hmem, first
// also FI_HMEM in caps and FI_MR_HMEM in mr_mode (a domain opened without FI_HMEM
// treats a device address as host memory, fi_mr(3)); when the provider offers nothing
// that way, the same hints without them (the result's `hmem` says which). Without
// want_hmem the hints never mention FI_HMEM. Returns an empty info and fills *why when
// the provider cannot be used.
ProviderInfo find_provider(const std::string& prov, std::string* why, bool want_hmem = false);

// Every interface (domain) `prov` offers with those hints, one entry per fi_info in
// the provider's order (tcp lists each interface once per address family).
// Empty, with *why, when it offers nothing.
std::vector<OfferedRail> offered_rails(const std::string& prov, std::string* why, bool want_hmem = false);

// One rail to open: the interface and the fi_info for it.
struct Rail {
  std::string name;     // interface (domain) name
  std::string address;  // its address, as text
  ProviderInfo info;
};
// The rails of `prov` on this host (choose_rails over offered_rails, `names` from
// DCCL_NET_IFNAME). Throws core::Error(dcclInvalidArgument) when a named interface
// is not offered (naming those that are); empty, with *why, when `prov` offers
// nothing and no name was given.
std::vector<Rail> find_rails(const std::string& prov, const std::vector<std::string>& names, std::string* why,
                             bool want_hmem = false);

}  // namespace dccl::net
