// Internal: a timestamp cheap enough for every call's hot path, for the flight
// recorder. On x86-64 it is the CPU's time-stamp counter when the kernel keeps
// time with it too (clocksource "tsc": then the counter is invariant and agrees
// across CPUs); on arm64 the virtual counter; elsewhere CLOCK_REALTIME itself.
// A counter read costs 15 ns on this project's VM where clock_gettime costs 36,
// and a recorded call reads two (bench/results/2026-12-05-small).
//
// Ticks mean nothing outside this process: to_ns() turns one into CLOCK_REALTIME
// nanoseconds, by the line through an anchor (a counter and clock pair taken at
// init) and the present pair. It takes no lock and allocates nothing, so a
// signal handler may convert (the recorder's dumps).
#pragma once
#include <cstdint>

namespace dccl::core::ticks {

namespace detail {
extern bool counter;  // set once, by init(), before any tick is taken
uint64_t realtime_ns();
}  // namespace detail

// Chooses the source and takes the anchor; once per process (later calls return).
// The recorder calls it when one is made, before it records anything.
void init();

inline uint64_t now() {
#if defined(__x86_64__)
  if (detail::counter) return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  if (detail::counter) {
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
  }
#endif
  return detail::realtime_ns();
}

// The conversion as of now: one for every tick of a dump, so that they keep their
// order and spacing. to_ns(t): CLOCK_REALTIME nanoseconds of tick `t` (0 stays 0,
// "not yet").
struct Scale {
  uint64_t tick = 0;
  int64_t ns = 0;
  double ns_per_tick = 1.0;
  bool counter = false;
  int64_t to_ns(uint64_t t) const {
    if (t == 0 || !counter) return static_cast<int64_t>(t);
    return ns - static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(tick - t)) * ns_per_tick);
  }
};
Scale scale();
inline int64_t to_ns(uint64_t t) { return scale().to_ns(t); }

// What now() reads, for logs and tests: "tsc", "cntvct" or "clock_gettime".
const char* source();

}  // namespace dccl::core::ticks
