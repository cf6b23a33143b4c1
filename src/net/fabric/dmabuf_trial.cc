#include "net/fabric/dmabuf_trial.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "core/error.hpp"
#include "net/fabric/fi_dmabuf_compat.hpp"
#include "net/fabric/fid.hpp"
#include "net/fabric/provider.hpp"

namespace dccl::net {

namespace {

std::string version_text(uint32_t v) { return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v)); }

std::string fi_text(const char* call, int rc) {
  return std::string(call) + " failed: " + fi_strerror(rc < 0 ? -rc : rc) + " (" + std::to_string(rc) + ")";
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A fabric and domain of one provider, opened for a trial registration.
struct Domain {
  ProviderInfo info;
  Fid<fid_fabric> fabric;
  Fid<fid_domain> domain;
  // "" when open, else why not.
  std::string open(const std::string& prov, bool hmem) {
    std::string why;
    info = find_provider(canonical_provider(prov), &why, hmem);
    if (!info.info) return prov + ": " + why;
    if (hmem && !info.hmem) return prov + " does not offer FI_HMEM";
    int rc = fi_fabric(info.info->fabric_attr, fabric.out(), nullptr);
    if (rc) return prov + ": " + fi_text("fi_fabric", rc);
    rc = fi_domain(fabric.get(), info.info.get(), domain.out(), nullptr);
    if (rc) return prov + ": " + fi_text("fi_domain", rc);
    return {};
  }
};

}  // namespace

TrialResult trial_register_host(const std::vector<std::string>& providers, void* p, size_t len) {
  std::vector<std::string> why;
  for (const auto& prov : providers) {
    try {
      Domain d;
      std::string err = d.open(prov, false);
      if (!err.empty()) {
        why.push_back(err);
        continue;
      }
      Fid<fid_mr> mr;
      int rc = fi_mr_reg(d.domain.get(), p, len, FI_SEND | FI_RECV, 0, 1, 0, mr.out(), nullptr);
      if (rc) return {Verdict::Fail, prov + ": " + fi_text("fi_mr_reg", rc)};
      return {Verdict::Pass, "fi_mr_reg of the mapped dma-buf (" + std::to_string(len) + " bytes) on a " + prov +
                                 " domain"};
    } catch (const std::exception& e) {
      why.push_back(prov + ": " + e.what());
    }
  }
  return {Verdict::Fail, "no provider opened a domain (" + join(why) + ")"};
}

TrialResult trial_register_dmabuf(const std::vector<std::string>& providers, uint32_t fabric_version, int fd,
                                  uint64_t offset, size_t len, void* base, int iface, int device) {
  if (fabric_version < mem::kDmabufMinVersion)
    return {Verdict::NotApplicable, "libfabric " + version_text(fabric_version) + " has no FI_MR_DMABUF (needs 1.20)"};
  std::vector<std::string> why;
  for (const auto& prov : providers) {
    try {
      Domain d;
      std::string err = d.open(prov, true);
      if (!err.empty()) {
        why.push_back(err);
        continue;
      }
      const fi_mr_dmabuf dmabuf{fd, offset, len, base};
      Fid<fid_mr> mr;
      int rc = mem::regattr_dmabuf(d.domain.get(), dmabuf, iface, device, 1, mr.out());
      if (rc) return {Verdict::Fail, prov + " (FI_HMEM): " + fi_text("fi_mr_regattr(FI_MR_DMABUF)", rc)};
      return {Verdict::Pass, "fi_mr_regattr(FI_MR_DMABUF) of the exported fd (" + std::to_string(len) +
                                 " bytes) on a " + prov + " domain opened with FI_HMEM"};
    } catch (const std::exception& e) {
      why.push_back(prov + ": " + e.what());
    }
  }
  return {Verdict::NotApplicable, "no provider offers FI_HMEM here (" + join(why) + ")"};
}

}  // namespace dccl::net
