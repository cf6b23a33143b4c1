#include "net/rails.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>

#include "core/config.hpp"
#include "core/error.hpp"
#include "net/fabric/provider.hpp"

namespace dccl::net {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  size_t e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string offered_text(const std::vector<OfferedRail>& offered) {
  std::string s;
  std::vector<std::string> seen;
  for (const auto& o : offered) {
    if (std::find(seen.begin(), seen.end(), o.name) != seen.end()) continue;
    seen.push_back(o.name);
    s += (s.empty() ? "" : ", ") + o.name + (o.address.empty() ? "" : " (" + o.address + ")");
  }
  return s.empty() ? "none" : s;
}

std::string bytes_text(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

}  // namespace

bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && a[ie] == '0') ++ie;  // leading zeros do not count
      while (je < b.size() && b[je] == '0') ++je;
      size_t ia = ie, jb = je;
      while (ia < a.size() && digit(a[ia])) ++ia;
      while (jb < b.size() && digit(b[jb])) ++jb;
      if (ia - ie != jb - je) return ia - ie < jb - je;
      const int c = a.compare(ie, ia - ie, b, je, jb - je);
      if (c != 0) return c < 0;
      i = ia;
      j = jb;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

bool excluded_by_default(const std::string& name) {
  return name == "lo" || name.rfind("docker", 0) == 0 || name.rfind("virbr", 0) == 0;
}

std::vector<std::string> parse_ifnames(const std::string& setting) {
  std::vector<std::string> out;
  if (trim(setting).empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t comma = setting.find(',', start);
    const std::string item = trim(setting.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty())
      core::raise(dcclInvalidArgument, "DCCL_NET_IFNAME='" + setting + "': empty interface name in the list");
    if (std::find(out.begin(), out.end(), item) != out.end())
      core::raise(dcclInvalidArgument, "DCCL_NET_IFNAME='" + setting + "': interface " + item + " named twice");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() > static_cast<size_t>(kMaxRails))
    core::raise(dcclInvalidArgument, "DCCL_NET_IFNAME='" + setting + "': " + std::to_string(out.size()) +
                                         " interfaces, at most " + std::to_string(kMaxRails) + " rails");
  return out;
}

std::vector<size_t> choose_rails(const std::vector<OfferedRail>& offered, const std::vector<std::string>& names,
                                 const std::string& provider) {
  std::vector<size_t> out;
  // Per interface: its IPv4 offer if any, else its first.
  auto best_of = [&](const std::string& name) -> long {
    long first = -1;
    for (size_t i = 0; i < offered.size(); ++i) {
      if (offered[i].name != name) continue;
      if (offered[i].ipv4) return static_cast<long>(i);
      if (first < 0) first = static_cast<long>(i);
    }
    return first;
  };
  if (!names.empty()) {
    for (const auto& n : names) {
      const long i = best_of(n);
      if (i < 0)
        core::raise(dcclInvalidArgument, "DCCL_NET_IFNAME: " + provider + " offers no interface '" + n +
                                             "' on this host (offered: " + offered_text(offered) + ")");
      out.push_back(static_cast<size_t>(i));
    }
    return out;
  }
  for (size_t i = 0; i < offered.size(); ++i) {
    const auto& o = offered[i];
    if (!o.ipv4 || excluded_by_default(o.name)) continue;
    if (std::any_of(out.begin(), out.end(), [&](size_t j) { return offered[j].name == o.name; })) continue;
    out.push_back(i);
  }
  // By name, numbers compared as numbers (eth2 before eth10): hosts configured alike
  // then number their rails alike, whatever order the provider lists them in.
  std::sort(out.begin(), out.end(), [&](size_t x, size_t y) { return natural_less(offered[x].name, offered[y].name); });
  if (out.size() > static_cast<size_t>(kMaxRails)) out.resize(static_cast<size_t>(kMaxRails));
  if (!out.empty() || offered.empty()) return out;
  for (size_t i = 0; i < offered.size(); ++i)
    if (offered[i].ipv4) return {i};
  return {0};
}

PairPlan plan_pair(const Blob& a, int rank_a, const Blob& b, int rank_b, const std::string& forced) {
  PairPlan p;
  if (!forced.empty()) p.provider = forced;
  else if (a.same_host(b) && a.address_for(kShmProvider) && b.address_for(kShmProvider)) p.provider = kShmProvider;
  else p.provider = kTcpProvider;
  const int ra = static_cast<int>(a.rails_of(p.provider).size());
  const int rb = static_cast<int>(b.rails_of(p.provider).size());
  if (ra == 0 || rb == 0) {
    auto offers = [](const Blob& x) {
      std::string s;
      for (const auto& e : x.endpoints)
        if (s.find(e.first) == std::string::npos) s += (s.empty() ? "" : ", ") + e.first;
      return s.empty() ? std::string("nothing") : s;
    };
    core::raise(dcclUnavailable, "no common provider between rank " + std::to_string(rank_a) + " (host " + a.host +
                                     ", offers " + offers(a) + ") and rank " + std::to_string(rank_b) + " (host " +
                                     b.host + ", offers " + offers(b) + ")" +
                                     (forced.empty() ? std::string() : "; every rank must use the same DCCL_PROVIDER"));
  }
  const int rails = std::min(ra, rb);
  const Blob& lower = rank_a <= rank_b ? a : b;
  p.home = std::max(lower.local_rank, 0) % rails;
  if (p.provider != kShmProvider && rails >= 2 && a.local_size == 1 && b.local_size == 1 && a.stripe_bytes > 0 &&
      b.stripe_bytes > 0) {
    p.lanes = rails;
    p.stripe_min = std::max(a.stripe_bytes, b.stripe_bytes);
  }
  // Flows: the fewest either end opened on the rails the pair uses.
  const std::vector<size_t> ea = a.rails_of(p.provider), eb = b.rails_of(p.provider);
  int open_a = kMaxFabricFlows, open_b = kMaxFabricFlows;
  for (int i = 0; i < rails; ++i) {
    if (p.lanes < 2 && i != p.home) continue;
    open_a = std::min(open_a, a.flows_on(ea[static_cast<size_t>(i)]));
    open_b = std::min(open_b, b.flows_on(eb[static_cast<size_t>(i)]));
  }
  p.flows = pair_flows(a.flows, b.flows, p.provider, a.same_host(b), open_a, open_b);
  return p;
}

int flows_to_open(int wish, const std::string& provider, bool all_local) {
  if (provider == kShmProvider) return 1;
  if (wish > 0) return std::min(wish, kMaxFabricFlows);
  return provider == kTcpProvider && !all_local ? kFabricRemoteFlows : 1;
}

int pair_flows(int wish_a, int wish_b, const std::string& provider, bool same_host, int open_a, int open_b) {
  const int f = std::min({flows_to_open(wish_a, provider, same_host), flows_to_open(wish_b, provider, same_host),
                          open_a, open_b});
  return std::max(f, 1);
}

std::vector<std::pair<int, int>> spread_lanes(const PairPlan& p) {
  std::vector<std::pair<int, int>> out;
  if (p.lanes < 2 && p.flows < 2) return out;
  for (int f = 0; f < p.flows; ++f) {
    if (p.lanes < 2) out.emplace_back(p.home, f);
    else
      for (int i = 0; i < p.lanes; ++i) out.emplace_back(i, f);
  }
  return out;
}

WireCut spread_cut(const PairPlan& p, size_t part) {
  WireCut c;
  c.part = part;
  c.lanes = static_cast<int>(spread_lanes(p).size());
  if (c.lanes < 2) return WireCut{part, 1, 0, 0};
  c.home = p.lanes >= 2 ? p.home : 0;
  if (p.lanes >= 2 && p.flows >= 2 && p.stripe_min < kFlowsMinBytes) {
    // Rails from the stripe size (flow 0 of each: spread_lanes' first p.lanes),
    // every flow of them from kFlowsMinBytes.
    c.stripe_min = p.stripe_min;
    c.near = p.lanes;
    c.all_min = kFlowsMinBytes;
    return c;
  }
  uint64_t min = p.lanes >= 2 ? p.stripe_min : 0;
  if (p.flows >= 2) min = std::max<uint64_t>(min, kFlowsMinBytes);
  c.stripe_min = min;
  return c;
}

size_t WireCut::stripe_piece(size_t part_len, int lanes) {
  const size_t n = static_cast<size_t>(lanes < 1 ? 1 : lanes);
  const size_t q = (part_len + n - 1) / n;
  return (q + kStripeAlign - 1) / kStripeAlign * kStripeAlign;
}

std::string rail_list(const std::vector<std::string>& names, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const std::string& nm = static_cast<size_t>(i) < names.size() ? names[static_cast<size_t>(i)] : std::string();
    s += (i ? "+" : "") + (nm.empty() ? "rail " + std::to_string(i) : nm);
  }
  return s;
}

std::vector<std::string> topology_lines(const std::vector<Blob>& blobs, const std::string& forced,
                                        int max_pairs_ranks, const std::function<bool(const std::string&)>& trusted) {
  std::vector<std::string> out;
  const int n = static_cast<int>(blobs.size());
  auto names_of = [](const Blob& b, const std::string& prov) {
    std::vector<std::string> v;
    for (size_t i : b.rails_of(prov)) v.push_back(b.rail_name(i));
    return v;
  };
  const std::string net = forced.empty() ? std::string(kTcpProvider) : forced;
  for (int r = 0; r < n; ++r) {
    const Blob& b = blobs[static_cast<size_t>(r)];
    const auto rails = names_of(b, net);
    std::string line = "rank " + std::to_string(r) + " on " + b.host + " (local rank " + std::to_string(b.local_rank) +
                       (b.local_size > 0 ? " of " + std::to_string(b.local_size) : std::string()) + "): ";
    line += rails.empty() ? "no " + net + " rails"
                          : std::to_string(rails.size()) + (rails.size() == 1 ? " rail " : " rails ") +
                                rail_list(rails, static_cast<int>(rails.size())) + " (" + net + ")";
    if (forced.empty() && b.address_for(kShmProvider)) line += ", shm";
    if (rails.size() >= 2 && b.local_size == 1 && b.stripe_bytes > 0)
      line += ", stripes parts >= " + bytes_text(b.stripe_bytes);
    out.push_back(line);
  }
  std::map<std::string, int> counts;
  for (int a = 0; a < n; ++a) {
    for (int c = a + 1; c < n; ++c) {
      const Blob& x = blobs[static_cast<size_t>(a)];
      const Blob& y = blobs[static_cast<size_t>(c)];
      std::string what;
      try {
        const PairPlan p = plan_pair(x, a, y, c, forced);
        const auto xr = x.rails_of(p.provider);
        const std::string xn = x.rail_name(xr[static_cast<size_t>(p.home)]);
        const std::string yn = y.rail_name(y.rails_of(p.provider)[static_cast<size_t>(p.home)]);
        what = p.provider;
        auto nm = [&](const std::string& s) { return s.empty() ? std::to_string(p.home) : s; };
        const std::string on = yn == xn ? " on rail " + nm(xn) : " on rails " + nm(xn) + " -> " + nm(yn);
        const bool sock = trusted && !trusted(p.provider);  // the socket path's own flows: not libfabric's
        if (sock) {
          what = "DirectCCL's authenticated socket path (" + p.provider + " is not trusted: DCCL_TRUST_NETWORK=0)" + on;
        } else if (p.provider != kShmProvider && (xr.size() > 1 || !xn.empty())) {
          if (p.lanes >= 2) {
            what += " striped over rails " + rail_list(names_of(x, p.provider), p.lanes) + " (parts >= " +
                    bytes_text(p.stripe_min) + "; smaller on " + (xn.empty() ? "rail " + std::to_string(p.home) : xn) +
                    ")";
          } else {
            what += on;
          }
        }
        if (p.flows >= 2 && !sock)
          what += ", " + std::to_string(p.flows) + " flows per rail (parts >= " +
                  bytes_text(std::max<uint64_t>(spread_cut(p, SIZE_MAX).stripe_min, kFlowsMinBytes)) + " cut over them)";
      } catch (const core::Error& e) {
        what = "none: " + std::string(e.what());
      }
      if (n <= max_pairs_ranks) out.push_back("rank " + std::to_string(a) + " -> " + std::to_string(c) + ": " + what);
      else ++counts[what];
    }
  }
  for (const auto& [what, k] : counts)
    out.push_back(std::to_string(k) + (k == 1 ? " pair: " : " pairs: ") + what);
  return out;
}

}  // namespace dccl::net
