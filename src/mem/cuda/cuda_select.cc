// cuda_backend(): the process's CUDA backend, on the device its local rank selects.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "core/launcher.hpp"
#include "core/log.hpp"
#include "mem/cuda/cuda_api.hpp"

namespace dccl::mem {
namespace cuda {
namespace {

std::atomic<Backend*> g_override{nullptr};
std::once_flag g_once;
Backend* g_backend = nullptr;  // immortal: destroying streams at exit races the driver
std::string g_reason;
// Set once init() ran: every call after the first is one load. std::call_once
// alone writes two thread-locals per call (libstdc++), and backend_of() asks for
// the backend several times per collective.
std::atomic<bool> g_ready{false};

void init() {
  Api* api = runtime_api(&g_reason);
  if (!api) return;
  try {
    const int n = api->device_count();
    if (n <= 0) {
      g_reason = "no CUDA device";
      return;
    }
    std::string how;
    const int dev = choose_device(n, api->current_device(), &how);
    g_backend = make_backend(*api, dev, how).release();
  } catch (const std::exception& ex) {
    g_reason = ex.what();
  }
  if (!g_backend) DCCL_INFO("cuda backend unavailable: %s", g_reason.c_str());
}

void ensure_init() {
  if (g_ready.load(std::memory_order_acquire)) return;
  std::call_once(g_once, init);
  g_ready.store(true, std::memory_order_release);
}

}  // namespace

int choose_device(int count, int current, std::string* how) {
  // The rank's place on its host (DCCL_LOCAL_RANK or the launcher's variable).
  std::string from;
  const int local = core::launcher_local_rank(&from);
  if (local >= 0) {
    if (how) *how = from + " of " + std::to_string(count) + " GPUs";
    return local % count;
  }
  if (how) *how = "the current device; no local rank set";
  return current >= 0 && current < count ? current : 0;
}

Backend* override_backend(Backend* be) { return g_override.exchange(be); }

}  // namespace cuda

Backend* cuda_backend() {
  if (Backend* o = cuda::g_override.load(std::memory_order_acquire)) return o;
  cuda::ensure_init();
  return cuda::g_backend;
}

std::string cuda_unavailable_reason() {
  if (cuda::g_override.load(std::memory_order_acquire)) return {};
  cuda::ensure_init();
  return cuda::g_backend ? std::string() : cuda::g_reason;
}

}  // namespace dccl::mem
