// dccl-info's checks of the settings init reads after loading them; see settings.hpp.
#include "bootstrap/env_init.hpp"
#include "settings.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/socket.hpp"
#include "net/fabric/provider.hpp"
#include "net/rails.hpp"
#include "tune/tuner.hpp"

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

bool trust_network() {
  try {
    return dccl::core::parse_bool(dccl::core::setting_text("DCCL_TRUST_NETWORK"), "DCCL_TRUST_NETWORK");
  } catch (const dccl::core::Error&) {
    return false;  // flagged as DCCL_TRUST_NETWORK's own error
  }
}

// As the transport decides at init (net::forced_provider_refusal).
std::string provider_refusal(const char* source, const std::string& given) {
  using namespace dccl::net;
  const std::string p = canonical_provider(given);
  if (p.empty() || p == kTcpProvider) return "";
  bool missing = false;
  const std::string why = forced_provider_refusal(source, p, trust_network(), &missing);
  return missing ? why + "; available RDM providers: " + join(available_providers()) : why;
}

// The rails tcp;ofi_rxm opens or publishes: a named interface it does not offer fails
// init, unless another provider is forced (which ignores DCCL_NET_IFNAME).
std::string ifname_refusal(const char* value) {
  using namespace dccl::net;
  const std::string forced = canonical_provider(dccl::core::provider_choice());
  if (!forced.empty() && forced != kTcpProvider) return "";
  try {
    std::string why;
    find_rails(kTcpProvider, parse_ifnames(value), &why, false);
  } catch (const dccl::core::Error& e) {
    return e.what();
  }
  return "";
}

// dcclCommInitFromEnv reads DCCL_ADDR and DCCL_SECRET when DCCL_ID is not set
// (bootstrap/env_init.cc): host:port with a port from 1 to 65535, 32 hex digits.
std::string addr_refusal(const char* value) {
  std::string host;
  int port = 0;
  try {
    dccl::boot::parse_store_addr(value, &host, &port);
  } catch (const dccl::core::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

std::string init_refusal(const char* name, const char* value) {
  if (!value) return "";
  try {
    if (!strcmp(name, "DCCL_ALGO")) {
      dccl::tune::check_algo_override(value);
    } else if (!strcmp(name, "DCCL_PROVIDER")) {
      if (*value) return provider_refusal("DCCL_PROVIDER", value);
    } else if (!strcmp(name, "DCCL_NET_IFNAME")) {
      return ifname_refusal(value);
    } else if (!strcmp(name, "DCCL_ADDR")) {
      if (!dccl::core::env_value("DCCL_ID")) return addr_refusal(value);
    } else if (!strcmp(name, "DCCL_SOCKET_IFNAME")) {
      dccl::sock::check_socket_ifname(value);
    } else if (!strcmp(name, "DCCL_SECRET")) {
      if (!dccl::core::env_value("DCCL_ID")) dccl::boot::secret_from_hex(value);
    } else if (!strcmp(name, "FI_PROVIDER")) {
      // Read as the provider when DCCL_PROVIDER is unset and it names one provider.
      if (dccl::core::env_text("DCCL_PROVIDER").empty() && !dccl::core::provider_choice().empty())
        return provider_refusal("FI_PROVIDER", value);
    }
  } catch (const dccl::core::Error& e) {
    return std::string(strncmp(e.what(), name, strlen(name)) ? std::string(name) + ": " : "") + e.what();
  }
  return "";
}

std::string unknown_plan_provider(const std::string& summary) {
  using namespace dccl::net;
  std::vector<std::string> known;
  for (const auto& t : provider_trust_table()) known.push_back(t.name);
  const std::vector<std::string> avail = available_providers();
  size_t at = 0;
  while (true) {
    const size_t plus = summary.find('+', at);
    const std::string part = canonical_provider(summary.substr(at, plus == std::string::npos ? plus : plus - at));
    if (part.empty() || (std::find(known.begin(), known.end(), part) == known.end() &&
                         std::find(avail.begin(), avail.end(), part) == avail.end()))
      return "'" + summary + "' names " + (part.empty() ? "an empty provider" : "no provider '" + part + "'") +
             " (known: " + join(known) + "; tcp, udp and verbs for short; offered here: " + join(avail) +
             "; a mix joined by +, e.g. shm+tcp)";
    if (plus == std::string::npos) return "";
    at = plus + 1;
  }
}
