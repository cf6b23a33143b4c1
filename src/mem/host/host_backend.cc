// The host backend: plain (64-byte aligned) host memory; work runs synchronously.
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "kernels/reduce.hpp"
#include "core/error.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"

namespace dccl::mem {
namespace {

constexpr size_t kMaxAlloc = size_t{1} << 46;

std::string ptr_text(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Host code must never touch sim memory: fail loudly instead of faulting.
void check_host(const void* p, const char* what) {
  if (sim_in_reservation(p))
    core::raise(dcclInvalidArgument, std::string("host: ") + what + " " + ptr_text(p) +
                                         " is sim memory; use backend_of() to pick its backend");
}

class HostBackend final : public Backend {
 public:
  Kind kind() const override { return Kind::Host; }
  const char* name() const override { return "host"; }

  void* alloc(size_t bytes) override {
    if (bytes == 0) core::raise(dcclInvalidArgument, "host: alloc of 0 bytes");
    if (bytes > kMaxAlloc)
      core::raise(dcclInvalidArgument, "host: alloc of " + std::to_string(bytes) + " bytes is too large");
    void* p = nullptr;
    int rc = posix_memalign(&p, 64, bytes);
    if (rc != 0)
      core::raise(dcclSystemError, "host: alloc of " + std::to_string(bytes) +
                                       " bytes failed: " + std::strerror(rc));
    std::lock_guard<std::mutex> lk(mu_);
    live_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }

  void free(void* p) override {
    if (!p) return;
    size_t size;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = live_.find(reinterpret_cast<uintptr_t>(p));
      if (it == live_.end()) {
        auto in = find(p);
        if (in != live_.end())
          core::raise(dcclInvalidArgument, "host: free of " + ptr_text(p) + ", which is inside the allocation at " +
                                               ptr_text(reinterpret_cast<void*>(in->first)));
        core::raise(dcclInvalidArgument,
                    "host: free of " + ptr_text(p) + ", which the host backend did not allocate");
      }
      size = it->second;
      live_.erase(it);
    }
    notify_free(Kind::Host, p, size);
    ::free(p);
  }

  bool owns(const void* p, size_t len) const override {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = find(p);
    return it != live_.end() &&
           len <= it->first + it->second - reinterpret_cast<uintptr_t>(p);
  }

  bool range_of(const void* p, void** base, size_t* size) const override {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = find(p);
    if (it == live_.end()) return false;
    if (base) *base = reinterpret_cast<void*>(it->first);
    if (size) *size = it->second;
    return true;
  }

  Ticket copy_async(void* dst, const void* src, size_t bytes) override {
    if (bytes) {
      check_host(dst, "copy_async destination");
      check_host(src, "copy_async source");
      if (dst != src) std::memmove(dst, src, bytes);
    }
    return ++issued_;
  }

  Ticket reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
                      dcclRedOp_t op) override {
    if (!core::dtype_valid(dt) || !core::op_valid(op))
      core::raise(dcclInvalidArgument, "host: reduce_async: invalid datatype or op");
    if (count) {
      check_host(dst, "reduce_async destination");
      check_host(a, "reduce_async operand a");
      check_host(b, "reduce_async operand b");
      kernels::reduce(dst, a, b, count, dt, op);
    }
    return ++issued_;
  }

  Ticket avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks) override {
    if (!core::dtype_valid(dt) || nranks < 1)
      core::raise(dcclInvalidArgument, "host: avg_async: invalid datatype or nranks");
    if (count) {
      check_host(buf, "avg_async buffer");
      kernels::finish_avg(buf, count, dt, nranks);
    }
    return ++issued_;
  }

  Ticket memset_async(void* dst, int value, size_t bytes) override {
    if (bytes) {
      check_host(dst, "memset_async destination");
      std::memset(dst, value, bytes);
    }
    return ++issued_;
  }

  // Work is done before its ticket is returned.
  void wait(Ticket t, int64_t) override {
    if (t > issued_.load())
      core::raise(dcclInvalidArgument, "host: wait on ticket " + std::to_string(t) + ", which was never issued");
  }
  bool done(Ticket t) override { return t <= issued_.load(); }

  DmaBuf export_dmabuf(const void*, size_t) override {
    core::raise(dcclUnavailable, "host memory has no dma-buf exporter");
  }

 private:
  std::map<uintptr_t, size_t>::const_iterator find(const void* p) const {
    auto u = reinterpret_cast<uintptr_t>(p);
    auto it = live_.upper_bound(u);
    if (it == live_.begin()) return live_.end();
    --it;
    return u < it->first + it->second ? it : live_.end();
  }

  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> live_;  // base -> bytes
  std::atomic<Ticket> issued_{0};
};

}  // namespace

Backend& host_backend() {
  static HostBackend* b = new HostBackend();  // immortal, like the sim backend
  return *b;
}

}  // namespace dccl::mem
