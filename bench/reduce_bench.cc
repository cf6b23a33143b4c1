// Throughput of the host reduction kernels against memcpy (not a test).
// Build (from the repository root):
//   g++ -std=c++20 -O2 -march=x86-64-v2 -Iinclude -Isrc bench/reduce_bench.cc
//       src/kernels/*.cc src/core/{config,log,types}.cc -pthread -o /tmp/reduce_bench
// Usage: reduce_bench [bytes per buffer, default 4 MiB]
// GB/s counts the bytes of one buffer per second (what a collective moves);
// "traffic" counts every byte read and written (3x for reduce, 2x for memcpy).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "trials.hpp"

#include "kernels/kernels.hpp"
#include "kernels/reduce.hpp"
#include "core/types.hpp"

namespace rd = dccl::kernels::reduce_detail;

namespace {

// Median seconds per call over several trials of ~50 ms each.
double time_per_call(const std::function<void()>& fn) {
  const std::vector<double> t = seconds_per_call_trials(fn, 7, 0.05);
  return t[t.size() / 2];
}

void report(const char* what, size_t bytes, double s, int traffic_factor) {
  std::printf("%-34s %8.2f GB/s   (traffic %8.2f GB/s)\n", what, double(bytes) / s / 1e9,
              double(bytes) * traffic_factor / s / 1e9);
}

void fill(std::vector<unsigned char>& v, dcclDataType_t dt) {
  // Small, ordinary values: 1.0-ish in every float type, so nothing overflows.
  const size_t sz = dccl::core::dtype_size(dt);
  for (size_t i = 0; i < v.size() / sz; ++i) {
    const float f = 1.0f + float(i % 1000) / 1024.0f;
    if (dt == dcclFloat32) std::memcpy(&v[i * sz], &f, 4);
    else if (dt == dcclFloat16) { uint16_t h = dccl::kernels::float_to_half(f); std::memcpy(&v[i * sz], &h, 2); }
    else if (dt == dcclBfloat16) { uint16_t h = dccl::kernels::float_to_bf16(f); std::memcpy(&v[i * sz], &h, 2); }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (size_t{4} << 20);
  std::vector<unsigned char> a(bytes), b(bytes), d(bytes);
  std::printf("buffers: %zu bytes; best instruction set: %s\n", bytes, rd::isa_name(rd::best_isa()));

  report("memcpy", bytes, time_per_call([&] { std::memcpy(d.data(), a.data(), bytes); }), 2);

  for (dcclDataType_t dt : {dcclFloat32, dcclBfloat16, dcclFloat16}) {
    fill(a, dt);
    fill(b, dt);
    const size_t n = bytes / dccl::core::dtype_size(dt);
    for (rd::Isa isa : {rd::Isa::Avx2, rd::Isa::Generic}) {
      if (!rd::isa_supported(isa)) continue;
      char name[96];
      std::snprintf(name, sizeof name, "%s sum %s d=a+b", dccl::core::dtype_name(dt), rd::isa_name(isa));
      report(name, bytes, time_per_call([&] { rd::reduce_isa(isa, d.data(), a.data(), b.data(), n, dt, dcclSum); }), 3);
      // In place (d == a), as a collective accumulates. Values grow (fp16 reaches
      // inf), which costs nothing on x86; only subnormals are slow, and sums never make them.
      std::snprintf(name, sizeof name, "%s sum %s a+=b", dccl::core::dtype_name(dt), rd::isa_name(isa));
      std::vector<unsigned char> acc(bytes);
      fill(acc, dt);
      report(name, bytes, time_per_call([&] { rd::reduce_isa(isa, acc.data(), acc.data(), b.data(), n, dt, dcclSum); }), 3);
    }
  }
  return 0;
}
