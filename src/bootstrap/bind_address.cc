#include "bootstrap/bind_address.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/socket.hpp"

namespace dccl::boot {

namespace {

// Interface of the default route with the lowest metric, from /proc/net/route.
std::string default_route_iface() {
  std::ifstream f("/proc/net/route");
  std::string line, best;
  long best_metric = -1;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string iface, dest, gw, flags, refcnt, use, metric, mask;
    if (!(s >> iface >> dest >> gw >> flags >> refcnt >> use >> metric >> mask)) continue;
    if (dest != "00000000" || mask != "00000000") continue;
    if ((std::strtoul(flags.c_str(), nullptr, 16) & 0x1) == 0) continue;  // RTF_UP
    long m = std::strtol(metric.c_str(), nullptr, 10);
    if (best_metric < 0 || m < best_metric) {
      best = iface;
      best_metric = m;
    }
  }
  return best;
}

}  // namespace

std::string default_bind_host() {
  const std::string ifname_text = core::setting_text("DCCL_SOCKET_IFNAME");
  const char* ifname = ifname_text.c_str();
  if (*ifname) {
    std::string a = sock::iface_address(ifname);
    if (a.empty())
      core::raise(dcclInvalidArgument,
                  core::describe(-1, "choose bootstrap address",
                                 std::string("DCCL_SOCKET_IFNAME=") + ifname +
                                     ": no such interface, or it has no usable IP address"));
    DCCL_INFO("bootstrap: store address %s from DCCL_SOCKET_IFNAME=%s", a.c_str(), ifname);
    return a;
  }
  std::string iface = default_route_iface();
  if (!iface.empty()) {
    std::string a = sock::iface_address(iface);
    if (!a.empty()) {
      DCCL_INFO("bootstrap: store address %s of default-route interface %s", a.c_str(), iface.c_str());
      return a;
    }
  }
  DCCL_INFO("bootstrap: no default route with an address; the store uses 127.0.0.1 (set "
            "DCCL_SOCKET_IFNAME to reach other hosts)");
  return "127.0.0.1";
}

}  // namespace dccl::boot
