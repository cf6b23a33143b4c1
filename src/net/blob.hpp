// The connection blob a rank publishes: its host identity, one address per endpoint
// (a network provider has one endpoint per rail, in rail order), and what the pair
// plan needs (net/rails.hpp): local rank, local size, stripe size, rail names, the
// flows wished and the addresses of each endpoint's further flows.
// Binary, compact, bounded (kMaxBlobBytes):
//   "DNB4" | host | boot id | pid | count | count x (provider, address)
//          | local rank u32 | local size u32 | stripe bytes u64 | count x rail name
//          | socket path address (net/sock/sock_path.hpp; "" when it does not listen)
//          | flows wished u8 | count x (k u8 | k x address of flow 1..k)
// Strings are u16-length-prefixed, integers little-endian. "DNB3" blobs (the same
// up to the rail names, then the socket path's address if it listens) decode with
// one flow per endpoint; "DNB2" blobs (the same up to the addresses, nothing
// after): one rail per endpoint, unnamed, local rank 0, local size unknown, no
// striping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dccl::net {

// Upper bound on an encoded blob (one is stored per rank; the store takes 16 MiB
// values, but the allgather of n blobs should stay small).
inline constexpr size_t kMaxBlobBytes = 16384;

struct Blob {
  std::string host;     // gethostname()
  std::string boot_id;  // /proc/sys/kernel/random/boot_id: tells apart hosts sharing a name
  int pid = 0;          // the rank's process (same-host peers watch it for exit)
  std::vector<std::pair<std::string, std::string>> endpoints;  // provider -> fi_getname bytes
  std::vector<std::string> rails{};  // rail (interface) name per endpoint, "" for none; may be empty
  int local_rank = 0;                // this process's local rank on its host (picks its rail)
  int local_size = 0;                // ranks on its host as the process counts them; 0: unknown
  uint64_t stripe_bytes = 0;         // DCCL_NET_STRIPE_BYTES (0: never striped)
  std::string sock{};                // SockPath::address(), "" when it has none
  int flows = 0;                     // DCCL_NET_FLOWS as set (0: automatic)
  // Per endpoint: the addresses of its further flows (endpoints on the same rail,
  // flows 1..k; flow 0 is the endpoint itself). May be empty: one flow each.
  std::vector<std::vector<std::string>> flow_addrs{};

  std::string encode() const;
  // Throws core::Error(dcclInvalidArgument) naming `whose` on malformed input.
  static Blob decode(const std::string& bytes, const std::string& whose);

  // The first address for `provider` (its home rail), or nullptr.
  const std::string* address_for(const std::string& provider) const;
  // Indices into `endpoints` of `provider`'s endpoints: its rails, in rail order.
  std::vector<size_t> rails_of(const std::string& provider) const;
  // Name of the endpoint's rail ("" when not published).
  std::string rail_name(size_t endpoint) const { return endpoint < rails.size() ? rails[endpoint] : std::string(); }
  bool same_host(const Blob& o) const { return host == o.host && boot_id == o.boot_id; }
  // Flows opened on the endpoint (1 + its further flows).
  int flows_on(size_t endpoint) const {
    return 1 + (endpoint < flow_addrs.size() ? static_cast<int>(flow_addrs[endpoint].size()) : 0);
  }
  // The address of flow `f` of the endpoint (f < flows_on(endpoint)).
  const std::string& flow_address(size_t endpoint, int f) const {
    return f == 0 ? endpoints[endpoint].second : flow_addrs[endpoint][static_cast<size_t>(f - 1)];
  }
};

// This process's host identity.
std::string local_hostname();
std::string local_boot_id();

}  // namespace dccl::net
