// dccl-info --plan: the tuning plan (tune/plan.hpp) a communicator of the given
// shape would run with under this environment's settings, and the choices a tuner
// made from it takes at every window's edges, as text or JSON (bench/model reads the JSON).
#include "plan.hpp"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "core/config.hpp"
#include "core/error.hpp"
#include "json_text.hpp"
#include "settings.hpp"
#include "tune/plan.hpp"
#include "tune/tuner.hpp"

namespace {

using dccl::tune::Plan;

std::string need_list(unsigned needs, const char* sep) {
  using namespace dccl::tune;
  std::string s;
  const std::pair<unsigned, const char*> names[] = {
      {kOneShot, "oneshot"}, {kChunks, "chunks"}, {kHostMem, "host_mem"}, {kLevels, "levels"}, {kRanksByHost, "ranks_by_host"}};
  for (const auto& [bit, name] : names)
    if (needs & bit) s += std::string(s.empty() ? "" : sep) + name;
  return s;
}

// The sizes around every window edge of collective c, where a choice changes.
std::set<size_t> edge_sizes(const Plan& p, dccl::tune::Coll c) {
  std::set<size_t> out = {8};
  const auto& table = dccl::tune::algo_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].coll != c) continue;
    for (size_t b : {p.windows[i].min_bytes, p.windows[i].max_bytes}) {
      if (b == 0 || b >= (size_t{1} << 40)) continue;
      if (table[i].total) b /= static_cast<size_t>(p.nranks);  // choose() takes one rank's bytes
      out.insert({b - 4, b, b + 4});
    }
  }
  if (c == dccl::tune::Coll::AllReduce && p.segment && p.segment_oneshot_bytes)
    out.insert({p.segment_oneshot_bytes, p.segment_oneshot_bytes + 4});
  return out;
}

void print_json(const Plan& p, bool ranks_by_host) {
  using namespace dccl::tune;
  printf("{\n  \"provider\": \"%s\", \"nranks\": %d, \"nhosts\": %d, \"local_size\": %d, \"ranks_by_host\": %s,\n",
         json_text(p.provider).c_str(), p.nranks, p.nhosts, p.local_size, ranks_by_host ? "true" : "false");
  printf("  \"link\": {\"alpha_us\": %g, \"gbps\": %g, \"reduce_gbps\": %g},\n", p.link.alpha_us, p.link.gbps,
         p.link.reduce_gbps);
  printf("  \"chunks\": {\"cross_host\": %zu, \"one_host\": %zu, \"device\": %zu, \"override\": %zu, \"host\": %zu, "
         "\"device_used\": %zu},\n",
         p.cross_host_chunk_bytes, p.one_host_chunk_bytes, p.device_chunk_bytes, p.chunk_override_bytes,
         p.chunk_bytes(false), p.chunk_bytes(true));
  printf("  \"segment\": {\"used\": %s, \"oneshot_bytes\": %zu, \"chunk_bytes\": %zu},\n", p.segment ? "true" : "false",
         p.segment_oneshot_bytes, p.segment_chunk_bytes);
  printf("  \"rd\": {\"max_bytes\": %zu, \"min_bound\": %zu, \"max_bound\": %zu},\n", p.rd_max_bytes, p.rd_min_bound,
         p.rd_max_bound);
  printf("  \"hier\": {\"used\": %s, \"shard_bytes\": %zu, \"piece_bytes\": %zu},\n", p.hier ? "true" : "false",
         p.hier_shard_bytes, p.hier_piece_bytes);
  printf("  \"spin\": {\"spin_us\": %lld, \"why\": \"%s\", \"busy_widen_bytes\": %zu},\n",
         static_cast<long long>(p.spin.spin_us), json_text(p.spin.why).c_str(), p.spin.busy_widen_bytes);
  printf("  \"algo_override\": \"%s\",\n  \"windows\": [", json_text(p.algo_override).c_str());
  const auto& table = algo_table();
  for (size_t i = 0; i < table.size(); ++i)
    printf("%s\n    {\"coll\": \"%s\", \"algo\": \"%s\", \"min_bytes\": %zu, \"max_bytes\": %s, \"total\": %s, "
           "\"needs\": [%s%s%s]}",
           i ? "," : "", coll_name(table[i].coll), algo_name(table[i].algo), p.windows[i].min_bytes,
           p.windows[i].max_bytes == SIZE_MAX ? "null" : std::to_string(p.windows[i].max_bytes).c_str(),
           table[i].total ? "true" : "false",
           table[i].needs ? "\"" : "", need_list(table[i].needs, "\", \"").c_str(), table[i].needs ? "\"" : "");
  // What a tuner made from this plan takes (host memory, this rank count).
  Tuner t(p);
  t.set_levels(p.hier, ranks_by_host);
  printf("\n  ],\n  \"choices\": [");
  bool first = true;
  for (int c = 0; c < kNumColls; ++c) {
    if (static_cast<Coll>(c) == Coll::SendRecv) continue;
    for (size_t b : edge_sizes(p, static_cast<Coll>(c))) {
      const Choice ch = t.choose(static_cast<Coll>(c), b, p.nranks);
      printf("%s\n    {\"coll\": \"%s\", \"bytes\": %zu, \"algo\": \"%s\", \"chunk_bytes\": %zu}", first ? "" : ",",
             coll_name(static_cast<Coll>(c)), b, algo_name(ch.algo), ch.chunk_bytes);
      first = false;
    }
  }
  printf("\n  ]\n}\n");
}

std::string bytes_text(size_t b) {
  if (b == SIZE_MAX) return "any";
  for (auto [unit, shift] : {std::pair{"G", 30}, {"M", 20}, {"K", 10}})
    if (b >= (size_t{1} << shift) && b % (size_t{1} << shift) == 0) return std::to_string(b >> shift) + unit;
  return std::to_string(b);
}

void print_text(const Plan& p) {
  using namespace dccl::tune;
  printf("plan: %d ranks on %d host%s (%d per host), provider %s\n", p.nranks, p.nhosts, p.nhosts == 1 ? "" : "s",
         p.local_size, p.provider.c_str());
  printf("  link model      %.1f us per message, %.1f GB/s, reductions %.1f GB/s\n", p.link.alpha_us, p.link.gbps,
         p.link.reduce_gbps);
  printf("  chunk           host memory %s, device memory %s (across hosts %s, one host %s / device %s%s)\n",
         bytes_text(p.chunk_bytes(false)).c_str(), bytes_text(p.chunk_bytes(true)).c_str(),
         bytes_text(p.cross_host_chunk_bytes).c_str(), bytes_text(p.one_host_chunk_bytes).c_str(),
         bytes_text(p.device_chunk_bytes).c_str(), p.chunk_override_bytes ? "; DCCL_CHUNK_BYTES replaces them" : "");
  if (p.segment)
    printf("  shared segment  one-shot up to %s, chunk %s\n", bytes_text(p.segment_oneshot_bytes).c_str(),
           bytes_text(p.segment_chunk_bytes).c_str());
  else
    printf("  shared segment  not used\n");
  printf("  rd allreduce    up to %s (the link model's crossover, held to %s..%s)\n", bytes_text(p.rd_max_bytes).c_str(),
         bytes_text(p.rd_min_bound).c_str(), bytes_text(p.rd_max_bound).c_str());
  if (p.hier)
    printf("  hierarchy       used: allreduce shards above %s, pieces of %s\n", bytes_text(p.hier_shard_bytes).c_str(),
           bytes_text(p.hier_piece_bytes).c_str());
  else
    printf("  hierarchy       not used\n");
  printf("  waits           spin %lld us (%s)\n", static_cast<long long>(p.spin.spin_us), p.spin.why.c_str());
  if (p.spin.busy_widen_bytes)
    printf("  busy CPUs       calls from %s leave a one-CPU binding (DCCL_BUSY_WIDEN_BYTES)\n",
           bytes_text(p.spin.busy_widen_bytes).c_str());
  else
    printf("  busy CPUs       bindings kept (DCCL_BUSY_WIDEN_BYTES=0)\n");
  if (!p.algo_override.empty()) printf("  DCCL_ALGO       %s\n", p.algo_override.c_str());
  printf("  algorithms, in order of preference (the first usable one whose window holds the size):\n");
  const auto& table = algo_table();
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].coll == Coll::SendRecv) continue;
    const std::string needs = need_list(table[i].needs, ",");
    printf("    %-14s %-13s %6s..%-6s%s %-22s %s\n", coll_name(table[i].coll), algo_name(table[i].algo),
           bytes_text(p.windows[i].min_bytes).c_str(), bytes_text(p.windows[i].max_bytes).c_str(),
           table[i].total ? " total" : " /rank", needs.empty() ? "" : ("needs " + needs).c_str(), table[i].what);
  }
}

bool parse_int(const char* s, int lo, int* out) {
  char* end = nullptr;
  const long v = strtol(s, &end, 10);
  if (!end || *end || end == s || v < lo || v > (1 << 24)) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int print_plan(int argc, char** argv) {
  bool json = false;
  int ranks = 2, hosts = 1, cores = 0;
  std::string provider;
  const char* options = "(--json, --ranks N, --hosts H, --provider P, --cores C)";
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--json") {
      json = true;
      continue;
    }
    int* num = arg == "--ranks" ? &ranks : arg == "--hosts" ? &hosts : arg == "--cores" ? &cores : nullptr;
    if (!num && arg != "--provider") {
      fprintf(stderr, "dccl-info --plan: unknown option '%s' %s\n", arg.c_str(), options);
      return 2;
    }
    if (a + 1 >= argc) {
      fprintf(stderr, "dccl-info --plan: %s needs a value %s\n", arg.c_str(), options);
      return 2;
    }
    const char* value = argv[++a];
    if (!num) {
      provider = value;
      if (const std::string why = unknown_plan_provider(provider); !why.empty()) {
        fprintf(stderr, "dccl-info --plan: bad value for --provider: %s\n", why.c_str());
        return 2;
      }
    } else if (!parse_int(value, num == &cores ? 0 : 1, num)) {
      fprintf(stderr, "dccl-info --plan: bad value '%s' for %s (a whole number from %d to %d)\n", value, arg.c_str(),
              num == &cores ? 0 : 1, 1 << 24);
      return 2;
    }
  }
  if (ranks % hosts != 0) {
    fprintf(stderr, "dccl-info --plan: %d ranks do not spread evenly over %d hosts\n", ranks, hosts);
    return 2;
  }
  try {
    const dccl::core::Config cfg = dccl::core::load_config();
    if (provider.empty()) provider = !cfg.provider.empty() ? cfg.provider : hosts == 1 ? "shm" : "tcp;ofi_rxm";
    const Plan p = dccl::tune::make_plan(
        {.nranks = ranks, .nhosts = hosts, .local_size = ranks / hosts, .host_cores = cores, .provider = provider},
        cfg);
    if (json)
      print_json(p, /*ranks_by_host=*/true);  // ranks numbered host by host, as launchers place them
    else
      print_text(p);
  } catch (const dccl::core::Error& e) {
    fprintf(stderr, "dccl-info --plan: %s\n", e.what());
    return 1;
  }
  return 0;
}
