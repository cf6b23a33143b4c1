#include "core/ticks.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

namespace dccl::core::ticks {

namespace detail {
bool counter = false;

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace detail

namespace {

struct Pair {
  uint64_t tick = 0;
  int64_t ns = 0;
};
Pair g_anchor;
double g_ns_per_tick = 1.0;  // arm64: exact, from the counter's frequency; x86-64: measured at each conversion

// A counter reading and the clock at the same moment: the clock read between two
// counter reads, retried while a preemption or an interrupt widened the bracket.
Pair pair_now() {
  Pair best;
  uint64_t best_span = ~0ull;
  for (int i = 0; i < 8; ++i) {
    const uint64_t a = now();
    const int64_t ns = static_cast<int64_t>(detail::realtime_ns());
    const uint64_t b = now();
    if (b - a < best_span) {
      best_span = b - a;
      best = {a + (b - a) / 2, ns};
    }
    if (best_span < 2000) break;
  }
  return best;
}

#if defined(__x86_64__)
// The kernel keeps time with the TSC only when it found it invariant and in step
// across CPUs; then so may we.
bool kernel_uses_tsc() {
  const int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[32] = {};
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  return n >= 3 && std::strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}
#endif

}  // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__x86_64__)
    detail::counter = kernel_uses_tsc();
#elif defined(__aarch64__)
    uint64_t hz;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
    detail::counter = hz > 0;
    if (hz > 0) g_ns_per_tick = 1e9 / static_cast<double>(hz);
#endif
    if (detail::counter) g_anchor = pair_now();
  });
}

Scale scale() {
  Scale s;
  s.counter = detail::counter;
  if (!s.counter) return s;
  const Pair p = pair_now();
  s.tick = p.tick;
  s.ns = p.ns;
  s.ns_per_tick = g_ns_per_tick;
#if defined(__x86_64__)
  // The rate over the process's life so far: the longer, the closer.
  if (p.tick > g_anchor.tick && p.ns > g_anchor.ns)
    s.ns_per_tick = static_cast<double>(p.ns - g_anchor.ns) / static_cast<double>(p.tick - g_anchor.tick);
#endif
  return s;
}

const char* source() {
#if defined(__x86_64__)
  if (detail::counter) return "tsc";
#elif defined(__aarch64__)
  if (detail::counter) return "cntvct";
#endif
  return "clock_gettime";
}

}  // namespace dccl::core::ticks
