// Waiting on flags in the host shared-memory segment (coll/allreduce_smem*.cc).
#pragma once
#include <sched.h>

#include "coll/ctx.hpp"

namespace dccl::coll {

// Waits until pred() holds, yielding every few polls: the rank being waited for
// may share this core (more ranks or stream threads than cores), and a long spin
// would only delay it. Without the spin budget (ranks outnumber cores) it yields at
// once. Bounded by the operation's deadline; stops when the communicator failed.
template <class Pred>
void smem_await(Ctx& c, const char* what, int peer, Pred pred) {
  const unsigned every = c.spin_us() > 0 ? 32 : 1;
  for (unsigned i = 1; !pred(); ++i) {
    __builtin_ia32_pause();
    if (i % every == 0) {
      sched_yield();
      if ((i & 255) == 0) c.check_deadline(what, peer);
    }
  }
}

}  // namespace dccl::coll
