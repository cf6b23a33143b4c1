// EmuNet's leaf-spine fabric (dccl-run --fabric): builds the namespaces fabric.hpp
// describes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "dccl-run/fabric.hpp"
#include "dccl-run/netns.hpp"

namespace dcclrun {
namespace {

// "<c><n>" (not "x" + std::to_string(n): GCC 12 -Wrestrict false positive).
std::string dev_name(char c, int n) {
  std::string s(1, c);
  s += std::to_string(n);
  return s;
}

}  // namespace

bool EmuNet::build_fabric(std::string* why) {
  const NetSpec& f = spec_;
  const std::vector<std::string> all = all_ns();
  std::string add;
  for (const auto& n : all) add += "netns add " + n + "\n";
  if (!run({ip_, "-b", "-"}, add, why)) {
    *why = "cannot create the network namespaces: " + *why;
    return false;
  }
  auto leaf_ns = [&](int l) { return tag_ + "-l" + std::to_string(l); };
  auto spine_ns = [&](int s) { return tag_ + "-s" + std::to_string(s); };
  // Leaves first: they make the veths, whose other ends land in hosts and spines.
  for (int l = 0; l < f.leaves; ++l)
    if (!run({ip_, "-n", leaf_ns(l), "-b", "-"}, leaf_batch(f, l, tag_), why)) {
      *why = "cannot build leaf " + std::to_string(l) + " (namespace " + leaf_ns(l) + "): " + *why;
      return false;
    }
  for (int s = 0; s < f.spines; ++s)
    if (!run({ip_, "-n", spine_ns(s), "-b", "-"}, spine_batch(f, s), why)) {
      *why = "cannot build spine " + std::to_string(s) + " (namespace " + spine_ns(s) + "): " + *why;
      return false;
    }
  for (int h = 0; h < f.hosts; ++h)
    if (!run({ip_, "-n", ns_name(h), "-b", "-"}, host_batch(f, h), why)) {
      *why = "cannot configure emulated host " + std::to_string(h) + " (namespace " + ns_name(h) + "): " + *why;
      return false;
    }
  // Routers forward, and hash flows onto the spines by addresses, protocol and
  // ports. Policy 3 with those fields, not policy 1: for a forwarded packet policy 1
  // takes the hash the sending socket gave it (random per connection, drawn anew
  // after a timeout; veths carry it across namespaces), not its ports.
  const std::pair<const char*, const char*> sysctls[] = {
      {"ip_forward", "1"}, {"fib_multipath_hash_fields", "0x37"}, {"fib_multipath_hash_policy", "3"}};
  for (const auto& n : router_ns()) {
    const int fd = ::open(("/run/netns/" + n).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *why = "cannot open /run/netns/" + n + ": " + std::strerror(errno);
      return false;
    }
    std::string failed;
    const bool entered = in_netns(fd, n, [&] {
      for (const auto& [k, v] : sysctls) {
        const std::string p = std::string("/proc/sys/net/ipv4/") + k;
        std::ofstream out(p);
        out << v << "\n";
        out.flush();
        if (!out && failed.empty()) failed = "cannot write " + std::string(v) + " to " + p + " in namespace " + n;
      }
    }, why);
    ::close(fd);
    if (!entered) return false;
    if (!failed.empty()) {
      *why = failed;
      return false;
    }
  }
  // Shaping: tbf on both ends of every link; a host NIC with a flow cap gets htb.
  if (f.rate_bps > 0 || f.flow_bps > 0) {
    for (int l = 0; l < f.leaves && f.rate_bps > 0; ++l) {
      std::string b;
      for (int h = 0; h < f.hosts; ++h)
        if (leaf_of(f, h) == l) b += tbf_batch(dev_name('h', h), f.rate_bps, f.mtu);
      for (int s = 0; s < f.spines; ++s) b += tbf_batch(dev_name('s', s), f.rate_bps, f.mtu);
      if (!run({tc_, "-n", leaf_ns(l), "-b", "-"}, b, why)) {
        *why = "cannot shape the links of leaf " + std::to_string(l) + ": " + *why;
        return false;
      }
    }
    for (int s = 0; s < f.spines && f.rate_bps > 0; ++s) {
      std::string b;
      for (int l = 0; l < f.leaves; ++l) b += tbf_batch(dev_name('l', l), f.rate_bps, f.mtu);
      if (!run({tc_, "-n", spine_ns(s), "-b", "-"}, b, why)) {
        *why = "cannot shape the links of spine " + std::to_string(s) + ": " + *why;
        return false;
      }
    }
    for (int h = 0; h < f.hosts; ++h) {
      const std::string b = f.flow_bps > 0 ? flow_cap_batch("eth0", f.rate_bps, f.flow_bps, f.mtu)
                                           : tbf_batch("eth0", f.rate_bps, f.mtu);
      if (!run({tc_, "-n", ns_name(h), "-b", "-"}, b, why)) {
        *why = "cannot shape the NIC of emulated host " + std::to_string(h) + ": " + *why;
        return false;
      }
    }
  }
  return open_namespaces(why);
}

std::string EmuNet::fabric_summary() const {
  const NetSpec& f = spec_;
  std::string s = std::to_string(f.hosts) + " emulated hosts (namespaces " + ns_name(0) + "..h" +
                  std::to_string(f.hosts - 1) + ") under " + std::to_string(f.leaves) + " leaves (" + tag_ +
                  "-l<l>, hosts 198.18.<leaf>.<host+1>/24) and " + std::to_string(f.spines) + " spines (" + tag_ +
                  "-s<s>), ECMP with layer-4 hashing between leaves, store on " + store_address();
  if (f.mtu > 0) s += ", MTU " + std::to_string(f.mtu);
  if (f.rate_bps > 0) s += ", every link shaped to " + rate_text(f.rate_bps) + " both ways";
  if (f.flow_bps > 0)
    s += ", each TCP flow capped at " + rate_text(f.flow_bps) + " (htb on the hosts' eth0, " +
         std::to_string(kFlowBuckets) + " port buckets)";
  return s;
}

}  // namespace dcclrun
