#include "mem/sim/sim_arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::mem {
namespace {

constexpr size_t kMaxCapacity = size_t{64} << 30;  // virtual: nothing is committed up front
constexpr size_t kMinCapacity = size_t{256} << 20;
constexpr uint64_t kPage = 4096;
constexpr uint64_t kGrowStep = uint64_t{64} << 20;   // ftruncate granularity
constexpr uint64_t kPunchMin = uint64_t{64} << 10;   // smaller frees keep their pages
#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;  // Linux 5.14; older kernels answer EINVAL
#endif

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }

std::string errno_text(const char* what) {
  return std::string("sim: ") + what + ": " + std::strerror(errno);
}

}  // namespace

SimArena::SimArena() {
  fd_ = memfd_create("dccl-sim", MFD_CLOEXEC);
  if (fd_ < 0) core::raise(dcclSystemError, errno_text("memfd_create"));
  // Reserve the device view and the shadow view; halve the size until the
  // address space (ulimit -v, overcommit policy) allows both.
  for (size_t cap = kMaxCapacity; cap >= kMinCapacity; cap /= 2) {
    void* dev = mmap(nullptr, cap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (dev == MAP_FAILED) continue;
    void* sh = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
    if (sh == MAP_FAILED) {
      munmap(dev, cap);
      continue;
    }
    base_ = reinterpret_cast<uintptr_t>(dev);
    shadow_ = static_cast<char*>(sh);
    cap_ = cap;
    break;
  }
  if (cap_ == 0) {
    int e = errno;
    close(fd_);
    errno = e;
    core::raise(dcclSystemError, errno_text("cannot reserve address space for the arena"));
  }
  free_.emplace(0, cap_);
  DCCL_INFO("sim: arena of %zu GiB virtual, device view %p, memfd %d", cap_ >> 30,
            reinterpret_cast<void*>(base_), fd_);
}

SimArena::~SimArena() {
  if (shadow_) munmap(shadow_, cap_);
  if (base_) munmap(reinterpret_cast<void*>(base_), cap_);
  if (fd_ >= 0) close(fd_);
}

void SimArena::grow_file(uint64_t end) {
  if (end <= file_size_) return;
  uint64_t want = align_up(end, kGrowStep);
  if (want > cap_) want = cap_;
  if (ftruncate(fd_, static_cast<off_t>(want)) != 0)
    core::raise(dcclSystemError, errno_text("ftruncate of the arena memfd"));
  file_size_ = want;
}

void SimArena::punch(uint64_t off, uint64_t len) {
  if (len < kPunchMin) return;
  if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                static_cast<off_t>(len)) != 0)
    DCCL_TRACE("sim: punching %llu bytes at %llu failed: %s", (unsigned long long)len,
               (unsigned long long)off, std::strerror(errno));
}

void* SimArena::alloc(size_t bytes) {
  if (bytes == 0) core::raise(dcclInvalidArgument, "sim: alloc of 0 bytes");
  if (bytes > cap_)
    core::raise(dcclInvalidArgument, "sim: alloc of " + std::to_string(bytes) +
                                         " bytes exceeds the arena (" + std::to_string(cap_) +
                                         " bytes)");
  const uint64_t align = bytes >= (64u << 10) ? kPage : 256;
  const uint64_t need = align_up(bytes, 256);
  uint64_t a = 0;
  bool found = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const uint64_t o = it->first, len = it->second;
      a = align_up(o, align);
      if (a + need > o + len) continue;
      grow_file(a + need);  // may throw; the free list is untouched until here
      free_.erase(it);
      if (a > o) free_.emplace(o, a - o);
      if (a + need < o + len) free_.emplace(a + need, o + len - (a + need));
      live_.emplace(a, Live{bytes, need});
      in_use_ += need;
      found = true;
      break;
    }
    if (!found)
      core::raise(dcclSystemError, "sim: out of device memory: " + std::to_string(bytes) +
                                       " bytes requested, " + std::to_string(in_use_) + " of " +
                                       std::to_string(cap_) + " in use (fragmented or full)");
  }
  // Back the allocation now, as a device allocation is, so that copies measure
  // copying rather than page faults. Outside the lock: no one else can touch
  // these pages yet. Best effort (MADV_POPULATE_WRITE needs Linux 5.14).
  const uint64_t ps = align_down(a, kPage), pe = align_up(a + need, kPage);
  void* p = reinterpret_cast<void*>(base_ + a);
  if (madvise(shadow_ + ps, pe - ps, kPopulateWrite) != 0) {
    if (errno == ENOMEM) {
      free(p);
      core::raise(dcclSystemError, "sim: out of device memory: cannot back " +
                                       std::to_string(bytes) + " bytes (host memory exhausted)");
    }
    if (errno != EINVAL)
      DCCL_TRACE("sim: populating %llu bytes failed: %s", (unsigned long long)(pe - ps),
                 std::strerror(errno));
  }
  return p;
}

std::map<uint64_t, SimArena::Live>::const_iterator SimArena::find_live(uint64_t off) const {
  auto it = live_.upper_bound(off);
  if (it == live_.begin()) return live_.end();
  --it;
  return off < it->first + it->second.size ? it : live_.end();
}

size_t SimArena::free(void* p) {
  if (!in_reservation(p))
    core::raise(dcclInvalidArgument, "sim: free of a pointer outside the sim arena");
  const uint64_t off = offset_of(p);
  uint64_t start, len, size;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(off);
    if (it == live_.end()) {
      auto in = find_live(off);
      if (in != live_.end()) {
        char buf[160];
        snprintf(buf, sizeof buf, "sim: free of %p, which is %llu bytes inside the allocation at %p",
                 p, (unsigned long long)(off - in->first), reinterpret_cast<void*>(base_ + in->first));
        core::raise(dcclInvalidArgument, buf);
      }
      core::raise(dcclInvalidArgument, "sim: free of a pointer that is not a live allocation");
    }
    size = it->second.size;
    start = off;
    len = it->second.block;
    live_.erase(it);
    in_use_ -= len;
    // Coalesce with the neighbours.
    uint64_t fs = start, fl = len;
    auto next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + len) {
      fl += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == fs) {
        fs = prev->first;
        fl += prev->second;
        free_.erase(prev);
      }
    }
    free_.emplace(fs, fl);
    // Give back the whole pages that are now free: those of this block, plus the
    // partial pages at its edges when the neighbours are free too. Done under the
    // lock so that a concurrent alloc cannot receive a page being punched.
    uint64_t ps = align_up(fs, kPage), pe = align_down(fs + fl, kPage);
    uint64_t ls = align_down(start, kPage), le = align_up(start + len, kPage);
    if (ps < ls) ps = ls;
    if (pe > le) pe = le;
    if (pe > file_size_) pe = align_down(file_size_, kPage);
    if (pe > ps) punch(ps, pe - ps);
  }
  return size;
}

size_t SimArena::size_at(const void* p) const {
  if (!in_reservation(p)) return 0;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = live_.find(offset_of(p));
  return it == live_.end() ? 0 : it->second.size;
}

bool SimArena::owns(const void* p, size_t len) const {
  if (!in_reservation(p)) return false;
  const uint64_t off = offset_of(p);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = find_live(off);
  if (it == live_.end()) return false;
  return len <= it->first + it->second.size - off;
}

bool SimArena::range_of(const void* p, void** base, size_t* size) const {
  if (!in_reservation(p)) return false;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = find_live(offset_of(p));
  if (it == live_.end()) return false;
  if (base) *base = reinterpret_cast<void*>(base_ + it->first);
  if (size) *size = it->second.size;
  return true;
}

size_t SimArena::bytes_in_use() const {
  std::lock_guard<std::mutex> lk(mu_);
  return in_use_;
}

}  // namespace dccl::mem
