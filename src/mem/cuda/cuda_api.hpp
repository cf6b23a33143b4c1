// The seam between the CUDA backend's logic (cuda_backend.cc, built everywhere)
// and the CUDA runtime and driver (toolkit/cuda_runtime_api.cc, built with CUDA).
// Every call the backend makes to CUDA goes through cuda::Api, so that a test can
// stand in a fake device and check device choice, export ranges, registration
// keys, pinning and memory-ordering settings on machines without a GPU.
//
// Api calls throw core::Error with the CUDA error's name on failure.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "dccl/dccl.h"
#include "mem/backend.hpp"

namespace dccl::mem::cuda {

// What the driver knows of an address (cuPointerGetAttributes).
struct PointerInfo {
  uintptr_t base = 0;      // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
  size_t size = 0;         // CU_POINTER_ATTRIBUTE_RANGE_SIZE
  int ordinal = -1;        // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
  uint64_t buffer_id = 0;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: differs after free + malloc
};

class Api {
 public:
  using Stream = void*;
  using Event = void*;
  virtual ~Api() = default;

  virtual int device_count() = 0;
  virtual int current_device() = 0;
  virtual void set_device(int dev) = 0;
  // "" when device dev can export dma-bufs, else why it cannot.
  virtual std::string dmabuf_unsupported(int dev) = 0;

  virtual void* malloc(size_t bytes) = 0;  // on the current device
  virtual void free(void* p) = 0;
  // False when p is not device memory of any GPU.
  virtual bool pointer_info(const void* p, PointerInfo* out) const = 0;
  // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on p's allocation: synchronous copies to it
  // are complete when they return, so a NIC reading it sees the data.
  virtual void set_sync_memops(const void* p) = 0;
  // Whether SYNC_MEMOPS is set on p's allocation (for the dma-buf probe).
  virtual bool sync_memops_set(const void* p) const = 0;
  // A dma-buf fd for the page-aligned [start, start+len) (cuMemGetHandleForAddressRange).
  virtual int export_dmabuf(uintptr_t start, size_t len) = 0;
  // Page-locks host memory (cudaHostRegister) so device copies to it are asynchronous.
  virtual void host_register(void* p, size_t bytes) = 0;
  virtual void host_unregister(void* p) = 0;

  virtual Stream stream_create() = 0;
  virtual void stream_sync(Stream s) = 0;
  virtual void copy_async(void* dst, const void* src, size_t bytes, Stream s) = 0;
  virtual void memset_async(void* dst, int value, size_t bytes, Stream s) = 0;
  virtual void reduce_async(void* dst, const void* a, const void* b, size_t count, dcclDataType_t dt,
                            dcclRedOp_t op, Stream s) = 0;
  virtual void avg_async(void* buf, size_t count, dcclDataType_t dt, int nranks, Stream s) = 0;
  virtual Event event_create() = 0;  // without timing: the cheapest to record and query
  virtual void event_record(Event e, Stream s) = 0;
  virtual bool event_done(Event e) = 0;  // throws on a device error
  // Work queued on s after this call starts only once e's recorded work is done
  // (cudaStreamWaitEvent): orders streams without the host waiting.
  virtual void stream_wait_event(Stream s, Event e) = 0;
  // Events that time the device's work between two records (cudaEventElapsedTime).
  virtual Event timing_event_create() = 0;
  virtual void event_destroy(Event e) = 0;
  // Milliseconds between two completed timing events' records.
  virtual float event_elapsed_ms(Event start, Event stop) = 0;
  // Makes the NIC's writes into the current device's memory visible to its later
  // work (cudaDeviceFlushGPUDirectRDMAWrites). False when the device cannot.
  virtual bool flush_rdma_writes() = 0;
};

// The CUDA runtime behind the Api; nullptr (and why) when the library was built
// without CUDA or the runtime cannot reach a driver. Immortal.
Api* runtime_api(std::string* why);

// The device a process drives among `count`: its local rank modulo count when a
// launcher set one (DCCL_LOCAL_RANK, LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID, SLURM_LOCALID, in that order), else `current`. `how` says which.
int choose_device(int count, int current, std::string* how);

// A CUDA backend over `api`, driving device `dev` (`how`: why that device, for messages).
std::unique_ptr<Backend> make_backend(Api& api, int dev, const std::string& how);

// Tests: make cuda_backend() return `be` (nullptr: the real one again). Returns the previous override.
Backend* override_backend(Backend* be);

}  // namespace dccl::mem::cuda
