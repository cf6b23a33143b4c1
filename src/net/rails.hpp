// Rails: the network interfaces (NICs) a rank sends through, the rail each pair of
// ranks uses, and the wire cut that stripes large parts across rails. Everything
// here is a pure function of its arguments (the transport feeds it what the
// provider offers and what the peers published), unit-tested without a network.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "net/blob.hpp"

namespace dccl::net {

// At most this many rails per rank (bounds the blob; 16 NICs per host is plenty).
inline constexpr int kMaxRails = 16;
// Striped pieces start on this alignment (pages): both ends derive it from the length.
inline constexpr size_t kStripeAlign = 4096;

// Flows: endpoints per rail, each its own connection (for tcp, its own source and
// destination ports, so that multipath hashing and per-flow rate caps tell them
// apart). DCCL_NET_FLOWS, as for the socket path: 0 is automatic, per provider:
// tcp;ofi_rxm across hosts kFabricRemoteFlows (on a leaf-spine fabric with a per-flow
// cap of a quarter of the link, 8 reach half the link, 2.2x one flow, which stays at
// the cap: bench/results/2026-12-05-fi-flows); shm 1
// always (one host: no paths to spread over); efa 1 (SRD sprays each connection's
// packets over paths itself); every other provider 1. A set number is used as it is
// (up to kMaxFabricFlows), except on shm.
inline constexpr int kMaxFabricFlows = 16;
inline constexpr int kFabricRemoteFlows = 8;
// Messages below this go whole on flow 0 (their latency does not change).
inline constexpr size_t kFlowsMinBytes = size_t{256} << 10;
// Endpoints a rank opens per rail of `provider`: for `wish` (DCCL_NET_FLOWS); all_local:
// no peer is known to be on another host (the automatic number is then 1).
int flows_to_open(int wish, const std::string& provider, bool all_local);
// The pair's flows per rail: each end's wish resolved for the pair (automatic:
// flows_to_open's rule, same_host telling), the smaller, and no more than either
// end opened (open_a, open_b).
int pair_flows(int wish_a, int wish_b, const std::string& provider, bool same_host, int open_a, int open_b);

// One interface (libfabric domain) the network provider offers on this host.
struct OfferedRail {
  std::string name;     // domain name: the interface for tcp (eth0, ens5, ...)
  bool ipv4 = false;    // offered with an IPv4 address (the one we then use)
  std::string address;  // "198.18.0.1" (text, for messages and dccl-info)
};

// True for the interfaces that are never a rail unless named: loopback, and the
// container/VM bridges whose addresses repeat on every host (docker*, virbr*).
bool excluded_by_default(const std::string& name);

// Name order with digit runs compared as numbers: eth2 < eth10, ib0 < ib1.
bool natural_less(const std::string& a, const std::string& b);

// DCCL_NET_IFNAME: "a,b" -> {"a", "b"} (blanks around names trimmed; "" -> {}).
// Throws core::Error(dcclInvalidArgument) on an empty item, a duplicate, or more
// than kMaxRails names.
std::vector<std::string> parse_ifnames(const std::string& setting);

// The rails to open, as indices into `offered`, in rail order. With `names`:
// exactly those, in that order; throws core::Error(dcclInvalidArgument) naming
// the missing one and what is offered. Without: every interface offered with IPv4
// except excluded_by_default() ones, by natural_less() name order (at most kMaxRails);
// when there is none, the one the provider would use alone (first IPv4, else the
// first offered). Empty only when nothing is offered.
std::vector<size_t> choose_rails(const std::vector<OfferedRail>& offered, const std::vector<std::string>& names,
                                 const std::string& provider);

// How two ranks reach each other: the same answer at both ends (a pure, symmetric
// function of their blobs), since a receive posted on one endpoint only matches
// messages arriving at that endpoint.
struct PairPlan {
  std::string provider;  // "shm", "tcp;ofi_rxm", or the forced provider
  int home = 0;          // rail index (at both ends) for everything not striped
  int lanes = 1;         // >= 2: parts of at least stripe_min bytes go over rails [0, lanes)
  uint64_t stripe_min = 0;
  int flows = 1;         // flows per rail (pair_flows); >= 2: large parts cut over them too
};

// Provider: the forced one if any; else shm when both ranks are on one host and
// both offer shm; else tcp;ofi_rxm. Rail: the local rank of the lower-numbered
// rank of the pair, modulo the smaller rail count (ranks with the same local rank
// meet on that rail: rail-aligned traffic, as NCCL binds GPU g to NIC g).
// Striping: not over shm, both ranks alone on their hosts (local size 1), both with
// striping on (stripe bytes > 0) and >= 2 rails: lanes = the smaller rail count,
// stripe_min = the larger of their stripe sizes.
// Flows: pair_flows over the rails the pair uses (the fewest either end opened on them).
// Throws core::Error(dcclUnavailable) when the two have no provider in common.
PairPlan plan_pair(const Blob& a, int rank_a, const Blob& b, int rank_b, const std::string& forced);

// The wire cut of one message: parts of `part` bytes in order (the last shorter);
// a part of at least stripe_min bytes, when lanes >= 2, is cut into up to `lanes`
// pieces of stripe_piece() bytes, piece k on rail k; every other part goes whole
// on rail `home`. Sender and receiver derive the same cut from the length alone;
// a staged sender posting one part per slot produces the same pieces. With flows
// beside rails (all_min > 0), a part shorter than all_min is cut over the first
// `near` lanes only (each rail's flow 0), one of at least all_min over all of them.
struct WireCut {
  size_t part = 1;
  int lanes = 1;
  uint64_t stripe_min = 0;
  int home = 0;
  int near = 0;
  uint64_t all_min = 0;

  bool stripes(size_t part_len) const { return lanes >= 2 && stripe_min > 0 && part_len >= stripe_min; }
  // The lanes a part of part_len bytes is cut over (when it stripes).
  int lanes_for(size_t part_len) const { return all_min > 0 && part_len < all_min ? near : lanes; }
  // Calls f(rail, offset, length) for every message the cut makes, in posting order.
  template <class F>
  void each(size_t len, F&& f) const {
    each_part(len, f, [&](size_t off, size_t plen) {
      const size_t q = stripe_piece(plen, lanes_for(plen));
      int lane = 0;
      for (size_t p = 0; p < plen; p += q) f(lane++, off + p, plen - p < q ? plen - p : q);
    });
  }
  size_t count(size_t len) const {
    size_t n = 0;
    each(len, [&](int, size_t, size_t) { ++n; });
    return n;
  }
  // As each(), but a striped part is cut in proportion to w[lane] (one weight per
  // lane, 0 for none; the part's lanes_for() first ones used, equally when all of
  // those are 0): piece k is the part's share w[k] / sum rounded down to
  // kStripeAlign, the part's last lane with a weight takes the rest, and a lane
  // whose share rounds to nothing gets no piece. Both ends call it with the weights
  // the sender chose (net/fabric/striped_link.cc's split note).
  template <class F>
  void each_weighted(size_t len, const uint16_t* w, F&& f) const {
    each_part(len, f, [&](size_t off, size_t plen) {
      const int n = lanes_for(plen);
      uint64_t sum = 0;
      int last = n - 1;
      for (int k = 0; k < n; ++k)
        if (w[k]) {
          sum += w[k];
          last = k;
        }
      const uint64_t pages = plen / kStripeAlign;
      size_t p = 0;
      for (int k = 0; k < n && p < plen; ++k) {
        const uint64_t wk = sum ? w[k] : 1;
        size_t q = k == last ? plen - p : static_cast<size_t>(pages * wk / (sum ? sum : static_cast<uint64_t>(n))) * kStripeAlign;
        if (q > plen - p) q = plen - p;
        if (q == 0) continue;
        f(k, off + p, q);
        p += q;
      }
    });
  }
  // The parts of a message in order: f(home, offset, length) for one that goes whole,
  // stripe(offset, length) for one that is cut.
  template <class F, class S>
  void each_part(size_t len, F& f, S&& stripe) const {
    if (len == 0) return f(home, size_t{0}, size_t{0});
    for (size_t off = 0; off < len;) {
      const size_t plen = len - off < part ? len - off : part;
      if (stripes(plen)) stripe(off, plen);
      else f(home, off, plen);
      off += plen;
    }
  }
  // ceil(part_len / lanes) rounded up to kStripeAlign (so at most `lanes` pieces).
  static size_t stripe_piece(size_t part_len, int lanes);
};

// The endpoints a pair cuts its large parts over, as (rail, flow): flow-major over the
// pair's rails (the striped ones, else the home rail), so that lane `home` of the cut
// is (home rail, flow 0). Empty when the plan cuts nothing (one rail, one flow).
std::vector<std::pair<int, int>> spread_lanes(const PairPlan& p);
// The pair's wire cut over those lanes: parts of `part` bytes, cut when at least the
// stripe size (striped) and kFlowsMinBytes (several flows).
WireCut spread_cut(const PairPlan& p, size_t part);

// "eth0+eth1" for rails [0, n) of `names` ("rail k" where a name is unknown).
std::string rail_list(const std::vector<std::string>& names, int n);

// Human-readable topology from every rank's blob, as `viewer` (with its forced
// provider) plans it: one line per rank (host, local rank, rails) and, up to
// `max_pairs_ranks` ranks, one per pair ("rank 0 -> 2: tcp;ofi_rxm on rail eth1");
// above it, pair counts per route. `trusted(provider)` false: the pair's messages take
// DirectCCL's authenticated socket path instead, and its line says so (null: all trusted).
std::vector<std::string> topology_lines(const std::vector<Blob>& blobs, const std::string& forced,
                                        int max_pairs_ranks = 16,
                                        const std::function<bool(const std::string&)>& trusted = nullptr);

}  // namespace dccl::net
