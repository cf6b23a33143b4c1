// Accelerator memory backends: the one interface the rest of the library sees.
// Each backend lives in a folder of its own (mem/host/, mem/sim/, mem/cuda/) and is
// reached only through what this header declares; backends do not include each
// other (tests/layers/check_layers.py enforces both).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "dccl/dccl.h"

namespace dccl::mem {

enum class Kind { Host = 0, Sim = 1, Cuda = 2 };
const char* kind_name(Kind k);

struct DmaBuf {
  int fd = -1;          // owned by the backend; valid while the allocation lives
  uint64_t offset = 0;  // offset of the exported range inside fd
  size_t len = 0;
};

// Work queued on a backend's engine; wait() blocks until it (and everything
// before it on the same engine) is done.
using Ticket = uint64_t;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Kind kind() const = 0;
  virtual const char* name() const = 0;
  // Throws core::Error(dcclInvalidArgument) for 0/oversized requests, dcclSystemError when out of memory.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;  // p must be an allocation base
  // True when [p, p+len) lies inside one live allocation of this backend.
  virtual bool owns(const void* p, size_t len = 1) const = 0;
  // Base and size of the allocation containing p (for registration keys).
  virtual bool range_of(const void* p, void** base, size_t* size) const = 0;

  // Asynchronous on the backend's engine, in submission order, with one exception:
  // CUDA runs device->host and host->device copies on a copy stream per direction,
  // so that they overlap each other (each still starts after all work submitted
  // before it other than copies of the other direction, and all work submitted
  // after it waits for it). dst/src may each be host memory or this backend's memory.
  virtual Ticket copy_async(void* dst, const void* src, size_t bytes) = 0;
  // dst = a op b elementwise (dcclAvg: sum). Every pointer is this backend's memory.
  virtual Ticket reduce_async(void* dst, const void* a, const void* b, size_t count,
                              dcclDataType_t dt, dcclRedOp_t op) = 0;
  virtual Ticket avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks) = 0;
  virtual Ticket memset_async(void* dst, int value, size_t bytes) = 0;
  // Throws core::Error(dcclTimeout) after timeout_ms, with the failing work named.
  virtual void wait(Ticket t, int64_t timeout_ms) = 0;
  virtual bool done(Ticket t) = 0;

  // Exports [p, p+len) as a dma-buf. Throws core::Error(dcclUnavailable) with the
  // reason when the backend/driver cannot.
  virtual DmaBuf export_dmabuf(const void* p, size_t len) = 0;

  // Host memory this backend's copies reach fastest (CUDA: page-locked, so that
  // device<->host copies into it are asynchronous and overlap). Returns true when
  // [p, p+bytes) is now pinned; unpin_host(p) undoes it. Never throws: when the
  // system refuses (CUDA: cudaHostRegister fails, as under gVisor), the backend says
  // so once in the log, returns false from then on without trying again, and
  // pin_refusal() gives the reason. Default: nothing to do.
  virtual bool pin_host(void* /*p*/, size_t /*bytes*/) { return false; }
  virtual void unpin_host(void* /*p*/) {}
  // Why pin_host no longer pins ("" while it does, or has nothing to do).
  virtual std::string pin_refusal() const { return {}; }

  // Device-timed copies, issued together (the backend may run them at once): the
  // device time from the first one's start to the last one's end, in microseconds,
  // once all are done; -1 when the backend has no device clock (the caller then
  // times copy_async + wait on the host). Throws core::Error(dcclTimeout) after timeout_ms.
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  virtual double time_copies_us(const Copy* /*copies*/, int /*n*/, int64_t /*timeout_ms*/) { return -1; }

  // The NIC wrote into this backend's memory (a direct receive completed): make the
  // writes visible to the device's later work before it reduces them (CUDA:
  // cudaDeviceFlushGPUDirectRDMAWrites). Default: nothing to do.
  virtual void flush_remote_writes() {}
  // Why the direct path must not register the allocation holding p (CUDA: its
  // start or end is not on a page boundary, so its dma-buf's whole pages would
  // expose a neighbour's memory), or "" when it may. Such buffers are staged.
  virtual std::string direct_unfit(const void* /*p*/) const { return {}; }
  // SYNC_MEMOPS on p's allocation: 1 set, 0 not set, -1 the backend has no such setting.
  virtual int sync_memops(const void* /*p*/) const { return -1; }
  // Names the allocation containing p so that a free and a new allocation at the
  // same address differ (CUDA: CU_POINTER_ATTRIBUTE_BUFFER_ID); 0 where the
  // backend's free hooks already invalidate everything.
  virtual uint64_t buffer_id(const void* /*p*/) const { return 0; }
  // Why this process cannot use memory at p with this backend (CUDA: memory on
  // another GPU than the one this process drives), or "" when it can.
  virtual std::string unusable_reason(const void* /*p*/) const { return {}; }
  // The device ordinal this process drives (fi_mr_attr's device), 0 where there is one.
  virtual int device() const { return 0; }
};

Backend& host_backend();
Backend& sim_backend();
Backend* cuda_backend();  // nullptr when not built or no device; see cuda_unavailable_reason()
std::string cuda_unavailable_reason();

// The sim backend emulates an accelerator: its pointers lie in a PROT_NONE
// reservation (a host dereference faults); it reaches the bytes through a second,
// read-write "shadow" mapping of the same memfd (mem/sim/).
// True when p lies in the sim backend's address reservation (live or not).
// Cheap, and false before the sim backend was first used (it never creates it).
bool sim_in_reservation(const void* p);
// The sim backend's export_dmabuf() fails with dcclUnavailable while disabled, as a
// driver without dma-buf support would. Default: DCCL_SIM_DMABUF (read at first
// use; "0" disables).
void sim_set_dmabuf_enabled(bool on);
bool sim_dmabuf_enabled();

// The backend that owns p (host when none does). A pointer inside the sim
// backend's address reservation maps to sim even when it is not live, so that
// misuse is reported by sim rather than crashing in host code.
Backend& backend_of(const void* p);

// Free hooks: every backend's free() calls them (before the memory is released)
// with the allocation's base and size, so that registration caches can drop stale
// entries. Once remove_free_hook returns, the hook is not running and will not run.
// A hook must not free memory nor add or remove hooks.
using FreeHook = std::function<void(Kind kind, const void* base, size_t size)>;
int add_free_hook(FreeHook hook);  // returns an id for remove_free_hook
void remove_free_hook(int id);
void notify_free(Kind kind, const void* base, size_t size);  // called by backends

}  // namespace dccl::mem
