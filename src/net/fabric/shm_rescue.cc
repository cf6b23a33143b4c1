#include "net/fabric/shm_rescue.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/log.hpp"

namespace dccl::net {

namespace {

// The head of struct smr_region as libfabric 1.17 lays it out (prov/shm,
// SMR_VERSION 4); only these fields are read or written.
struct RegionHead {
  uint8_t version;
  uint8_t resv;
  uint16_t flags;
  int32_t pid;
  uint8_t cma_cap_peer;
  uint8_t cma_cap_self;
  uint32_t max_sar_buf_per_peer;
  void* base_addr;
  pthread_spinlock_t lock;
};
static_assert(offsetof(RegionHead, pid) == 4 && offsetof(RegionHead, base_addr) == 16 &&
                  offsetof(RegionHead, lock) == 24,
              "smr_region head layout");
constexpr uint8_t kRegionVersion = 4;

// "<pid>:<n>:<m>" from "fi_shm://<pid>:<n>:<m>" (the bytes may end in a NUL); ""
// when `address` is not an shm endpoint's.
std::string region_name(const std::string& address) {
  const std::string prefix = "fi_shm://";
  const std::string name(address.c_str());
  return name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : "";
}

}  // namespace

namespace {
// Maps the region at `address` whose header names `pid`, runs act(lock) and unmaps;
// "" when done, else why nothing was touched.
template <class Act>
std::string with_region_lock(const std::string& address, pid_t pid, Act act) {
  const std::string name = region_name(address);
  if (name.empty() || name.find('/') != std::string::npos) return "not an shm address";
  const std::string path = "/dev/shm/" + name;
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return path + ": " + std::strerror(errno);
  struct stat st {};
  std::string why;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(RegionHead)) || st.st_uid != getuid()) {
    close(fd);
    return path + ": not a region of this user";
  }
  void* p = mmap(nullptr, sizeof(RegionHead), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return path + ": mmap: " + std::strerror(errno);
  auto* head = static_cast<RegionHead*>(p);
  if (head->version != kRegionVersion || head->pid != pid || head->base_addr == nullptr)
    why = path + ": unknown region layout (version " + std::to_string(head->version) + ")";
  else
    why = act(&head->lock);
  munmap(p, sizeof(RegionHead));
  return why;
}
}  // namespace

std::string unlock_dead_shm_region(const std::string& address, pid_t pid) {
  return with_region_lock(address, pid, [](pthread_spinlock_t* lock) {
    pthread_spin_unlock(lock);
    return std::string();
  });
}

std::string release_stuck_own_region(const std::string& address, int hold_ms) {
  return with_region_lock(address, getpid(), [hold_ms](pthread_spinlock_t* lock) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(hold_ms);
    while (std::chrono::steady_clock::now() < until) {
      if (pthread_spin_trylock(lock) == 0) {  // free, or came free: nobody is stuck
        pthread_spin_unlock(lock);
        return std::string();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    pthread_spin_unlock(lock);  // held all along: by the dead sender
    return std::string("released");
  });
}

void reap_orphaned_shm_regions() {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    unsigned long pid = 0, a = 0, b = 0;
    char tail = 0;
    if (sscanf(e->d_name, "%lu:%lu:%lu%c", &pid, &a, &b, &tail) != 3 || pid == 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::string path = std::string("/dev/shm/") + e->d_name;
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && st.st_uid == getuid()) unlink(path.c_str());
  }
  closedir(d);
}

void unlink_exited_peers_regions(const std::vector<ShmPeer>& peers) {
  for (const ShmPeer& p : peers) {
    pollfd fd{p.pidfd, POLLIN, 0};
    if (poll(&fd, 1, 0) != 1 || !(fd.revents & POLLIN)) continue;  // still running
    const std::string name = region_name(p.address);
    unsigned long pid = 0, a = 0, b = 0;
    char tail = 0;
    if (sscanf(name.c_str(), "%lu:%lu:%lu%c", &pid, &a, &b, &tail) != 3 || pid != static_cast<unsigned long>(p.pid))
      continue;  // not the region of that process
    const std::string path = "/dev/shm/" + name;
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && st.st_uid == getuid()) unlink(path.c_str());
  }
}

void unlink_shm_region(const std::string& address) {
  const std::string name = region_name(address);
  if (name.empty()) return;
  unsigned long pid = 0, a = 0, b = 0;
  char tail = 0;
  if (sscanf(name.c_str(), "%lu:%lu:%lu%c", &pid, &a, &b, &tail) != 3 || pid != static_cast<unsigned long>(getpid()))
    return;
  unlink(("/dev/shm/" + name).c_str());
}

void rescue_after_peer_failure(int rank, const std::vector<ShmPeer>& peers, const std::vector<std::string>& own) {
  if (peers.empty()) return;
  std::vector<pollfd> fds;
  for (const ShmPeer& p : peers) fds.push_back(pollfd{p.pidfd, POLLIN, 0});
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  int ready = 0;
  while ((ready = poll(fds.data(), fds.size(), 20)) == 0 && std::chrono::steady_clock::now() < until) {
  }
  if (ready <= 0) return;
  for (size_t i = 0; i < peers.size(); ++i) {
    const ShmPeer& p = peers[i];
    if (!(fds[i].revents & POLLIN)) continue;  // still running
    const std::string why = unlock_dead_shm_region(p.address, p.pid);
    if (why.empty())
      DCCL_INFO("net: rank %d released the shm region lock of exited process %d", rank, static_cast<int>(p.pid));
    else
      DCCL_INFO("net: rank %d left the shm region of exited process %d alone: %s", rank, static_cast<int>(p.pid),
                why.c_str());
  }
  // A dead sender may also hold this process's own region lock.
  for (const std::string& a : own) {
    const std::string why = release_stuck_own_region(a, 50);
    if (!why.empty()) DCCL_INFO("net: rank %d own shm region: %s", rank, why.c_str());
  }
}

}  // namespace dccl::net
