// The flight recorder's cost per call in a tight loop (no communicator):
// g++ -O2 -std=c++20 -Isrc bench/results/2026-12-04-recorder/recbench.cc src/core/recorder.cc -o recbench
#include "core/recorder.hpp"
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <vector>
using namespace dccl::core;
int main() {
  Recorder r(512);
  std::vector<double> per;
  for (int rep = 0; rep < 9; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    const int N = 2000000;
    for (int i = 0; i < N; ++i) {
      RecEntry* e = r.begin(i, "all_reduce", 2, "float32", "sum", 0, -1);
      e->algo = "smem"; e->path = "host";
      r.end(e, 0);
    }
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / N;
    per.push_back(ns);
  }
  std::sort(per.begin(), per.end());
  printf("begin+end: median %.1f ns per call (min %.1f, max %.1f) over 9 runs of 2e6\n", per[4], per[0], per[8]);
  per.clear();
  for (int rep = 0; rep < 9; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    const int N = 1000000;
    for (int i = 0; i < N; ++i) {
      RecEntry* e = r.begin(i, "all_reduce", 2, "float32", "sum", 0, -1);
      Recorder::posted(1, true, 8); Recorder::posted(1, false, 8);
      Recorder::step(1, true, 8); Recorder::step(1, false, 8);
      r.end(e, 0);
    }
    per.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / N);
  }
  std::sort(per.begin(), per.end());
  printf("begin+2 steps+end: median %.1f ns per call (min %.1f, max %.1f)\n", per[4], per[0], per[8]);
}
