// A rank bound to one CPU (dccl-run's default, mpirun --bind-to core) runs only when
// that CPU's scheduler picks it. Beside busy processes (core/contention.hpp) that
// costs the large calls dearly: each step of a pipelined allreduce needs both ranks
// running, and a bound rank waits behind the busy process on its CPU while another
// CPU may be free (2 ranks on shared memory, 2 spinners on 2 cores, 16 MiB: bound
// 59-258 ms a call, unbound 14-18 ms; bench/results/2026-12-05-busy-large). Small
// calls go the other way (8 B: bound 0.6 us, unbound 4-34 us: unbound ranks often
// share a CPU and hand it over at every step).
//
// So while the host is marked busy, the thread running a call of at least
// `widen_bytes` (DCCL_BUSY_WIDEN_BYTES) may run on every CPU of its NUMA node that
// the process's cgroup allows; it returns to its one CPU at the first call below
// that size or once the mark has expired. Only a thread that was bound to exactly
// one CPU when it first ran a call is ever widened: other placements are the
// launcher's or the user's, and are left as they are. Per thread (the affinity is),
// no lock; one sched_setaffinity per change, none while nothing changes.
#pragma once
#include <sched.h>

#include <cstddef>
#include <string>

namespace dccl::core {

class Affinity {
 public:
  // Before a call of `bytes` on this thread; `widen_bytes` 0: never widen.
  static void before_call(size_t bytes, size_t widen_bytes);
  // The host was just marked busy during a call on this thread: widen now if that
  // call is large enough (the mark comes from inside its waits).
  static void marked_busy();
  // Whether this thread is widened now (for tests and logs).
  static bool widened();
  // The CPUs a bound thread may widen to: `allowed` (the cgroup's, or every online
  // CPU) within `node` (its NUMA node's, empty when unknown), never empty: `own` at
  // least. Lists in the kernel's format ("0-3,8,10-11"); exposed for tests.
  static cpu_set_t wide_set(int own, const std::string& allowed, const std::string& node);
  // A CPU set in the kernel's list format ("0-3,8"); empty for an empty set.
  static std::string cpu_list_text(const cpu_set_t& s);
  // Parses a kernel CPU list into `out`; false when the text is not one.
  static bool parse_cpu_list(const std::string& text, cpu_set_t* out);
};

}  // namespace dccl::core
