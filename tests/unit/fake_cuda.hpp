// A fake CUDA runtime and driver behind cuda::Api, for tests on machines without
// a GPU: "device memory" is host memory the fake hands out (by default 256 bytes
// past a page, as cudaMalloc may), with per-allocation device ordinals and buffer
// ids; freed blocks are handed out again at the same address (as the runtime
// does); dma-buf exports are memfds of the exported length; copies and kernels run
// at once on the host. It records what the backend asked of it: every stream
// operation in order (Call), with its stream and, for waits, the event; page-locking
// may be refused; events keep a fake device clock (each copy takes bytes/1000 us)
// for timing; the current device and whether a context is current are per thread
// (the thread that made the fake starts with a context, as a test's main thread
// that has used CUDA would; others have none until set_device).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "mem/cuda/cuda_api.hpp"

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

  // One stream operation, in issue order. kind: "h2d", "d2h", "d2d", "h2h" (copies),
  // "memset", "reduce", "avg", "record" (event), "wait" (stream waits for event).
  struct Call {
    std::string kind;
    Stream stream;
    Event event;  // record, wait
  };

  int devices = 2;
  int current = 0;  // the current device of the thread that made the fake
  size_t misalign = 256;       // where malloc's result sits past a page start
  std::string dmabuf_reason;   // "" = dma-buf supported
  std::vector<Export> exports;
  std::vector<uintptr_t> sync_memops;        // allocations SYNC_MEMOPS was set on
  std::map<uintptr_t, size_t> host_pinned;   // host_register'ed ranges
  int host_unregisters = 0;
  int host_register_calls = 0;
  std::string refuse_host_register;  // non-empty: cudaHostRegister fails with this
  int set_device_calls = 0;
  std::vector<Call> calls;
  std::vector<Stream> streams;  // as created
  bool flush_supported = true;
  int flushes = 0;
  double clock_us = 0;  // the fake device clock, advanced by copies

  ~Cuda() override {
    for (auto& [p, b] : live_) std::free(b.raw);
    for (auto& [size, list] : freed_)
      for (char* raw : list) std::free(raw);
    for (int fd : fds_) close(fd);
  }

  int device_count() override { return devices; }
  int current_device() override { return thread().dev; }
  void set_device(int dev) override {
    if (dev < 0 || dev >= devices) dccl::core::raise(dcclInvalidArgument, "fake cuda: no device " + std::to_string(dev));
    Thread t = thread();
    t.dev = dev;
    t.context = true;
    set_thread(t);
    ++set_device_calls;
  }
  // Driver calls need a current context (CUDA_ERROR_INVALID_CONTEXT otherwise).
  void need_context(const char* what) const {
    if (!thread().context)
      dccl::core::raise(dcclUnhandledDeviceError, std::string("fake cuda: ") + what +
                                                      ": CUDA_ERROR_INVALID_CONTEXT (no current context on this thread)");
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
    live_[reinterpret_cast<uintptr_t>(p)] = Block{raw, bytes, thread().dev, next_id_++};
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
    need_context("cuPointerSetAttribute");
    const Block* b = nullptr;
    uintptr_t base = 0;
    if (!find(reinterpret_cast<uintptr_t>(p), &b, &base)) dccl::core::raise(dcclInvalidArgument, "fake cuda: not device memory");
    sync_memops.push_back(base);
  }
  bool sync_memops_set(const void* p) const override {
    const Block* b = nullptr;
    uintptr_t base = 0;
    if (!find(reinterpret_cast<uintptr_t>(p), &b, &base)) dccl::core::raise(dcclInvalidArgument, "fake cuda: not device memory");
    for (uintptr_t s : sync_memops)
      if (s == base) return true;
    return false;
  }
  int export_dmabuf(uintptr_t start, size_t len) override {
    need_context("cuMemGetHandleForAddressRange");
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
  void host_register(void* p, size_t bytes) override {
    ++host_register_calls;
    if (!refuse_host_register.empty())
      dccl::core::raise(dcclUnhandledDeviceError, "cuda: cudaHostRegister: " + refuse_host_register);
    host_pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  }
  void host_unregister(void* p) override {
    host_pinned.erase(reinterpret_cast<uintptr_t>(p));
    ++host_unregisters;
  }

  Stream stream_create() override {
    owned_.push_back(std::make_unique<char>());
    streams.push_back(owned_.back().get());
    return streams.back();
  }
  void stream_sync(Stream) override {}
  void copy_async(void* dst, const void* src, size_t bytes, Stream s) override {
    std::memcpy(dst, src, bytes);
    const bool dd = is_device(dst), sd = is_device(src);
    calls.push_back({dd && sd ? "d2d" : dd ? "h2d" : sd ? "d2h" : "h2h", s, nullptr});
    clock_us += static_cast<double>(bytes) / 1000;
  }
  void memset_async(void* dst, int value, size_t bytes, Stream s) override {
    std::memset(dst, value, bytes);
    calls.push_back({"memset", s, nullptr});
  }
  void reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt, dcclRedOp_t op,
                    Stream s) override {
    dccl::kernels::reduce(dst, a, b, count, dt, op);
    calls.push_back({"reduce", s, nullptr});
  }
  void avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks, Stream s) override {
    dccl::kernels::finish_avg(buf, count, dt, nranks);
    calls.push_back({"avg", s, nullptr});
  }
  Event event_create() override {
    owned_.push_back(std::make_unique<char>());
    return owned_.back().get();
  }
  void event_record(Event e, Stream s) override {
    stamps_[e] = clock_us;
    calls.push_back({"record", s, e});
  }
  bool event_done(Event) override { return true; }
  void stream_wait_event(Stream s, Event e) override { calls.push_back({"wait", s, e}); }
  Event timing_event_create() override {
    ++timing_events;
    return event_create();
  }
  void event_destroy(Event) override { ++events_destroyed; }
  float event_elapsed_ms(Event a, Event b) override {
    return static_cast<float>((stamps_.at(b) - stamps_.at(a)) / 1000);
  }
  bool flush_rdma_writes() override {
    need_context("cudaDeviceFlushGPUDirectRDMAWrites");
    if (!flush_supported) return false;
    ++flushes;
    return true;
  }
  int timing_events = 0, events_destroyed = 0;

  bool is_device(const void* p) const {
    const Block* b = nullptr;
    uintptr_t base = 0;
    return find(reinterpret_cast<uintptr_t>(p), &b, &base);
  }

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

  struct Thread {
    int dev = 0;           // cudaGetDevice on a fresh thread: device 0
    bool context = false;  // no context is current until cudaSetDevice
  };
  Thread thread() const {
    if (std::this_thread::get_id() == owner_) return Thread{current, true};
    std::lock_guard<std::mutex> lk(thread_mu_);
    auto it = threads_.find(std::this_thread::get_id());
    return it == threads_.end() ? Thread{} : it->second;
  }
  void set_thread(const Thread& t) {
    if (std::this_thread::get_id() == owner_) {
      current = t.dev;
      return;
    }
    std::lock_guard<std::mutex> lk(thread_mu_);
    threads_[std::this_thread::get_id()] = t;
  }

  std::map<uintptr_t, Block> live_;            // by the address handed out
  std::map<size_t, std::vector<char*>> freed_;  // reusable blocks by span
  std::vector<int> fds_;
  uint64_t next_id_ = 1;
  std::vector<std::unique_ptr<char>> owned_;  // streams and events: distinct addresses
  std::map<Event, double> stamps_;            // clock_us at each event's last record
  const std::thread::id owner_ = std::this_thread::get_id();
  mutable std::mutex thread_mu_;
  std::map<std::thread::id, Thread> threads_;
};

}  // namespace fake
