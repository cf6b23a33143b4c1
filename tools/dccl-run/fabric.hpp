// The leaf-spine fabric of dccl-run --fabric: what each namespace is given, as
// iproute2 batch text (pure functions; EmuNet runs them, see netns.hpp).
//
//   namespaces  dccl-<pid>-h<h> (hosts), dccl-<pid>-l<l> (leaves), dccl-<pid>-s<s> (spines)
//   hosts       block-wise under the leaves (the first H % L leaves one more); host h
//               under leaf l: eth0 198.18.<l>.<h+1>/24, route to 198.18.0.0/15 (and
//               the default route) via 198.18.<l>.254
//   leaves      bridge br0 198.18.<l>.254/24 with a port h<h> per host; uplink s<s> to
//               spine s, 198.19.<s>.<2l>/31; the other leaves' subnets by equal-cost
//               multipath over every spine (nexthop ... nexthop ...)
//   spines      l<l> to leaf l, 198.19.<s>.<2l+1>/31; a route to each leaf's subnet
//   routers     net.ipv4.ip_forward=1; fib_multipath_hash_policy=3 with
//               fib_multipath_hash_fields=0x37: addresses, protocol and ports pick
//               the spine (policy 1 would reuse the sender's socket hash, see netns_fabric.cc)
//   shaping     --rate: tbf on both ends of every link (as EmuNet's bridge); --flow-rate:
//               the hosts' eth0 get htb instead, a class per hash bucket of the TCP
//               ports (flow_cap_batch), each capped at the flow rate, under one class
//               at the link rate
#pragma once
#include <cstdint>
#include <string>

namespace dcclrun {

struct FabricSpec {
  int hosts = 1;
  int leaves = 1;
  int spines = 2;
  int mtu = 0;            // 0: the kernel's
  uint64_t rate_bps = 0;  // every link; 0: not shaped
  uint64_t flow_bps = 0;  // per TCP flow; 0: no cap
  bool default_route = true;  // else hosts route only 198.18.0.0/15 via their leaf
};

constexpr int kMaxLeaves = 64;  // 198.19.<s>.<2l+1> fits an octet
constexpr int kMaxSpines = 16;
// The per-flow classes: 16 buckets by the source port's low 4 bits, each split 16
// ways by the destination port's: 256 classes; two flows share one when both
// ports' low nibbles match (1 in 256 for random ports).
constexpr int kFlowBuckets = 256;

int leaf_of(const FabricSpec& f, int host);
std::string fabric_host_address(const FabricSpec& f, int host);  // 198.18.<leaf>.<host+1>
std::string fabric_gateway(int leaf);                             // 198.18.<leaf>.254

// `ip -b` text run in leaf l's namespace (creates its veths to its hosts, named
// eth0 there, and to the spines, named l<l> there; `ns_prefix` is dccl-<pid>).
std::string leaf_batch(const FabricSpec& f, int leaf, const std::string& ns_prefix);
std::string spine_batch(const FabricSpec& f, int spine);
std::string host_batch(const FabricSpec& f, int host);
// `tc -b` text: tbf on `dev` (rate_bps > 0), or with flow_bps the host NIC's htb tree.
std::string tbf_batch(const std::string& dev, uint64_t rate_bps, int mtu);
std::string flow_cap_batch(const std::string& dev, uint64_t link_bps, uint64_t flow_bps, int mtu);

}  // namespace dcclrun
