// dccl-ceiling: what one core can do with memory, the ceiling of every
// host-memory collective on this machine (not a test).
//   dccl-ceiling [-b 8] [-e 64M] [-f 4] [--ms 20] [--json FILE]
// For each size S (bytes of one buffer), on one core:
//   memcpy  dst = src                       (reads S, writes S)
//   reduce  dst[i] = a[i] + b[i], float32   (reads 2S, writes S; a plain loop
//           the compiler vectorises, as a collective's reduction step)
// GB/s = S / time per call (1e9 bytes), the convention of busbw. Each point is
// the fastest of 5 trials of about --ms milliseconds, after a warm-up (a
// ceiling: on a shared machine the slower trials measure the neighbours). Sizes
// that fit in cache measure the cache, not DRAM: a collective's working set is
// several such buffers, so its ceiling at a given size lies between the two.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trials.hpp"

namespace {

size_t parse_size(const char* s) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

// Fastest of 5 trials: a ceiling (the slower trials measure the neighbours).
template <typename F>
double seconds_per_call(F&& fn, double trial_s) {
  return seconds_per_call_trials(fn, 5, trial_s).front();
}

// Keeps the compiler from dropping the work.
void sink(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

__attribute__((noinline)) void add(float* __restrict d, const float* __restrict a,
                                   const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = a[i] + b[i];
}

}  // namespace

int main(int argc, char** argv) {
  size_t lo = 8, hi = size_t{64} << 20, factor = 4;
  double ms = 20;
  std::string json;
  for (int a = 1; a < argc; ++a) {
    const std::string f = argv[a];
    const char* v = a + 1 < argc ? argv[a + 1] : nullptr;
    if (f == "-h" || f == "--help") {
      std::printf("usage: dccl-ceiling [-b MIN] [-e MAX] [-f FACTOR] [--ms TRIAL_MS] [--json FILE]\n");
      return 0;
    }
    if (!v) { std::fprintf(stderr, "dccl-ceiling: %s needs a value\n", f.c_str()); return 2; }
    if (f == "-b") lo = parse_size(v);
    else if (f == "-e") hi = parse_size(v);
    else if (f == "-f") factor = std::max<size_t>(2, parse_size(v));
    else if (f == "--ms") ms = std::atof(v);
    else if (f == "--json") json = v;
    else { std::fprintf(stderr, "dccl-ceiling: unknown flag %s\n", f.c_str()); return 2; }
    ++a;
  }
  const size_t cap = std::max<size_t>(hi, 64);
  // Separate page-aligned buffers, touched before timing.
  auto alloc = [&](unsigned char fillv) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, cap) != 0) std::exit(1);
    std::memset(p, fillv, cap);
    return static_cast<float*>(p);
  };
  float* a = alloc(0x3f);
  float* b = alloc(0x3e);
  float* d = alloc(0);
  std::printf("# dccl-ceiling: one core; GB/s = bytes of one buffer per second\n");
  std::printf("# %10s  %10s  %10s\n", "size (B)", "memcpy", "reduce");
  FILE* jf = json.empty() ? nullptr : std::fopen(json.c_str(), "w");
  if (jf) std::fputs("[\n", jf);
  bool first = true;
  for (size_t s = lo; s <= hi; s *= factor) {
    const size_t n = std::max<size_t>(s / sizeof(float), 1);
    const double tc = seconds_per_call([&] { std::memcpy(d, a, s); sink(d); }, ms * 1e-3);
    const double tr = seconds_per_call([&] { add(d, a, b, n); sink(d); }, ms * 1e-3);
    const double gc = double(s) / tc / 1e9, gr = double(s) / tr / 1e9;
    std::printf("%12zu  %10.2f  %10.2f\n", s, gc, gr);
    std::fflush(stdout);
    if (jf) {
      std::fprintf(jf, "%s  {\"size\": %zu, \"memcpy_gbps\": %.6g, \"reduce_gbps\": %.6g, "
                   "\"memcpy_us\": %.6g, \"reduce_us\": %.6g}",
                   first ? "" : ",\n", s, gc, gr, tc * 1e6, tr * 1e6);
      first = false;
    }
    if (s > hi / factor) break;
  }
  if (jf) {
    std::fputs("\n]\n", jf);
    std::fclose(jf);
  }
  std::free(a);
  std::free(b);
  std::free(d);
  return 0;
}
