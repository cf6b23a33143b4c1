#include "core/host_sleepers.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>

namespace dccl::core {

namespace {
std::mutex join_mu;  // one board replaces another at a time

int32_t this_tid() { return static_cast<int32_t>(syscall(SYS_gettid)); }
}  // namespace

int HostSleepers::take(Page& page) {
  const int32_t tid = this_tid();
  const int start = static_cast<int>(static_cast<uint32_t>(tid) % kSlots);
  for (int i = 0; i < kSlots; ++i) {
    const int s = (start + i) % kSlots;
    int32_t free = 0;
    if (page.tid[s].load(std::memory_order_relaxed) == 0 &&
        page.tid[s].compare_exchange_strong(free, tid, std::memory_order_acq_rel))
      return s;
  }
  return -1;  // more sleepers than slots: this one counts as runnable
}

bool HostSleepers::join(const std::string& name, int local_ranks) {
  if (local_ranks <= 1) return false;
  std::lock_guard<std::mutex> lk(join_mu);
  if (board_.load(std::memory_order_acquire) && local_ranks_.load(std::memory_order_acquire) >= local_ranks)
    return false;
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return false;
  // Every rank sizes it alike, whichever comes first; a new object reads as zeros
  // (no slot taken). Reserved now, so that a full /dev/shm fails here, not on a store.
  void* p = MAP_FAILED;
  if (ftruncate(fd, sizeof(Page)) == 0 && posix_fallocate(fd, 0, sizeof(Page)) == 0)
    p = mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED) {
    board_.store(static_cast<Page*>(p), std::memory_order_release);
    local_ranks_.store(local_ranks, std::memory_order_release);
  }
  return true;  // opened: the caller unlinks the name
}

void HostSleepers::unlink(const std::string& name) { shm_unlink(name.c_str()); }

std::string HostSleepers::board_name(const std::string& job, const std::string& host) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016zx", std::hash<std::string>{}(job + '\n' + host));
  return std::string("/dccl-sleepers-") + hex;
}

void HostSleepers::use(Page* page, int local_ranks) {
  std::lock_guard<std::mutex> lk(join_mu);
  board_.store(page, std::memory_order_release);
  local_ranks_.store(page ? local_ranks : 1, std::memory_order_release);
}

int HostSleepers::sleeping(int32_t* tids, int max) {
  Page* page = board_.load(std::memory_order_acquire);
  if (!page) return 0;
  int n = 0;
  for (int s = 0; s < kSlots && n < max; ++s) {
    const int32_t tid = page->tid[s].load(std::memory_order_acquire);
    if (tid > 0 && asleep(tid)) tids[n++] = tid;
  }
  return n;
}

bool HostSleepers::asleep(int32_t tid) {
  char path[32], text[512];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(tid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // gone, or another PID namespace's thread
  const ssize_t n = read(fd, text, sizeof(text));
  close(fd);
  if (n <= 0) return false;
  const char state = parse_state(text, static_cast<size_t>(n));
  return state == 'S' || state == 'D';
}

// "1234 (name) S 1 ...": the name may hold spaces and parentheses, so the state
// follows the last ')'.
char HostSleepers::parse_state(const char* text, size_t len) {
  size_t close = len;
  for (size_t i = len; i-- > 0;)
    if (text[i] == ')') {
      close = i;
      break;
    }
  if (close + 2 >= len || text[close + 1] != ' ') return 0;
  const char c = text[close + 2];
  return c >= 'A' && c <= 'Z' ? c : 0;
}

}  // namespace dccl::core
