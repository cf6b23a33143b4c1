// The sim backend's memory: a memfd arena seen through two mappings.
//  - the device view: an anonymous PROT_NONE reservation; its addresses are what
//    alloc() hands out, so a host dereference faults (SIGSEGV);
//  - the shadow view: a read-write MAP_SHARED mapping of the memfd, used by the
//    backend's engine (translation: p - device_base + shadow_base).
// The memfd is sparse: it grows (ftruncate) with the allocator's high-water mark
// and freed pages are punched out. Allocation: first fit over an offset-ordered
// free list with coalescing; 256-byte alignment (4 KiB for >= 64 KiB requests).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace dccl::mem {

class SimArena {
 public:
  SimArena();  // throws core::Error(dcclSystemError) when the arena cannot be set up
  ~SimArena();
  SimArena(const SimArena&) = delete;
  SimArena& operator=(const SimArena&) = delete;

  void* alloc(size_t bytes);
  // Releases the allocation at base p and returns its size; throws
  // core::Error(dcclInvalidArgument) for anything but a live allocation base.
  size_t free(void* p);
  size_t size_at(const void* p) const;  // size of the live allocation based at p, 0 if none
  bool owns(const void* p, size_t len) const;
  bool range_of(const void* p, void** base, size_t* size) const;

  bool in_reservation(const void* p) const {
    return reinterpret_cast<uintptr_t>(p) - base_ < cap_;
  }
  char* shadow(const void* p) const {
    return shadow_ + (reinterpret_cast<uintptr_t>(p) - base_);
  }
  uint64_t offset_of(const void* p) const { return reinterpret_cast<uintptr_t>(p) - base_; }
  int fd() const { return fd_; }
  uintptr_t base() const { return base_; }
  size_t capacity() const { return cap_; }
  size_t bytes_in_use() const;

 private:
  struct Live {
    uint64_t size;   // requested bytes
    uint64_t block;  // bytes reserved from the free list (>= size)
  };
  // The live allocation containing offset off, or end().
  std::map<uint64_t, Live>::const_iterator find_live(uint64_t off) const;
  void grow_file(uint64_t end);  // mu_ held
  void punch(uint64_t off, uint64_t len);

  int fd_ = -1;
  uintptr_t base_ = 0;     // device view (PROT_NONE)
  char* shadow_ = nullptr;  // shadow view (read-write)
  size_t cap_ = 0;

  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // offset -> length, coalesced
  std::map<uint64_t, Live> live_;      // offset -> allocation
  uint64_t file_size_ = 0;
  uint64_t in_use_ = 0;
};

}  // namespace dccl::mem
