// cuda_backend(): the process's CUDA backend, on the device its local rank selects.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "mem/cuda_api.hpp"

namespace dccl::mem {
namespace cuda {
namespace {

std::atomic<Backend*> g_override{nullptr};
std::once_flag g_once;
Backend* g_backend = nullptr;  // immortal: destroying streams at exit races the driver
std::string g_reason;

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

}  // namespace

int choose_device(int count, int current, std::string* how) {
  // Launcher variables, not DirectCCL settings: each names the rank's place on its host.
  static const char* const kLocalRank[] = {"DCCL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "MPI_LOCALRANKID", "SLURM_LOCALID"};
  for (const char* var : kLocalRank) {
    const char* v = getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    long r = strtol(v, &end, 10);
    if (*end || r < 0) {
      DCCL_WARN("cuda: ignoring %s='%s' (not a local rank) when choosing the device", var, v);
      continue;
    }
    const int dev = static_cast<int>(r % count);
    if (how) *how = std::string(var) + "=" + v + " of " + std::to_string(count) + " GPUs";
    return dev;
  }
  if (how) *how = "the current device; no local rank set";
  return current >= 0 && current < count ? current : 0;
}

Backend* override_backend(Backend* be) { return g_override.exchange(be); }

}  // namespace cuda

Backend* cuda_backend() {
  if (Backend* o = cuda::g_override.load(std::memory_order_acquire)) return o;
  std::call_once(cuda::g_once, cuda::init);
  return cuda::g_backend;
}

std::string cuda_unavailable_reason() {
  if (cuda::g_override.load(std::memory_order_acquire)) return {};
  std::call_once(cuda::g_once, cuda::init);
  return cuda::g_backend ? std::string() : cuda::g_reason;
}

}  // namespace dccl::mem
