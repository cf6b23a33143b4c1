// A fake CUDA runtime and driver behind cuda::Api, for tests on machines without
// a GPU: "device memory" is host memory the fake hands out (by default 256 bytes
// past a page, as cudaMalloc may), with per-allocation device ordinals and buffer
// ids; freed blocks are handed out again at the same address (as the runtime
// does); dma-buf exports are memfds of the exported length; copies and kernels run
// at once on the host. It records what the backend asked of it.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "mem/cuda_api.hpp"

namespace fake {

class Cuda final : public dccl::mem::cuda::Api {
 public:
  static constexpr size_t kPage = 4096;
  struct Block {
    char* raw;  // page-aligned host memory behind it
    size_t size;
    int ordinal;
    uint64_t id;
  };
  struct Export {
    uintptr_t start;
    size_t len;
    bool inside_one_allocation;
  };

  int devices = 2;
  int current = 0;
  size_t misalign = 256;       // where malloc's result sits past a page start
  std::string dmabuf_reason;   // "" = dma-buf supported
  std::vector<Export> exports;
  std::vector<uintptr_t> sync_memops;        // allocations SYNC_MEMOPS was set on
  std::map<uintptr_t, size_t> host_pinned;   // host_register'ed ranges
  int host_unregisters = 0;
  int set_device_calls = 0;

  ~Cuda() override {
    for (auto& [p, b] : live_) std::free(b.raw);
    for (auto& [size, list] : freed_)
      for (char* raw : list) std::free(raw);
    for (int fd : fds_) close(fd);
  }

  int device_count() override { return devices; }
  int current_device() override { return current; }
  void set_device(int dev) override {
    if (dev < 0 || dev >= devices) dccl::core::raise(dcclInvalidArgument, "fake cuda: no device " + std::to_string(dev));
    current = dev;
    ++set_device_calls;
  }
  std::string dmabuf_unsupported(int) override { return dmabuf_reason; }

  void* malloc(size_t bytes) override {
    const size_t span = (misalign + bytes + kPage - 1) / kPage * kPage;
    char* raw = nullptr;
    auto& list = freed_[span];
    if (!list.empty()) {  // the runtime reuses a freed block's address
      raw = list.back();
      list.pop_back();
    } else {
      raw = static_cast<char*>(std::aligned_alloc(kPage, span));
    }
    char* p = raw + misalign;
    live_[reinterpret_cast<uintptr_t>(p)] = Block{raw, bytes, current, next_id_++};
    return p;
  }
  void free(void* p) override {
    auto it = live_.find(reinterpret_cast<uintptr_t>(p));
    if (it == live_.end()) dccl::core::raise(dcclInvalidArgument, "fake cuda: free of a non-allocation");
    const size_t span = (misalign + it->second.size + kPage - 1) / kPage * kPage;
    freed_[span].push_back(it->second.raw);
    live_.erase(it);
  }
  bool pointer_info(const void* p, dccl::mem::cuda::PointerInfo* out) const override {
    const Block* b = nullptr;
    uintptr_t base = 0;
    if (!find(reinterpret_cast<uintptr_t>(p), &b, &base)) return false;
    out->base = base;
    out->size = b->size;
    out->ordinal = b->ordinal;
    out->buffer_id = b->id;
    return true;
  }
  void set_sync_memops(const void* p) override {
    const Block* b = nullptr;
    uintptr_t base = 0;
    if (!find(reinterpret_cast<uintptr_t>(p), &b, &base)) dccl::core::raise(dcclInvalidArgument, "fake cuda: not device memory");
    sync_memops.push_back(base);
  }
  int export_dmabuf(uintptr_t start, size_t len) override {
    const Block* b = nullptr;
    uintptr_t base = 0;
    const bool inside = start % kPage == 0 && len % kPage == 0 && find(start, &b, &base) &&
                        start + len <= base + b->size;
    exports.push_back(Export{start, len, inside});
    int fd = memfd_create("fake-dmabuf", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) dccl::core::raise(dcclSystemError, "fake cuda: memfd");
    fds_.push_back(fd);
    return fd;
  }
  void host_register(void* p, size_t bytes) override { host_pinned[reinterpret_cast<uintptr_t>(p)] = bytes; }
  void host_unregister(void* p) override {
    host_pinned.erase(reinterpret_cast<uintptr_t>(p));
    ++host_unregisters;
  }

  Stream stream_create() override { return this; }
  void stream_sync(Stream) override {}
  void copy_async(void* dst, const void* src, size_t bytes, Stream) override { std::memcpy(dst, src, bytes); }
  void memset_async(void* dst, int value, size_t bytes, Stream) override { std::memset(dst, value, bytes); }
  void reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt, dcclRedOp_t op,
                    Stream) override {
    dccl::kernels::reduce(dst, a, b, count, dt, op);
  }
  void avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks, Stream) override {
    dccl::kernels::finish_avg(buf, count, dt, nranks);
  }
  Event event_create() override { return &events_; }
  void event_record(Event, Stream) override {}
  bool event_done(Event) override { return true; }

 private:
  bool find(uintptr_t u, const Block** b, uintptr_t* base) const {
    auto it = live_.upper_bound(u);
    if (it == live_.begin()) return false;
    --it;
    if (u >= it->first + it->second.size) return false;
    *b = &it->second;
    *base = it->first;
    return true;
  }

  std::map<uintptr_t, Block> live_;            // by the address handed out
  std::map<size_t, std::vector<char*>> freed_;  // reusable blocks by span
  std::vector<int> fds_;
  uint64_t next_id_ = 1;
  int events_ = 0;
};

}  // namespace fake
