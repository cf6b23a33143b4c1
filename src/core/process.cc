#include "core/process.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace dccl::core {

namespace {
std::atomic<uint32_t> g_generation{0};
// Registered when the library loads: every fork after that bumps the child's count.
const int g_registered = pthread_atfork(nullptr, nullptr, [] { g_generation.fetch_add(1, std::memory_order_relaxed); });
}  // namespace

uint32_t fork_generation() {
  (void)g_registered;
  return g_generation.load(std::memory_order_relaxed);
}

int ProcessMark::current_pid() { return static_cast<int>(getpid()); }

std::string ProcessMark::fork_text(const char* what) const {
  return "this process (pid " + std::to_string(current_pid()) + ") is a fork of pid " + std::to_string(pid) +
         ", which created the " + what + "; it is usable only in that process (make a new one in the child)";
}

}  // namespace dccl::core
