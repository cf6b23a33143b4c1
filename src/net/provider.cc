#include "net/provider.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/error.hpp"

namespace dccl::net {

namespace {

constexpr uint32_t kMinApi = FI_VERSION(1, 17);

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  size_t e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

InfoPtr make_hints(const std::string& prov, bool mr_local, bool manual, bool hmem) {
  InfoPtr h(fi_allocinfo());
  if (!h) core::raise(dcclSystemError, "fi_allocinfo failed");
  h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
  if (hmem) h->caps |= FI_HMEM;
  h->mode = FI_CONTEXT | FI_CONTEXT2;  // every op carries an fi_context2 of ours
  h->ep_attr->type = FI_EP_RDM;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  // We serialise all calls on one domain with our own mutex.
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (mr_local) h->domain_attr->mr_mode |= FI_MR_LOCAL;
  // We register device memory before passing it (the dma-buf registration).
  if (hmem) h->domain_attr->mr_mode |= FI_MR_HMEM;
  // We progress from every wait(); manual progress avoids the provider's own thread
  // (sockets with auto progress: 7 ms ping-pong instead of 22 us).
  if (manual) h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  if (!prov.empty()) h->fabric_attr->prov_name = strdup(prov.c_str());
  return h;
}

// Among several fabrics (tcp lists one per interface and address family) prefer a
// routable IPv4 one: it is what peers on other hosts can reach.
const fi_info* pick(const fi_info* list) {
  for (const fi_info* i = list; i; i = i->next)
    if (i->addr_format == FI_SOCKADDR_IN && i->domain_attr->name &&
        strcmp(i->domain_attr->name, "lo") != 0)
      return i;
  for (const fi_info* i = list; i; i = i->next)
    if (i->addr_format == FI_SOCKADDR_IN) return i;
  return list;
}

}  // namespace

uint32_t api_version() {
  uint32_t v = fi_version();
  if (v < kMinApi)
    core::raise(dcclUnavailable, "libfabric " + std::to_string(FI_MAJOR(v)) + "." +
                                     std::to_string(FI_MINOR(v)) +
                                     " is too old: DirectCCL needs 1.17 or newer");
  return v;
}

std::string canonical_provider(const std::string& name) {
  std::string n = trim(name);
  if (n == "tcp") return kTcpProvider;
  if (n == "udp") return "udp;ofi_rxd";
  if (n == "verbs") return "verbs;ofi_rxm";
  return n;
}

std::string set_provider_defaults(uint64_t rxm_eager_bytes) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (rxm_eager_bytes > 0) setenv("FI_OFI_RXM_EAGER_LIMIT", std::to_string(rxm_eager_bytes).c_str(), 0);
  });
  const char* v = getenv("FI_OFI_RXM_EAGER_LIMIT");
  return v ? v : "";
}

std::vector<std::string> available_providers() {
  std::vector<std::string> out;
  InfoPtr hints(fi_allocinfo());
  if (!hints) return out;
  hints->caps = FI_TAGGED;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->mode = ~0ULL;
  fi_info* list = nullptr;
  if (fi_getinfo(api_version(), nullptr, nullptr, 0, hints.get(), &list) != 0) return out;
  InfoPtr owner(list);
  for (const fi_info* i = list; i; i = i->next) {
    const char* p = i->fabric_attr ? i->fabric_attr->prov_name : nullptr;
    if (p && std::find(out.begin(), out.end(), p) == out.end()) out.emplace_back(p);
  }
  return out;
}

ProviderInfo find_provider(const std::string& prov, std::string* why, bool want_hmem) {
  ProviderInfo r;
  int rc = 0;
  // With want_hmem, every combination below first with FI_HMEM, then without (the
  // provider does not offer it; viability then keeps device memory staged).
  // First without FI_MR_LOCAL (host memory then needs no registration); only when the
  // provider offers nothing that way, accept FI_MR_LOCAL and register internally.
  // Manual progress preferred, any progress model accepted.
  for (int attempt = want_hmem ? 0 : 4; attempt < 8; ++attempt) {
    const bool hmem = attempt < 4, mr_local = attempt % 4 >= 2, manual = attempt % 2 == 0;
    InfoPtr hints = make_hints(prov, mr_local, manual, hmem);
    fi_info* list = nullptr;
    rc = fi_getinfo(api_version(), nullptr, nullptr, 0, hints.get(), &list);
    if (rc != 0 || !list) continue;
    InfoPtr owner(list);
    const fi_info* best = pick(list);
    // A layered name ("tcp;ofi_rxm") must match exactly, not just its core provider.
    if (best->fabric_attr->prov_name && prov != best->fabric_attr->prov_name) {
      const fi_info* exact = nullptr;
      for (const fi_info* i = list; i && !exact; i = i->next)
        if (i->fabric_attr->prov_name && prov == i->fabric_attr->prov_name) exact = i;
      if (exact) best = exact;
    }
    r.info.reset(fi_dupinfo(best));
    if (!r.info) core::raise(dcclSystemError, "fi_dupinfo failed");
    r.mr_local = (r.info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
    r.hmem = (r.info->caps & FI_HMEM) != 0;
    return r;
  }
  if (why)
    *why = "fi_getinfo found no RDM endpoint with tagged, directed, send-after-send ordered "
           "messages (" + std::string(fi_strerror(rc < 0 ? -rc : rc)) + ")";
  return r;
}

}  // namespace dccl::net
