// Registrations on a domain opened for the purpose, without a communicator
// (dccl-info --dmabuf-check): can a provider import what the direct path would
// give it? A communicator makes the same trial on its own endpoints
// (mem/viability.hpp, "trial registration").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dccl::net {

enum class Verdict { Pass, Fail, NotApplicable };

struct TrialResult {
  Verdict verdict = Verdict::Fail;
  std::string detail;
};

// [p, p+len) of host memory (a mapped sim dma-buf) registered with fi_mr_reg on a
// domain of the first of `providers` that opens.
TrialResult trial_register_host(const std::vector<std::string>& providers, void* p, size_t len);

// A dma-buf registered with fi_mr_regattr(FI_MR_DMABUF) on a domain opened with
// FI_HMEM, of the first of `providers` offering FI_HMEM. base: where the dma-buf's
// first byte is seen (the device address less the offset). Not applicable when the
// libfabric runtime (version `fabric_version`) is older than 1.20 or no provider
// offers FI_HMEM.
TrialResult trial_register_dmabuf(const std::vector<std::string>& providers, uint32_t fabric_version, int fd,
                                  uint64_t offset, size_t len, void* base, int iface, int device);

}  // namespace dccl::net
