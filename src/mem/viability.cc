#include "mem/viability.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "net/fabric/fi_dmabuf_compat.hpp"
#include "net/transport.hpp"

namespace dccl::mem {

namespace {

PlatformOverride g_platform;  // set by tests before any communicator exists

std::string version_text(uint32_t v) {
  return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
}

Layer kernel_layer(bool emulated) {
  if (emulated) return {"kernel dma-buf", true, "emulated: the sim backend exports a memfd"};
  if (g_platform.kernel_dmabuf >= 0)
    return {"kernel dma-buf", g_platform.kernel_dmabuf == 1, "as set by a test"};
  std::ifstream ks("/proc/kallsyms");
  std::string line;
  while (std::getline(ks, line))
    if (line.find(" dma_buf_export") != std::string::npos) return {"kernel dma-buf", true, "dma_buf_export present"};
  if (access("/sys/kernel/dmabuf", F_OK) == 0) return {"kernel dma-buf", true, "/sys/kernel/dmabuf present"};
  return {"kernel dma-buf", false, "no dma-buf support found in /proc/kallsyms or /sys/kernel/dmabuf"};
}

constexpr const char* kHmemLayer = "provider FI_HMEM";

// The endpoints the communicator actually opened: a domain opened without FI_HMEM
// treats a device address as host memory (fi_mr(3)), whatever the provider offers.
Layer hmem_layer(const net::Transport& net) {
  std::string missing = net.hmem_missing();
  if (!missing.empty()) return {kHmemLayer, false, missing};
  return {kHmemLayer, true, "every endpoint in use (" + net.provider_summary() + ") was opened with FI_HMEM"};
}

// No communicator (dccl-info): which providers offer FI_HMEM for RDM tagged endpoints.
Layer hmem_offered_layer(const std::string& provider) {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG | FI_HMEM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_HMEM | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider == "tcp" ? "tcp;ofi_rxm" : provider.c_str());
  fi_info* info = nullptr;
  int rc = fi_getinfo(fi_version(), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc != 0 || !info)
    return {kHmemLayer, false,
            "offered by no provider" + (provider.empty() ? std::string() : " named '" + provider + "'")};
  std::vector<std::string> names;
  for (const fi_info* i = info; i; i = i->next)
    if (i->fabric_attr->prov_name && std::find(names.begin(), names.end(), i->fabric_attr->prov_name) == names.end())
      names.emplace_back(i->fabric_attr->prov_name);
  fi_freeinfo(info);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  return {kHmemLayer, true, "offered by " + list};
}

}  // namespace

uint32_t fabric_version() { return g_platform.fabric_version ? g_platform.fabric_version : fi_version(); }

bool fabric_has_dmabuf() { return fabric_version() >= kDmabufMinVersion; }

PlatformOverride override_platform(const PlatformOverride& o) {
  PlatformOverride old = g_platform;
  g_platform = o;
  return old;
}

Layer trial_registration_layer(Backend& be, net::Transport& net) {
  const char* name = "trial registration";
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = nullptr;
  void* map = nullptr;
  size_t map_len = 0;
  net::MemRegion* mr = nullptr;
  Layer out{name, false, ""};
  try {
    p = be.alloc(page);
    DmaBuf d = be.export_dmabuf(p, page);
    if (be.kind() == Kind::Cuda) {
      mr = net.register_dmabuf(d.fd, d.offset, page, static_cast<char*>(p) - d.offset, FI_HMEM_CUDA, be.device());
      if (!mr) out.detail = "the transport (" + net.provider_summary() + ") made no dma-buf registration";
    } else {
      const uint64_t aligned = d.offset & ~static_cast<uint64_t>(page - 1);
      map_len = page + (d.offset - aligned);
      map = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd, static_cast<off_t>(aligned));
      if (map == MAP_FAILED) {
        map = nullptr;
        out.detail = std::string("mmap of the dma-buf failed: ") + strerror(errno);
      } else {
        mr = net.register_memory(static_cast<char*>(map) + (d.offset - aligned), page);
        out.pass = true;  // nullptr: the transport needs no registration of host memory
      }
    }
    if (mr) out.pass = true;
    if (out.pass)
      out.detail = "a one-page " + std::string(be.name()) + " dma-buf was registered on every endpoint in use (" +
                   net.provider_summary() + ")";
  } catch (const std::exception& e) {
    out.pass = false;
    out.detail = std::string("registering a one-page ") + be.name() + " dma-buf failed: " + e.what();
  }
  try {
    if (mr) net.deregister_memory(mr);
  } catch (const std::exception& e) {
    out = {name, false, std::string("deregistering the trial dma-buf failed: ") + e.what()};
  }
  if (map) munmap(map, map_len);
  if (p) be.free(p);
  return out;
}

const Layer* first_failure(const std::vector<Layer>& layers) {
  for (const auto& l : layers)
    if (!l.pass) return &l;
  return nullptr;
}

std::vector<Layer> check_viability(const std::string& kind, const std::string& provider,
                                   net::Transport* net) {
  std::vector<Layer> out;
  if (kind == "host") {
    out.push_back({"host memory", true, "the transport reads host memory directly"});
    return out;
  }
  const bool sim = kind == "sim";
  out.push_back(kernel_layer(sim));
  Backend* be = sim ? &sim_backend() : cuda_backend();
  auto fabric_layers = [&] {
    bool ok = fabric_has_dmabuf();
    out.push_back({"libfabric >= 1.20", ok,
                   "runtime " + version_text(fabric_version()) + (ok ? "" : ": FI_MR_DMABUF needs 1.20")});
    out.push_back(net ? hmem_layer(*net) : hmem_offered_layer(provider));
  };
  if (!be) {
    out.push_back({"backend export", false, "cuda backend unavailable: " + cuda_unavailable_reason()});
    fabric_layers();
    return out;
  }
  // Trial export (and, for sim, the mapping the transport makes of it).
  void* p = nullptr;
  try {
    p = be->alloc(4096);
    DmaBuf d = be->export_dmabuf(p, 4096);
    out.push_back({"backend export", true, std::string(be->name()) + " exported a dma-buf fd"});
    if (sim) {
      long page = sysconf(_SC_PAGESIZE);
      uint64_t aligned = d.offset & ~static_cast<uint64_t>(page - 1);
      void* m = mmap(nullptr, 4096 + (d.offset - aligned), PROT_READ | PROT_WRITE, MAP_SHARED, d.fd,
                     static_cast<off_t>(aligned));
      if (m == MAP_FAILED) {
        out.push_back({"transport mapping", false, std::string("mmap of the dma-buf failed: ") + strerror(errno)});
      } else {
        munmap(m, 4096 + (d.offset - aligned));
        out.push_back({"transport mapping", true,
                       "the dma-buf is mapped and registered by the transport (libfabric " +
                           version_text(fi_version()) + "; FI_MR_DMABUF not required)"});
      }
    }
  } catch (const core::Error& e) {
    out.push_back({"backend export", false, e.what()});
  }
  if (p) be->free(p);
  if (!sim) fabric_layers();
  // Device memory moves only over trusted providers; peers reached over another one
  // get it staged through the authenticated socket path (net/fabric/provider.hpp).
  if (net) {
    const std::string why = net->untrusted_routes();
    out.push_back({"trusted network", why.empty(),
                   why.empty() ? "every peer is reached over a trusted provider (or DCCL_TRUST_NETWORK=1)" : why});
  }
  // The communicator's own domains: can they import this backend's dma-buf?
  if (net && !first_failure(out)) out.push_back(trial_registration_layer(*be, *net));
  return out;
}

}  // namespace dccl::mem
