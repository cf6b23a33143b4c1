// Internal: the spin-wait hint (x86 PAUSE, Arm YIELD, nothing elsewhere): a
// waiting core leaves the pipeline to its sibling hyperthread and draws less power.
#pragma once

namespace dccl::core {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

}  // namespace dccl::core
