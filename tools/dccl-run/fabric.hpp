// The leaf-spine fabric of dccl-run --fabric: what each namespace is given, as
// iproute2 batch text (pure functions; EmuNet runs them, see netns.hpp).
//
//   namespaces  dccl-<pid>-h<h> (hosts), dccl-<pid>-l<l> (leaves), dccl-<pid>-s<s> (spines)
//   hosts       block-wise under the leaves (the first H % L leaves one more), or with
//               NetSpec::interleave round-robin (host h under leaf h % L); host h
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

#include "dccl-run/net_spec.hpp"

namespace dcclrun {

constexpr int kMaxLeaves = 64;  // 198.19.<s>.<2l+1> fits an octet
constexpr int kMaxSpines = 16;
// The per-flow classes: 16 buckets by bits 1-4 of the source port, each split 16
// ways by bits 1-4 of the destination port: 256 classes. A connection's flows
// differ in one port (the connecting end's, which the kernel picks even), so they
// fall into 16 buckets: two of them share a cap 1 time in 16.
constexpr int kFlowBuckets = 256;

int leaf_of(const NetSpec& f, int host);
std::string fabric_host_address(const NetSpec& f, int host);  // 198.18.<leaf>.<host+1>
std::string fabric_gateway(int leaf);                          // 198.18.<leaf>.254

// `ip -b` text run in leaf l's namespace (creates its veths to its hosts, named
// eth0 there, and to the spines, named l<l> there; `ns_prefix` is dccl-<pid>).
std::string leaf_batch(const NetSpec& f, int leaf, const std::string& ns_prefix);
std::string spine_batch(const NetSpec& f, int spine);
std::string host_batch(const NetSpec& f, int host);
// `tc -b` text: tbf on `dev` (rate_bps > 0), or with flow_bps the host NIC's htb tree.
std::string tbf_batch(const std::string& dev, uint64_t rate_bps, int mtu);
std::string flow_cap_batch(const std::string& dev, uint64_t link_bps, uint64_t flow_bps, int mtu);

}  // namespace dcclrun
