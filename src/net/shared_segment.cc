#include "net/shared_segment.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/error.hpp"

namespace dccl::net {

namespace {
// The flags of all ranks, the sleepers' line and the ranks' seats, then the
// one-shot slots of all ranks, then the chunk slots.
size_t flag_bytes(int n) { return static_cast<size_t>(n) * SharedSegment::kFlags * sizeof(SharedSegment::Flag); }
size_t header_bytes(int n) {
  return flag_bytes(n) + sizeof(SharedSegment::Sleep) + static_cast<size_t>(n) * sizeof(SharedSegment::Seat);
}
}  // namespace

SharedSegment::SharedSegment(int rank, int nranks, size_t slot_bytes, size_t chunk_bytes,
                       const std::function<void(const std::string&)>& publish,
                       const std::function<std::string()>& fetch, const std::function<void()>& barrier)
    : rank_(rank),
      n_(nranks),
      slot_stride_(slot_bytes == 0 ? 0 : (slot_bytes + kSlotData + 63) & ~size_t{63}),
      chunk_bytes_((chunk_bytes + 63) & ~size_t{63}) {
  bytes_ = header_bytes(n_) + static_cast<size_t>(n_) * 2 * (slot_stride_ + chunk_bytes_);
  std::string name;
  int fd = -1;
  if (rank_ == 0) {
    std::random_device rd;
    name = "/dccl-" + std::to_string(getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    // posix_fallocate reserves the pages now: a full /dev/shm (containers often give
    // it 64 MiB) then fails here, cleanly, instead of with SIGBUS on first touch.
    int e = 0;
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes_)) != 0) e = errno;
    if (e == 0) e = posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
    if (e != 0) {
      if (fd >= 0) {
        close(fd);
        shm_unlink(name.c_str());
      }
      publish("");
      core::raise(dcclSystemError, core::describe(rank_, "shared-memory segment", std::string("create: ") + strerror(e)));
    }
    publish(name);
  } else {
    name = fetch();
    if (name.empty()) core::raise(dcclSystemError, core::describe(rank_, "shared-memory segment", "rank 0 could not create it"));
    fd = shm_open(name.c_str(), O_RDWR, 0600);
  }
  // From here every rank reaches the barrier, failed or not.
  int e = fd < 0 ? errno : 0;
  void* p = fd < 0 ? MAP_FAILED : mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0 && p == MAP_FAILED) e = errno;
  if (fd >= 0) close(fd);
  barrier();  // everyone has it open (or failed)
  if (rank_ == 0) shm_unlink(name.c_str());
  if (p == MAP_FAILED) core::raise(dcclSystemError, core::describe(rank_, "shared-memory segment", std::string("open/map: ") + strerror(e)));
  base_ = static_cast<char*>(p);
  slots_ = base_ + header_bytes(n_);
  sleep_ = reinterpret_cast<Sleep*>(base_ + flag_bytes(n_));
  seats_ = reinterpret_cast<Seat*>(base_ + flag_bytes(n_) + sizeof(Sleep));
}

SharedSegment::~SharedSegment() {
  if (base_) munmap(base_, bytes_);
}

SharedSegment::Flag& SharedSegment::flag(int rank, int id) const {
  return reinterpret_cast<Flag*>(base_)[static_cast<size_t>(rank) * kFlags + static_cast<size_t>(id)];
}

// Shared between processes: not FUTEX_PRIVATE_FLAG.
void SharedSegment::wake_all() {
  sleep_->seq.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&sleep_->seq), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void SharedSegment::sleep_on(uint32_t seen, int64_t ns) {
  const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&sleep_->seq), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

char* SharedSegment::chunk_slot(int rank, int parity) const {
  return slots_ + static_cast<size_t>(n_) * 2 * slot_stride_ +
         (static_cast<size_t>(rank) * 2 + static_cast<size_t>(parity)) * chunk_bytes_;
}

}  // namespace dccl::net
