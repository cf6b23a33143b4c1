#include "core/contention.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "core/affinity.hpp"
#include "core/host_sleepers.hpp"
#include "core/log.hpp"

namespace dccl::core {

bool Contention::others_runnable_now() {
  int running = -1;
  const int asleep = HostSleepers::asleep_around([&] { running = nr_running(); });
  const int ranks = HostSleepers::local_ranks();
  if (!others_runnable(running, ranks, asleep)) return false;
  // About a line a second: while marked, the waits do not yield and look again.
  DCCL_INFO("busy CPUs: a yield lost a time slice with %d tasks runnable on this host, where %d of this job's "
            "%d ranks here are asleep; waits sleep after their spin for the next %lld ms",
            running, asleep, ranks, static_cast<long long>(std::chrono::milliseconds(kHold).count()));
  return true;
}

void Contention::marked_in_wait(Clock::time_point now) {
  mark(now);
  Affinity::marked_busy();
}

int Contention::nr_running() {
  char text[128];
  const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, text, sizeof(text));
  close(fd);
  return n > 0 ? parse_nr_running(text, static_cast<size_t>(n)) : -1;
}

// "0.50 0.40 0.30 3/456 12345": the runnable tasks are the 4th field's numerator.
int Contention::parse_nr_running(const char* text, size_t len) {
  size_t i = 0;
  for (int field = 0; field < 3; ++field) {
    while (i < len && text[i] != ' ') ++i;
    while (i < len && text[i] == ' ') ++i;
  }
  int v = 0, digits = 0;
  for (; i < len && text[i] >= '0' && text[i] <= '9' && digits < 9; ++i, ++digits) v = v * 10 + (text[i] - '0');
  return digits > 0 && i < len && text[i] == '/' ? v : -1;
}

}  // namespace dccl::core
