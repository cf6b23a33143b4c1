// The leaf-spine fabric's configuration; see fabric.hpp.
#include "dccl-run/fabric.hpp"

#include <algorithm>
#include <cstdio>

#include "dccl-run/netns.hpp"

namespace dcclrun {
namespace {

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%x", v);
  return buf;
}

std::string num(const char* prefix, long n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

// Leaf l's end of its link to spine s, and the spine's: a /31 in 198.19.<s>.0/24.
std::string uplink_address(int leaf, int spine) { return num("198.19.", spine) + num(".", 2 * leaf); }
std::string downlink_address(int leaf, int spine) { return num("198.19.", spine) + num(".", 2 * leaf + 1); }
std::string subnet(int leaf) { return num("198.18.", leaf) + ".0/24"; }

std::string mtu_line(const std::string& dev, int mtu) {
  return mtu > 0 ? "link set " + dev + num(" mtu ", mtu) + "\n" : "";
}

}  // namespace

int leaf_of(const NetSpec& f, int host) {
  const int leaves = f.leaves > 0 ? f.leaves : f.hosts;
  if (f.interleave) return host % leaves;
  // Block-wise: the first hosts % leaves leaves hold one host more.
  const int base = f.hosts / leaves, extra = f.hosts % leaves;
  const int big = extra * (base + 1);
  return host < big ? host / (base + 1) : extra + (host - big) / base;
}

std::string fabric_host_address(const NetSpec& f, int host) {
  return num("198.18.", leaf_of(f, host)) + num(".", host + 1);
}

std::string fabric_gateway(int leaf) { return num("198.18.", leaf) + ".254"; }

std::string leaf_batch(const NetSpec& f, int leaf, const std::string& ns_prefix) {
  std::string b = "link set lo up\n";
  b += "link add br0 type bridge stp_state 0 forward_delay 0\n";
  b += mtu_line("br0", f.mtu);
  b += "link set br0 up\n";
  b += "addr add " + fabric_gateway(leaf) + "/24 dev br0\n";
  for (int h = 0; h < f.hosts; ++h) {
    if (leaf_of(f, h) != leaf) continue;
    const std::string dev = num("h", h);
    b += "link add " + dev + " type veth peer name eth0 netns " + ns_prefix + num("-h", h) + "\n";
    b += mtu_line(dev, f.mtu);
    b += "link set " + dev + " master br0 up\n";
  }
  for (int s = 0; s < f.spines; ++s) {
    const std::string dev = num("s", s);
    b += "link add " + dev + " type veth peer name " + num("l", leaf) + " netns " + ns_prefix + num("-s", s) + "\n";
    b += mtu_line(dev, f.mtu);
    b += "addr add " + uplink_address(leaf, s) + "/31 dev " + dev + "\n";
    b += "link set " + dev + " up\n";
  }
  for (int m = 0; m < f.leaves; ++m) {
    if (m == leaf) continue;
    b += "route add " + subnet(m);
    if (f.spines == 1) {
      b += " via " + downlink_address(leaf, 0) + " dev s0\n";
      continue;
    }
    for (int s = 0; s < f.spines; ++s) b += " nexthop via " + downlink_address(leaf, s) + num(" dev s", s) + " weight 1";
    b += "\n";
  }
  return b;
}

std::string spine_batch(const NetSpec& f, int spine) {
  std::string b = "link set lo up\n";
  for (int l = 0; l < f.leaves; ++l) {
    const std::string dev = num("l", l);
    b += mtu_line(dev, f.mtu);
    b += "addr add " + downlink_address(l, spine) + "/31 dev " + dev + "\n";
    b += "link set " + dev + " up\n";
    b += "route add " + subnet(l) + " via " + uplink_address(l, spine) + " dev " + dev + "\n";
  }
  return b;
}

std::string host_batch(const NetSpec& f, int host) {
  std::string b = "link set lo up\n";
  b += mtu_line("eth0", f.mtu);
  b += "addr add " + fabric_host_address(f, host) + "/24 dev eth0\n";
  b += "link set eth0 up\n";
  const std::string gw = fabric_gateway(leaf_of(f, host));
  b += "route add 198.18.0.0/15 via " + gw + " dev eth0\n";
  if (f.default_route) b += "route add default via " + gw + " dev eth0\n";
  return b;
}

std::string tbf_batch(const std::string& dev, uint64_t rate_bps, int mtu) {
  const TbfParams t = tbf_for(rate_bps, mtu);
  return "qdisc replace dev " + dev + " root tbf rate " + std::to_string(rate_bps) + "bit burst " +
         std::to_string(t.burst_bytes) + " latency " + std::to_string(t.latency_ms) + "ms\n";
}

// htb on dev: class 1:1 at the link rate (unshaped: 100 Gbit/s, above anything
// veths carry here); below it 1:2 for what is not TCP, and 1:100..1:1ff, one per
// bucket, each at most flow_bps. u32 hashing: table 800: sends TCP to table 2: by
// bits 1-4 of the source port (the word at offset 20 of an IPv4 packet without
// options holds both ports), each bucket of 2: to table 1<i>: by bits 1-4 of the
// destination port, whose buckets name the classes. Not bits 0-3: the kernel gives
// connect() even ports and bind() odd ones, so bit 0 of a connection's varying
// port never varies, and the low nibble would fill 8 buckets, not 16.
std::string flow_cap_batch(const std::string& dev, uint64_t link_bps, uint64_t flow_bps, int mtu) {
  const uint64_t link = link_bps > 0 ? link_bps : 100'000'000'000ULL;
  const uint64_t flow = std::min(flow_bps, link);
  // A burst of at least one 64 KiB GSO packet, so that the buckets fill and drain in whole packets.
  auto burst = [&](uint64_t rate) { return std::max<uint64_t>(tbf_for(rate, mtu).burst_bytes, 65536 + 2048); };
  const std::string d = " dev " + dev + " ";
  auto cls = [&](const std::string& parent, const std::string& id, uint64_t rate, uint64_t ceil) {
    const std::string r = std::to_string(rate) + "bit", c = std::to_string(ceil) + "bit";
    return "class add" + d + "parent " + parent + " classid " + id + " htb rate " + r + " ceil " + c + " burst " +
           std::to_string(burst(rate)) + " cburst " + std::to_string(burst(ceil)) + " quantum 65536\n";
  };
  std::string b = "qdisc replace" + d + "root handle 1: htb default 2\n";
  // The buckets' guaranteed rates add up to at most the link's; above it they borrow
  // from 1:1, so the NIC never sends more than the link rate (with rate = ceil = the
  // cap, 8 busy buckets would send 8 caps, past a link of 4).
  const uint64_t share = std::max<uint64_t>(link / (kFlowBuckets + 1), 8000);
  b += cls("1:", "1:1", link, link);
  b += cls("1:1", "1:2", share, link);
  for (int k = 0; k < kFlowBuckets; ++k) b += cls("1:1", "1:" + hex(0x100 + static_cast<unsigned>(k)), std::min(share, flow), flow);
  const std::string f = "filter add" + d + "parent 1: prio 1 protocol ip ";
  b += f + "handle 2: u32 divisor 16\n";
  for (unsigned i = 0; i < 16; ++i) b += f + "handle " + hex(0x10 + i) + ": u32 divisor 16\n";
  b += f + "u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x001e0000 at 20 link 2:\n";
  for (unsigned i = 0; i < 16; ++i) {
    b += f + "u32 ht 2:" + hex(i) + ": match u32 0 0 hashkey mask 0x0000001e at 20 link " + hex(0x10 + i) + ":\n";
    for (unsigned j = 0; j < 16; ++j)
      b += f + "u32 ht " + hex(0x10 + i) + ":" + hex(j) + ": match u32 0 0 flowid 1:" + hex(0x100 + 16 * i + j) + "\n";
  }
  return b;
}

}  // namespace dcclrun
