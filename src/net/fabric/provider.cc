#include "net/fabric/provider.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/config.hpp"
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

const std::vector<ProviderTrust>& provider_trust_table() {
  static const std::vector<ProviderTrust> table = {
      {kShmProvider, true, "one host: its regions and CMA copies need the job user's own permissions"},
      {"efa", true, "peers are addressed by the fabric (address handles and queue keys set up through the device)"},
      {"verbs;ofi_rxm", true, "peers are addressed by the fabric (queue pairs set up through the HCA)"},
      {kTcpProvider, false, "rxm takes a peer's identity from the connection's source address and claimed port"},
      {"udp;ofi_rxd", false, "datagrams: a peer's identity comes from the source address"},
      {"sockets", false, "TCP: a peer's identity comes from the address it claims"},
  };
  return table;
}

bool provider_trusted(const std::string& prov, std::string* why) {
  for (const ProviderTrust& t : provider_trust_table())
    if (prov == t.name) {
      if (why) *why = t.why;
      return t.trusted;
    }
  if (why) *why = "not in DirectCCL's table of trusted providers";
  return false;
}

std::string forced_provider_refusal(const char* source, const std::string& prov, bool trust, bool* missing) {
  *missing = false;
  // A name no provider here answers to (a typo) is that, not a question of trust.
  const std::vector<std::string> avail = available_providers();
  if (std::find(avail.begin(), avail.end(), prov) == avail.end()) {
    *missing = true;
    return std::string(source) + " " + prov + " names no libfabric provider on this machine";
  }
  std::string why;
  if (trust || provider_trusted(prov, &why)) return "";
  return std::string(source) + " " + prov + " is not trusted (" + why +
         "): set DCCL_TRUST_NETWORK=1 where only the job can reach the network, or DCCL_PROVIDER=tcp for "
         "DirectCCL's authenticated sockets";
}

std::string set_provider_defaults(uint64_t rxm_eager_bytes) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (rxm_eager_bytes > 0) setenv("FI_OFI_RXM_EAGER_LIMIT", std::to_string(rxm_eager_bytes).c_str(), 0);
  });
  const char* v = core::env_value("FI_OFI_RXM_EAGER_LIMIT");
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

namespace {

// fi_getinfo with our hints for `prov`: the first combination that offers anything
// (see find_provider), filtered to exact provider-name matches where there are
// any. Empty list and *rc set when none.
InfoPtr getinfo_list(const std::string& prov, bool want_hmem, int* rc) {
  for (int attempt = want_hmem ? 0 : 4; attempt < 8; ++attempt) {
    const bool hmem = attempt < 4, mr_local = attempt % 4 >= 2, manual = attempt % 2 == 0;
    InfoPtr hints = make_hints(prov, mr_local, manual, hmem);
    fi_info* list = nullptr;
    *rc = fi_getinfo(api_version(), nullptr, nullptr, 0, hints.get(), &list);
    if (*rc == 0 && list) return InfoPtr(list);
    if (list) fi_freeinfo(list);
  }
  return nullptr;
}

// A layered name ("tcp;ofi_rxm") must match exactly, not just its core provider.
bool exact(const fi_info* i, const std::string& prov) {
  return !i->fabric_attr->prov_name || prov == i->fabric_attr->prov_name;
}

ProviderInfo make_info(const fi_info* best) {
  ProviderInfo r;
  r.info.reset(fi_dupinfo(best));
  if (!r.info) core::raise(dcclSystemError, "fi_dupinfo failed");
  r.mr_local = (r.info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  r.hmem = (r.info->caps & FI_HMEM) != 0;
  return r;
}

std::string not_found(int rc) {
  return "fi_getinfo found no RDM endpoint with tagged, directed, send-after-send ordered "
         "messages (" + std::string(fi_strerror(rc < 0 ? -rc : rc)) + ")";
}

std::string address_text(const fi_info* i) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (i->addr_format == FI_SOCKADDR_IN && i->src_addr && i->src_addrlen >= sizeof(sockaddr_in))
    inet_ntop(AF_INET, &static_cast<const sockaddr_in*>(i->src_addr)->sin_addr, buf, sizeof(buf));
  else if (i->addr_format == FI_SOCKADDR_IN6 && i->src_addr && i->src_addrlen >= sizeof(sockaddr_in6))
    inet_ntop(AF_INET6, &static_cast<const sockaddr_in6*>(i->src_addr)->sin6_addr, buf, sizeof(buf));
  return buf;
}

// The exactly matching entries of `list` (all of them when none matches exactly).
std::vector<const fi_info*> matching(const fi_info* list, const std::string& prov) {
  std::vector<const fi_info*> out;
  for (const fi_info* i = list; i; i = i->next)
    if (exact(i, prov)) out.push_back(i);
  if (out.empty())
    for (const fi_info* i = list; i; i = i->next) out.push_back(i);
  return out;
}

}  // namespace

ProviderInfo find_provider(const std::string& prov, std::string* why, bool want_hmem) {
  // With want_hmem, every combination first with FI_HMEM, then without (the
  // provider does not offer it; viability then keeps device memory staged).
  // First without FI_MR_LOCAL (host memory then needs no registration); only when the
  // provider offers nothing that way, accept FI_MR_LOCAL and register internally.
  // Manual progress preferred, any progress model accepted.
  int rc = 0;
  InfoPtr list = getinfo_list(prov, want_hmem, &rc);
  if (!list) {
    if (why) *why = not_found(rc);
    return ProviderInfo{};
  }
  const fi_info* best = pick(list.get());
  if (!exact(best, prov)) {
    for (const fi_info* i = list.get(); i; i = i->next)
      if (exact(i, prov)) {
        best = i;
        break;
      }
  }
  return make_info(best);
}

ProviderInfo duplicate(const ProviderInfo& pi) { return make_info(pi.info.get()); }

std::vector<OfferedRail> offered_rails(const std::string& prov, std::string* why, bool want_hmem) {
  std::vector<OfferedRail> out;
  int rc = 0;
  InfoPtr list = getinfo_list(prov, want_hmem, &rc);
  if (!list) {
    if (why) *why = not_found(rc);
    return out;
  }
  for (const fi_info* i : matching(list.get(), prov)) {
    OfferedRail o;
    o.name = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "";
    o.ipv4 = i->addr_format == FI_SOCKADDR_IN;
    o.address = address_text(i);
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<Rail> find_rails(const std::string& prov, const std::vector<std::string>& names, std::string* why,
                             bool want_hmem) {
  std::vector<Rail> out;
  int rc = 0;
  InfoPtr list = getinfo_list(prov, want_hmem, &rc);
  if (!list) {
    if (why) *why = not_found(rc);
    if (!names.empty())  // a named interface cannot be checked: say so instead of ignoring it
      core::raise(dcclInvalidArgument, "DCCL_NET_IFNAME is set but " + prov + " offers nothing: " + not_found(rc));
    return out;
  }
  const std::vector<const fi_info*> infos = matching(list.get(), prov);
  std::vector<OfferedRail> offered;
  for (const fi_info* i : infos) {
    OfferedRail o;
    o.name = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "";
    o.ipv4 = i->addr_format == FI_SOCKADDR_IN;
    o.address = address_text(i);
    offered.push_back(std::move(o));
  }
  for (size_t k : choose_rails(offered, names, prov)) {
    Rail r;
    r.name = offered[k].name;
    r.address = offered[k].address;
    r.info = make_info(infos[k]);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace dccl::net
