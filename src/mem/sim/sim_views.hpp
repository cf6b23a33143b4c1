// Tests only: the sim backend's own views of its memory (sim_backend.cc). The rest
// of the sim backend's surface is declared in mem/backend.hpp.
#pragma once

namespace dccl::mem {

// The backend's read-write view of sim pointer p (nullptr when p is not in the
// reservation), and the memfd behind the arena (creates the backend).
void* sim_shadow(const void* p);
int sim_memfd();

}  // namespace dccl::mem
