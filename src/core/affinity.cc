#include "core/affinity.hpp"

#include <dirent.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/contention.hpp"
#include "core/log.hpp"

namespace dccl::core {

namespace {

enum class Phase { Unknown, Leave, Narrow, Wide };

struct State {
  Phase phase = Phase::Unknown;
  int own = -1;
  cpu_set_t narrow{}, wide{};
  size_t call_bytes = 0, widen_bytes = 0;
  bool said = false;
};
thread_local State t_state;

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

// The CPUs this process's cgroup allows (cgroup v2's cpuset.cpus.effective, of its own
// group, else the root's), else every online CPU.
std::string allowed_cpus() {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string own = read_line("/sys/fs/cgroup" + line.substr(3) + "/cpuset.cpus.effective");
    if (!own.empty()) return own;
  }
  std::string root = read_line("/sys/fs/cgroup/cpuset.cpus.effective");
  return root.empty() ? read_line("/sys/devices/system/cpu/online") : root;
}

// The CPU list of the NUMA node `cpu` belongs to; empty when sysfs does not say.
std::string node_cpus(int cpu) {
  const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
  DIR* d = opendir(dir.c_str());
  if (!d) return "";
  std::string node;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9') node = e->d_name;
  }
  closedir(d);
  return node.empty() ? "" : read_line("/sys/devices/system/node/" + node + "/cpulist");
}

void first_call(State& s) {
  s.phase = Phase::Leave;
  if (sched_getaffinity(0, sizeof(s.narrow), &s.narrow) != 0 || CPU_COUNT(&s.narrow) != 1) return;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s.narrow)) s.own = c;
  s.wide = Affinity::wide_set(s.own, allowed_cpus(), node_cpus(s.own));
  if (CPU_COUNT(&s.wide) > 1) s.phase = Phase::Narrow;
}

void set(State& s, Phase to) {
  const cpu_set_t& mask = to == Phase::Wide ? s.wide : s.narrow;
  if (sched_setaffinity(0, sizeof(mask), &mask) != 0) {
    DCCL_INFO("busy CPUs: could not change this thread's CPUs (%s); it stays on CPU %d", std::strerror(errno), s.own);
    s.phase = Phase::Leave;
    return;
  }
  s.phase = to;
  if (to == Phase::Wide && !s.said) {
    s.said = true;
    DCCL_INFO("busy CPUs: calls of at least %zu bytes on this thread run on CPUs %s while the host is busy "
              "(bound to CPU %d otherwise; DCCL_BUSY_WIDEN_BYTES)",
              s.widen_bytes, Affinity::cpu_list_text(s.wide).c_str(), s.own);
  }
}

bool large(const State& s) { return s.widen_bytes > 0 && s.call_bytes >= s.widen_bytes; }

}  // namespace

void Affinity::before_call(size_t bytes, size_t widen_bytes) {
  State& s = t_state;
  s.call_bytes = bytes;
  s.widen_bytes = widen_bytes;
  if (s.phase == Phase::Unknown) {
    if (widen_bytes == 0) return;
    first_call(s);
  }
  if (s.phase != Phase::Narrow && s.phase != Phase::Wide) return;
  const bool want = large(s) && Contention::busy(Contention::Clock::now());
  if (want && s.phase == Phase::Narrow) set(s, Phase::Wide);
  if (!want && s.phase == Phase::Wide) set(s, Phase::Narrow);
}

void Affinity::marked_busy() {
  State& s = t_state;
  if (s.phase == Phase::Narrow && large(s)) set(s, Phase::Wide);
}

bool Affinity::widened() { return t_state.phase == Phase::Wide; }

std::string Affinity::cpu_list_text(const cpu_set_t& s) {
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &s)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &s)) ++e;
    if (!out.empty()) out += ',';
    out += std::to_string(c);
    if (e > c) {
      out += '-';
      out += std::to_string(e);
    }
    c = e;
  }
  return out;
}

bool Affinity::parse_cpu_list(const std::string& text, cpu_set_t* out) {
  CPU_ZERO(out);
  std::stringstream in(text);
  std::string part;
  bool any = false;
  while (std::getline(in, part, ',')) {
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
    if (part.empty()) continue;
    char* end = nullptr;
    const long lo = std::strtol(part.c_str(), &end, 10);
    long hi = lo;
    if (end == part.c_str()) return false;
    if (*end == '-') {
      const char* rest = end + 1;
      hi = std::strtol(rest, &end, 10);
      if (end == rest) return false;
    }
    if (*end != '\0' || lo < 0 || hi < lo || hi >= CPU_SETSIZE) return false;
    for (long c = lo; c <= hi; ++c) CPU_SET(static_cast<int>(c), out);
    any = true;
  }
  return any;
}

cpu_set_t Affinity::wide_set(int own, const std::string& allowed, const std::string& node) {
  cpu_set_t out, n;
  if (!parse_cpu_list(allowed, &out)) CPU_ZERO(&out);
  if (parse_cpu_list(node, &n)) CPU_AND(&out, &out, &n);
  if (own >= 0 && own < CPU_SETSIZE) CPU_SET(own, &out);
  return out;
}

}  // namespace dccl::core
