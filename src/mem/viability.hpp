// Is peer-direct possible for a memory kind on this node? Checked layer by layer,
// each with pass/fail and the reason, for dccl-info and for the data-path choice.
#pragma once
#include <cstdint>
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
// With it, and every other layer passing, a last layer "trial registration" registers
// a one-page dma-buf on the communicator's endpoints (trial_registration_layer).
std::vector<Layer> check_viability(const std::string& kind_name, const std::string& provider,
                                   net::Transport* net = nullptr);
// Exports one page of `be`'s memory and registers it on every endpoint `net` uses,
// as the direct path would (cuda: fi_mr_regattr with FI_MR_DMABUF; sim: the mapped
// memfd), then deregisters it: a provider that offers FI_HMEM may still be unable
// to import a dma-buf (aws-ofi-nccl checks the kernel's and the provider's support).
Layer trial_registration_layer(Backend& be, net::Transport& net);

// First failing layer, or nullptr when every layer passes.
const Layer* first_failure(const std::vector<Layer>& layers);

// libfabric at run time offers FI_MR_DMABUF (>= 1.20).
bool fabric_has_dmabuf();
// The libfabric runtime's version (fi_version(), or the test override).
uint32_t fabric_version();

// Tests: what the platform layers see. fabric_version 0: the runtime's;
// kernel_dmabuf -1: look at the kernel. Returns the previous override.
struct PlatformOverride {
  uint32_t fabric_version = 0;
  int kernel_dmabuf = -1;
};
PlatformOverride override_platform(const PlatformOverride& o);

}  // namespace dccl::mem
