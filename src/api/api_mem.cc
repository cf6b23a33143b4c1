// C API: device memory allocation and copies (host, sim, cuda backends).
#include <cstring>

#include "api/handles.hpp"
#include "core/config.hpp"
#include "mem/backend.hpp"

using namespace dccl;

namespace {
// Any int may arrive through the C ABI: read the enum's bytes, never load it as an
// out-of-range enum value (undefined in C++).
mem::Backend& backend_for(const dcclMemType_t* type) {
  int t;
  static_assert(sizeof(t) == sizeof(*type));
  std::memcpy(&t, type, sizeof(t));
  switch (t) {
    case dcclMemHost: return mem::host_backend();
    case dcclMemSim: return mem::sim_backend();
    case dcclMemCuda: {
      mem::Backend* b = mem::cuda_backend();
      if (!b) core::raise(dcclUnavailable, "dcclMemAlloc: CUDA memory unavailable: " + mem::cuda_unavailable_reason());
      return *b;
    }
  }
  core::raise(dcclInvalidArgument, "dcclMemAlloc: type " + std::to_string(t) + " is not a dcclMemType_t");
}

// The backend that can perform a copy between dst and src.
mem::Backend& copier(const void* dst, const void* src) {
  mem::Backend& d = mem::backend_of(dst);
  return d.kind() != mem::Kind::Host ? d : mem::backend_of(src);
}
}  // namespace

extern "C" {

dcclResult_t dcclMemAlloc(void** ptr, size_t bytes, dcclMemType_t type) {
  return api::guard("dcclMemAlloc", [&] {
    if (!ptr) core::raise(dcclInvalidArgument, "dcclMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (bytes == 0) core::raise(dcclInvalidArgument, "dcclMemAlloc: bytes is 0");
    if (bytes > (size_t{1} << 46)) core::raise(dcclInvalidArgument, "dcclMemAlloc: bytes " + std::to_string(bytes) + " is too large");
    *ptr = backend_for(&type).alloc(bytes);
  });
}

dcclResult_t dcclMemFree(void* ptr) {
  return api::guard("dcclMemFree", [&] {
    if (!ptr) return;
    mem::Backend& b = mem::backend_of(ptr);
    if (b.kind() == mem::Kind::Host && !b.owns(ptr))
      core::raise(dcclInvalidArgument, "dcclMemFree: pointer was not allocated by dcclMemAlloc");
    b.free(ptr);
  });
}

dcclResult_t dcclMemcpy(void* dst, const void* src, size_t bytes) {
  return api::guard("dcclMemcpy", [&] {
    if (bytes == 0) return;
    if (!dst || !src) core::raise(dcclInvalidArgument, std::string("dcclMemcpy: ") + (dst ? "src" : "dst") + " is NULL");
    mem::Backend& b = copier(dst, src);
    b.wait(b.copy_async(dst, src, bytes), core::config().timeout_ms);
  });
}

dcclResult_t dcclMemset(void* dst, int value, size_t bytes) {
  return api::guard("dcclMemset", [&] {
    if (bytes == 0) return;
    if (!dst) core::raise(dcclInvalidArgument, "dcclMemset: dst is NULL");
    mem::Backend& b = mem::backend_of(dst);
    b.wait(b.memset_async(dst, value, bytes), core::config().timeout_ms);
  });
}

}  // extern "C"
