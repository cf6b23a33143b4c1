#include "net/shm_rescue.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

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

}  // namespace

std::string unlock_dead_shm_region(const std::string& address, pid_t pid) {
  const std::string prefix = "fi_shm://";
  std::string name(address.c_str());
  if (name.compare(0, prefix.size(), prefix) != 0) return "not an shm address";
  name = name.substr(prefix.size());
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
  if (head->version != kRegionVersion || head->pid != pid || head->base_addr == nullptr) {
    why = path + ": unknown region layout (version " + std::to_string(head->version) + ")";
  } else {
    pthread_spin_unlock(&head->lock);
  }
  munmap(p, sizeof(RegionHead));
  return why;
}

}  // namespace dccl::net
