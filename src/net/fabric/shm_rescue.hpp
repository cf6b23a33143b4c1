// The libfabric shm provider's regions in /dev/shm, looked after where the
// provider does not: regions of dead processes removed, an abandoned endpoint's
// own region unlinked, and a dead receiver's region lock released.
//
// libfabric 1.17's shm provider delivers a message by taking a spinlock in the
// receiver's shared region. A receiver killed while holding its own lock leaves
// it taken forever, and a sender that is inside fi_tsend to it at that moment
// spins inside the provider where no caller can interrupt it. Once the receiver
// is known to be dead, nothing it owned needs protecting: another thread (the
// failure watcher) maps the dead process's region and unlocks it, so the stuck
// sender returns and the communicator reports the failure within its timeout.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace dccl::net {

// A same-host peer reached through shm: a pidfd of its process, its pid and its
// shm endpoint's name.
struct ShmPeer {
  int pidfd;
  pid_t pid;
  std::string address;
};

// A peer failed (the failure watcher's thread, beside a thread that may be stuck in
// the provider): waits up to 500 ms for exiting peers' pidfds to turn readable
// (their sockets close a moment before), unlocks the regions of those that exited
// (unlock_dead_shm_region), then releases this process's own regions (`own`: its
// shm endpoints' names) if a dead sender left them locked (release_stuck_own_region).
// Logs what it did for `rank`.
void rescue_after_peer_failure(int rank, const std::vector<ShmPeer>& peers, const std::vector<std::string>& own);

// `address` is the dead peer's shm endpoint name ("fi_shm://<pid>:<n>:<m>"), `pid`
// its process, which must have exited (the caller knows it from a pidfd). Maps /dev/shm/<pid>:<n>:<m>, checks the
// header the provider writes (layout version 4, as libfabric 1.17 writes it, and
// the pid), and unlocks the region's lock with pthread_spin_unlock. Returns ""
// when done, else why nothing was touched.
std::string unlock_dead_shm_region(const std::string& address, pid_t pid);

// A sender killed while holding the lock of this process's own region (the one it
// was delivering into) leaves it taken: this process's progress and every other
// sender to it then spin in the provider. Once a peer is known dead, the failure
// watcher calls this with this process's own shm endpoint address: a lock that
// stays taken for `hold_ms` (a live holder keeps it for microseconds) is released.
// Returns "" when the lock was free or came free, "released" when it was forced,
// else why nothing was touched.
std::string release_stuck_own_region(const std::string& address, int hold_ms);

// The provider names its region /dev/shm/<pid>:<n>:<m> and leaves it behind when
// the process is killed; a later process with the same pid then fails fi_enable
// with EBUSY. Removes such regions of this user whose process no longer exists.
void reap_orphaned_shm_regions();

// Unlinks the regions of the `peers` whose process has exited (its pidfd is
// readable), zombies included: reap_orphaned_shm_regions() cannot tell a zombie
// from a live process, and a peer killed a moment before this process closes its
// transport is often still one (its parent has not waited for it yet).
void unlink_exited_peers_regions(const std::vector<ShmPeer>& peers);

// Unlinks the region of this process's shm endpoint at `address` ("fi_shm://
// <pid>:<n>:<m>", as fi_getname gives it); other addresses are left alone.
void unlink_shm_region(const std::string& address);

}  // namespace dccl::net
