// Is peer-direct possible for a memory kind on this node? Checked layer by layer,
// each with pass/fail and the reason, for dccl-info and for the data-path choice.
#pragma once
#include <string>
#include <vector>

#include "mem/backend.hpp"

namespace dccl::net {
class Transport;
}

namespace dccl::mem {

struct Layer {
  std::string name;
  bool pass = false;
  std::string detail;
};

// kind_name: "sim" or "cuda" (or "host", always direct). provider: DCCL_PROVIDER value.
// net: the communicator's connected transport. With it, the "provider FI_HMEM" layer
// (cuda) comes from the endpoints actually opened (Transport::hmem_missing); without it
// (dccl-info: no communicator) from a separate fi_getinfo query of what providers offer.
// With it, a last layer "trusted network" fails when some peer is reached over an
// untrusted provider (Transport::untrusted_routes).
std::vector<Layer> check_viability(const std::string& kind_name, const std::string& provider,
                                   const net::Transport* net = nullptr);
// First failing layer, or nullptr when every layer passes.
const Layer* first_failure(const std::vector<Layer>& layers);

// libfabric at run time offers FI_MR_DMABUF (>= 1.20).
bool fabric_has_dmabuf();

}  // namespace dccl::mem
