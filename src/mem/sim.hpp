// The sim backend's extras: the dma-buf failure switch and test-only views.
// The sim backend emulates an accelerator: its pointers lie in a PROT_NONE
// reservation (a host dereference faults); the backend reaches the bytes through
// a second, read-write "shadow" mapping of the same memfd.
#pragma once
#include <cstddef>

namespace dccl::mem {

// export_dmabuf() fails with dcclUnavailable while disabled, as a driver without
// dma-buf support would. Default: DCCL_SIM_DMABUF (read at first use; "0" disables).
void sim_set_dmabuf_enabled(bool on);
bool sim_dmabuf_enabled();

// True when p lies in the sim backend's address reservation (live or not).
// Cheap, and false before the sim backend was first used (it never creates it).
bool sim_in_reservation(const void* p);

// Tests only: the backend's own read-write view of sim pointer p (nullptr when p
// is not in the reservation), and the memfd behind the arena (creates the backend).
void* sim_shadow(const void* p);
int sim_memfd();

}  // namespace dccl::mem
