// The connection blob a rank publishes: its host identity and one address per endpoint.
// Binary, compact: "DNB1" | host | boot id | count | count x (provider, address).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dccl::net {

struct Blob {
  std::string host;     // gethostname()
  std::string boot_id;  // /proc/sys/kernel/random/boot_id: tells apart hosts sharing a name
  int pid = 0;          // the rank's process (same-host peers watch it for exit)
  std::vector<std::pair<std::string, std::string>> endpoints;  // provider -> fi_getname bytes

  std::string encode() const;
  // Throws core::Error(dcclInvalidArgument) naming `whose` on malformed input.
  static Blob decode(const std::string& bytes, const std::string& whose);

  const std::string* address_for(const std::string& provider) const;
  bool same_host(const Blob& o) const { return host == o.host && boot_id == o.boot_id; }
};

// This process's host identity.
std::string local_hostname();
std::string local_boot_id();

}  // namespace dccl::net
