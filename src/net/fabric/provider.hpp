// Provider choice: names, fi_getinfo hints, the list of providers this node offers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "net/fabric/fid.hpp"
#include "net/rails.hpp"

namespace dccl::net {

inline constexpr const char* kShmProvider = "shm";
inline constexpr const char* kTcpProvider = "tcp;ofi_rxm";

// Which providers may carry the job's data as they are (docs/reliability.md, "Threat
// model (data plane)"): a provider is trusted when nothing outside the job's user on
// a host can make a message arrive as if a peer sent it. The one table:
//   shm             trusted: one host; its regions and CMA copies need the job user's
//                   own permissions
//   efa             trusted: peers are addressed by the fabric (address handles,
//                   queue pairs and keys set up through the device), not by packets
//                   anyone on the network can forge
//   verbs;ofi_rxm   trusted: the same, through the HCA's queue pairs
//   tcp;ofi_rxm     not trusted: libfabric 1.17's rxm takes a peer's identity from
//                   the connection's source address and the port it claims
//   udp;ofi_rxd     not trusted: datagrams, identity from the source address
//   sockets         not trusted: TCP, identity from the address it claims
//   anything else   not trusted (unknown)
// Host memory to peers reached over an untrusted provider goes through DirectCCL's
// socket path, which authenticates every connection with the job's secret; device
// memory to them is staged through it. DCCL_TRUST_NETWORK=1 trusts every provider.
struct ProviderTrust {
  const char* name;  // canonical provider name
  bool trusted;
  const char* why;
};
const std::vector<ProviderTrust>& provider_trust_table();
// Whether `prov` (canonical name) is trusted as it is; *why says why (or why not).
bool provider_trusted(const std::string& prov, std::string* why = nullptr);

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

// Why init refuses `source`=`prov` (canonical; not tcp;ofi_rxm, which falls back to the
// socket path): no provider here answers to the name (*missing set: dcclUnavailable),
// or it is not trusted on an untrusted network (`trust`: DCCL_TRUST_NETWORK;
// dcclInvalidUsage). "" when it may be opened. Init and dccl-info ask the same.
std::string forced_provider_refusal(const char* source, const std::string& prov, bool trust, bool* missing);

struct ProviderInfo {
  InfoPtr info;          // the one fi_info to open (a copy owned by us)
  bool mr_local = false; // the provider requires registered buffers (FI_MR_LOCAL)
  bool hmem = false;     // info->caps has FI_HMEM: the domain takes device memory
};

// A copy of `pi` (its fi_info duplicated): one more endpoint opened alike.
ProviderInfo duplicate(const ProviderInfo& pi);

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
