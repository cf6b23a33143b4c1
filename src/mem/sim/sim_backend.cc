// The sim backend: an emulated accelerator (see mem/backend.hpp, sim_arena.hpp, sim_engine.hpp).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <strings.h>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"
#include "mem/sim/sim_views.hpp"
#include "mem/sim/sim_arena.hpp"
#include "mem/sim/sim_engine.hpp"

namespace dccl::mem {
namespace {

// Published once the backend exists, so that sim_in_reservation() never creates it.
std::atomic<uintptr_t> g_base{0};
std::atomic<size_t> g_cap{0};
// -1: not read yet (DCCL_SIM_DMABUF is read at first use), 0: disabled, 1: enabled.
std::atomic<int> g_dmabuf{-1};

std::string ptr_text(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

class SimBackend final : public Backend {
 public:
  SimBackend() {
    g_cap.store(arena_.capacity(), std::memory_order_relaxed);
    g_base.store(arena_.base(), std::memory_order_release);
  }

  Kind kind() const override { return Kind::Sim; }
  const char* name() const override { return "sim"; }

  void* alloc(size_t bytes) override { return arena_.alloc(bytes); }

  void free(void* p) override {
    if (!p) return;
    size_t size = arena_.size_at(p);
    if (size == 0) arena_.free(p);  // not a live base: throws with the reason
    // Like cudaFree: work already queued may still touch the memory.
    engine_.drain();
    notify_free(Kind::Sim, p, size);
    arena_.free(p);
  }

  bool owns(const void* p, size_t len) const override { return arena_.owns(p, len); }
  bool range_of(const void* p, void** base, size_t* size) const override {
    return arena_.range_of(p, base, size);
  }

  Ticket copy_async(void* dst, const void* src, size_t bytes) override {
    SimWork w;
    w.op = SimWork::Step::Copy;
    w.n = bytes;
    if (bytes) {
      w.dst = view(dst, bytes, "copy_async destination", true);
      w.a = view(src, bytes, "copy_async source", true);
    }
    return engine_.submit(w);
  }

  Ticket reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
                      dcclRedOp_t op) override {
    check_type(dt, "reduce_async");
    if (!core::op_valid(op))
      core::raise(dcclInvalidArgument, "sim: reduce_async: invalid op " + std::to_string(op));
    SimWork w;
    w.op = SimWork::Step::Reduce;
    w.n = count;
    w.dt = dt;
    w.op_red = op;
    if (count) {
      const size_t bytes = count * core::dtype_size(dt);
      if (bytes / core::dtype_size(dt) != count)
        core::raise(dcclInvalidArgument, "sim: reduce_async: count overflows");
      check_alias(dst, a, bytes);
      check_alias(dst, b, bytes);
      w.dst = view(dst, bytes, "reduce_async destination", false);
      w.a = view(a, bytes, "reduce_async operand a", false);
      w.b = view(b, bytes, "reduce_async operand b", false);
    }
    return engine_.submit(w);
  }

  Ticket avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks) override {
    check_type(dt, "avg_async");
    if (nranks < 1)
      core::raise(dcclInvalidArgument, "sim: avg_async: nranks " + std::to_string(nranks));
    SimWork w;
    w.op = SimWork::Step::Avg;
    w.n = count;
    w.dt = dt;
    w.arg = nranks;
    if (count) w.dst = view(buf, count * core::dtype_size(dt), "avg_async buffer", false);
    return engine_.submit(w);
  }

  Ticket memset_async(void* dst, int value, size_t bytes) override {
    SimWork w;
    w.op = SimWork::Step::Memset;
    w.n = bytes;
    w.arg = value;
    if (bytes) w.dst = view(dst, bytes, "memset_async destination", false);
    return engine_.submit(w);
  }

  void wait(Ticket t, int64_t timeout_ms) override { engine_.wait(t, timeout_ms); }
  bool done(Ticket t) override { return engine_.done(t); }

  DmaBuf export_dmabuf(const void* p, size_t len) override {
    if (!sim_dmabuf_enabled())
      core::raise(dcclUnavailable, "sim: dma-buf export disabled (DCCL_SIM_DMABUF=0)");
    if (len == 0) core::raise(dcclInvalidArgument, "sim: export_dmabuf of 0 bytes");
    if (!arena_.owns(p, len))
      core::raise(dcclInvalidArgument, "sim: export_dmabuf: [" + ptr_text(p) + ", +" +
                                           std::to_string(len) +
                                           ") is not inside one live sim allocation");
    DmaBuf d;
    d.fd = arena_.fd();
    d.offset = arena_.offset_of(p);
    d.len = len;
    return d;
  }

  const SimArena& arena() const { return arena_; }

 private:
  // The engine's view of [p, p+len): the shadow for sim memory, p itself for host
  // memory (when host_ok). Rejects sim pointers outside one live allocation.
  void* view(const void* p, size_t len, const char* what, bool host_ok) const {
    if (arena_.in_reservation(p)) {
      if (!arena_.owns(p, len))
        core::raise(dcclInvalidArgument, std::string("sim: ") + what + " [" + ptr_text(p) +
                                             ", +" + std::to_string(len) +
                                             ") is not inside one live sim allocation");
      return arena_.shadow(p);
    }
    if (!host_ok)
      core::raise(dcclInvalidArgument, std::string("sim: ") + what + " " + ptr_text(p) +
                                           " is not sim memory (device work needs device memory)");
    if (!p) core::raise(dcclInvalidArgument, std::string("sim: ") + what + " is null");
    return const_cast<void*>(p);
  }

  static void check_type(dcclDataType_t dt, const char* what) {
    if (!core::dtype_valid(dt))
      core::raise(dcclInvalidArgument,
                  std::string("sim: ") + what + ": invalid datatype " + std::to_string(dt));
  }

  // dst may alias an operand exactly, not partially.
  static void check_alias(const void* dst, const void* src, size_t bytes) {
    auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    if (d != s && d < s + bytes && s < d + bytes)
      core::raise(dcclInvalidArgument, "sim: reduce_async: destination " + ptr_text(dst) +
                                           " partially overlaps operand " + ptr_text(src));
  }

  SimArena arena_;
  SimEngine engine_;
};

SimBackend& instance() {
  // Immortal: the engine thread must outlive every static that might still use it.
  static SimBackend* b = new SimBackend();
  return *b;
}

}  // namespace

Backend& sim_backend() { return instance(); }

void sim_set_dmabuf_enabled(bool on) { g_dmabuf.store(on ? 1 : 0); }

bool sim_dmabuf_enabled() {
  int v = g_dmabuf.load();
  if (v < 0) {
    int fresh = 1;
    try {
      fresh = core::parse_bool(core::setting_text("DCCL_SIM_DMABUF"), "DCCL_SIM_DMABUF") ? 1 : 0;
    } catch (const core::Error& e) {  // init refuses it, naming the setting; here it stays on
      DCCL_WARN("%s", e.what());
    }
    // A concurrent setter wins over the environment.
    g_dmabuf.compare_exchange_strong(v, fresh);
    v = g_dmabuf.load();
  }
  return v == 1;
}

bool sim_in_reservation(const void* p) {
  uintptr_t base = g_base.load(std::memory_order_acquire);
  return base != 0 && reinterpret_cast<uintptr_t>(p) - base < g_cap.load(std::memory_order_relaxed);
}

void* sim_shadow(const void* p) {
  const SimArena& a = instance().arena();
  return a.in_reservation(p) ? a.shadow(p) : nullptr;
}

int sim_memfd() { return instance().arena().fd(); }

}  // namespace dccl::mem
