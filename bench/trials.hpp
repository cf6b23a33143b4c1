// Timing for the one-core benchmarks (dccl-ceiling, reduce_bench): seconds per
// call of fn in each of `trials` trials of about `trial_s` seconds, after 3
// warm-up calls (page faults, caches), sorted from fastest to slowest.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

template <typename F>
std::vector<double> seconds_per_call_trials(F&& fn, int trials, double trial_s) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> out;
  for (int t = 0; t < trials; ++t) {
    long iters = 0;
    const auto start = clock::now();
    double elapsed = 0;
    do {
      fn();
      ++iters;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < trial_s);
    out.push_back(elapsed / double(iters));
  }
  std::sort(out.begin(), out.end());
  return out;
}
