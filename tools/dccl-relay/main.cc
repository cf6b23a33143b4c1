// dccl-relay: what relaying through host memory costs on one memory backend —
// device->host and host->device copy bandwidth and per-copy latency by size, and
// both directions at once (a staged rank's copy-out beside its copy-in), with the
// host side pinned by the backend when it can (Backend::pin_host); when the system
// refuses page-locking the tool says so and measures pageable memory.
//   dccl-relay [--mem sim|cuda] [-b 4K] [-e 256M] [-f 4] [-n 20] [-w 3] [--json FILE]
// Each size: the median of n copies. A backend with a device clock (CUDA: events)
// times the copies on the device (Backend::time_copies_us); otherwise each copy is
// copy_async + wait on the host clock. Every size's copies are checked (a
// position-dependent pattern, host -> device -> host); a wrong copy fails the tool.
// Exit: 0 ok, 1 wrong copy or failed call, 2 usage or backend unavailable (with the reason).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "mem/backend.hpp"
#include "json_text.hpp"
#include "out_path.hpp"

using namespace dccl;

namespace {

constexpr int64_t kWaitMs = 120000;

struct Options {
  std::string mem = "sim";
  size_t min_bytes = 4 << 10, max_bytes = 256 << 20, factor = 4;
  int iters = 20, warmup = 3;
  std::string json;
};

struct Row {
  size_t size;
  double d2h_us, h2d_us;
  double bidir_us;  // a device->host and a host->device copy of `size` each, at once
};

void usage(FILE* f) {
  std::fprintf(f,
      "usage: dccl-relay [flags]\n"
      "  --mem sim|cuda         backend whose memory is copied (default sim)\n"
      "  -b, --minbytes SIZE    smallest size (default 4K; K/M/G suffixes)\n"
      "  -e, --maxbytes SIZE    largest size (default 256M)\n"
      "  -f, --stepfactor N     multiply the size by N each step (default 4)\n"
      "  -n, --iters N          timed copies per size and direction; the median is reported (default 20)\n"
      "  -w, --warmup_iters N   untimed copies before them (default 3)\n"
      "      --json FILE        also write the rows as JSON to FILE\n");
}

bool parse_size(std::string s, size_t* out) {
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  unsigned shift = 0;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      default: break;
    }
  }
  if (shift) s.pop_back();
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (*end || v == 0 || v > (SIZE_MAX >> shift)) return false;
  *out = static_cast<size_t>(v) << shift;
  return true;
}

bool parse_int(const std::string& s, long lo, long* out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > 1000000) return false;
  *out = v;
  return true;
}

// 0: run, 1: --help, 2: usage error (printed).
int parse_args(int argc, char** argv, Options* o) {
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a], value;
    if (arg == "-h" || arg == "--help") { usage(stdout); return 1; }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, arg.rfind("--", 0) == 0 ? eq : std::string::npos);
    static const char* const known[] = {"--mem", "-b", "--minbytes", "-e", "--maxbytes", "-f", "--stepfactor",
                                        "-n", "--iters", "-w", "--warmup_iters", "--json"};
    if (std::find(std::begin(known), std::end(known), name) == std::end(known)) {
      std::fprintf(stderr, "dccl-relay: unknown flag '%s' (see --help)\n", name.c_str());
      return 2;
    }
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (a + 1 < argc) {
      value = argv[++a];
    } else {
      std::fprintf(stderr, "dccl-relay: %s needs a value (see --help)\n", arg.c_str());
      return 2;
    }
    long v = 0;
    bool ok = true;
    if (arg == "--mem") { o->mem = value; ok = value == "sim" || value == "cuda"; }
    else if (arg == "-b" || arg == "--minbytes") ok = parse_size(value, &o->min_bytes);
    else if (arg == "-e" || arg == "--maxbytes") ok = parse_size(value, &o->max_bytes);
    else if (arg == "-f" || arg == "--stepfactor") { ok = parse_int(value, 2, &v); o->factor = size_t(v); }
    else if (arg == "-n" || arg == "--iters") { ok = parse_int(value, 1, &v); o->iters = int(v); }
    else if (arg == "-w" || arg == "--warmup_iters") { ok = parse_int(value, 0, &v); o->warmup = int(v); }
    else if (arg == "--json") o->json = value;
    else { std::fprintf(stderr, "dccl-relay: unknown flag '%s' (see --help)\n", arg.c_str()); return 2; }
    if (!ok) {
      std::fprintf(stderr, "dccl-relay: bad value '%s' for %s (see --help)\n", value.c_str(), arg.c_str());
      return 2;
    }
  }
  if (o->min_bytes > o->max_bytes) { std::fprintf(stderr, "dccl-relay: -b is larger than -e\n"); return 2; }
  return 0;
}

uint64_t pattern(size_t word) { return (word + 1) * 0x9E3779B97F4A7C15ull ^ (word >> 7); }

void fill(void* p, size_t bytes) {
  auto* w = static_cast<uint64_t*>(p);
  for (size_t i = 0; i < bytes / 8; ++i) w[i] = pattern(i);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One timing of copies issued together: on the device clock where the backend has
// one, else copy_async each and wait for all on the host clock. *device says which.
double time_once(mem::Backend& be, const std::vector<mem::Backend::Copy>& copies, bool* device) {
  const double us = be.time_copies_us(copies.data(), static_cast<int>(copies.size()), kWaitMs);
  *device = us >= 0;
  if (*device) return us;
  const auto t0 = std::chrono::steady_clock::now();
  mem::Ticket last = 0;
  for (const auto& c : copies) last = be.copy_async(c.dst, c.src, c.bytes);
  be.wait(last, kWaitMs);  // and everything before it
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// Median time of n timings (after warmup ones), in microseconds.
double time_copies(mem::Backend& be, const std::vector<mem::Backend::Copy>& copies, const Options& o, bool* device) {
  for (int i = 0; i < o.warmup; ++i) time_once(be, copies, device);
  std::vector<double> us;
  for (int i = 0; i < o.iters; ++i) us.push_back(time_once(be, copies, device));
  return median(us);
}

// "" when host == the pattern over [0, bytes), else where and how it differs.
std::string check(const void* host, const void* want, size_t bytes) {
  if (std::memcmp(host, want, bytes) == 0) return "";
  const auto* g = static_cast<const unsigned char*>(host);
  const auto* w = static_cast<const unsigned char*>(want);
  size_t i = 0;
  while (g[i] == w[i]) ++i;
  char buf[160];
  std::snprintf(buf, sizeof buf, "byte %zu of %zu is 0x%02x, expected 0x%02x", i, bytes, g[i], w[i]);
  return buf;
}

double gbps(size_t bytes, double us) { return us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0; }

struct Run {
  const char* backend;
  bool pinned;
  std::string pin_refusal;  // why the host side is pageable ("" when pinned or nothing to pin)
  bool device_timed;
};

bool write_json(const std::string& path, const Options& o, const Run& run, const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  std::fprintf(f,
               "{\"mem\": \"%s\", \"backend\": \"%s\", \"pinned\": %s, \"iters\": %d, \"timing\": \"%s\", "
               "\"pin_refusal\": \"%s\", \"rows\": [",
               o.mem.c_str(), run.backend, run.pinned ? "true" : "false", o.iters,
               run.device_timed ? "device events" : "host clock", json_text(run.pin_refusal).c_str());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "%s\n  {\"size\": %zu, \"d2h_gbps\": %.4f, \"d2h_us\": %.3f, \"h2d_gbps\": %.4f, \"h2d_us\": %.3f, "
                 "\"bidir_gbps\": %.4f, \"bidir_us\": %.3f}",
                 i ? "," : "", r.size, gbps(r.size, r.d2h_us), r.d2h_us, gbps(r.size, r.h2d_us), r.h2d_us,
                 gbps(2 * r.size, r.bidir_us), r.bidir_us);
  }
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

int run(const Options& o) {
  if (!o.json.empty()) {  // a bad path fails now, not after the sweep
    if (const std::string why = unwritable(o.json); !why.empty()) {
      std::fprintf(stderr, "dccl-relay: cannot write --json %s: %s\n", o.json.c_str(), why.c_str());
      return 1;
    }
  }
  mem::Backend* be = o.mem == "cuda" ? mem::cuda_backend() : &mem::sim_backend();
  if (!be) {
    std::fprintf(stderr, "dccl-relay: cuda backend unavailable: %s\n", mem::cuda_unavailable_reason().c_str());
    return 2;
  }
  // Host buffers page-aligned and whole pages, as pinning wants them.
  const size_t host_bytes = (o.max_bytes + 4095) / 4096 * 4096;
  void* src = std::aligned_alloc(4096, host_bytes);
  void* dst = std::aligned_alloc(4096, host_bytes);
  if (!src || !dst) {
    std::fprintf(stderr, "dccl-relay: cannot allocate 2 x %zu bytes of host memory\n", host_bytes);
    return 1;
  }
  fill(src, host_bytes);
  void* dev = be->alloc(o.max_bytes);
  void* dev2 = be->alloc(o.max_bytes);  // the host->device half of the bidirectional copies
  // pin_host never throws: refused, the host side stays pageable and that is measured.
  const bool pin_src = be->pin_host(src, host_bytes);
  const bool pin_dst = be->pin_host(dst, host_bytes);
  const bool pinned = pin_src && pin_dst;
  Run run{be->name(), pinned, be->pin_refusal(), false};

  std::printf("# dccl-relay: %s backend, host side %s, median of %d copies after %d warmup\n", be->name(),
              pinned ? "pinned" : pin_src || pin_dst ? "partly pinned" : "pageable", o.iters, o.warmup);
  if (!run.pin_refusal.empty())
    std::printf("# page-locking refused (%s): measuring pageable host memory\n", run.pin_refusal.c_str());
  std::printf("# both: a D2H and an H2D copy of that size issued together; its GB/s counts the bytes of both\n");
  std::printf("%12s  %9s  %10s  %9s  %10s  %10s  %6s\n", "size", "D2H GB/s", "D2H us", "H2D GB/s", "H2D us",
              "both GB/s", "pinned");
  std::vector<Row> rows;
  int rc = 0;
  for (size_t size = o.min_bytes; size <= o.max_bytes;) {
    // Poison both ends so that a copy that does nothing is caught too.
    be->wait(be->memset_async(dev, 0x5A, size), kWaitMs);
    std::memset(dst, 0xC3, size);
    Row r{size, 0, 0, 0};
    bool timed = false;
    r.h2d_us = time_copies(*be, {{dev, src, size}}, o, &timed);
    r.d2h_us = time_copies(*be, {{dst, dev, size}}, o, &timed);
    std::string bad = check(dst, src, size);
    if (bad.empty()) {
      // Both directions at once: dev -> dst beside src -> dev2, then dev2 checked too.
      r.bidir_us = time_copies(*be, {{dst, dev, size}, {dev2, src, size}}, o, &timed);
      std::memset(dst, 0xC3, size);
      be->wait(be->copy_async(dst, dev2, size), kWaitMs);
      bad = check(dst, src, size);
    }
    run.device_timed = timed;
    if (!bad.empty()) {
      std::fprintf(stderr, "dccl-relay: wrong copy at %zu bytes (host -> %s -> host): %s\n", size, o.mem.c_str(),
                   bad.c_str());
      rc = 1;
      break;
    }
    std::printf("%12zu  %9.2f  %10.2f  %9.2f  %10.2f  %10.2f  %6s\n", size, gbps(size, r.d2h_us), r.d2h_us,
                gbps(size, r.h2d_us), r.h2d_us, gbps(2 * size, r.bidir_us), pinned ? "yes" : "no");
    std::fflush(stdout);
    rows.push_back(r);
    if (size > o.max_bytes / o.factor) break;
    size *= o.factor;
  }
  if (rc == 0) std::printf("# timed with %s\n", run.device_timed ? "device events" : "the host clock (copy + wait)");
  if (rc == 0 && !o.json.empty() && !write_json(o.json, o, run, rows)) {
    std::fprintf(stderr, "dccl-relay: cannot write --json %s: %s\n", o.json.c_str(), std::strerror(errno));
    rc = 1;
  }
  if (pin_src) be->unpin_host(src);
  if (pin_dst) be->unpin_host(dst);
  be->free(dev);
  be->free(dev2);
  std::free(src);
  std::free(dst);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  switch (parse_args(argc, argv, &o)) {
    case 0: break;
    case 1: return 0;
    default: return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dccl-relay: %s\n", e.what());
    return 1;
  }
}
