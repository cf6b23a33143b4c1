// libfabric transport: RDM endpoints, tagged messages, completion progress.
// Same-host peers over `shm`, others over `tcp;ofi_rxm`; DCCL_PROVIDER overrides.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dccl::net {

// One outstanding send or receive. The transport fills `done`/`failed`/`error`
// when its completion is read; it must stay alive (not move) until then.
struct Request {
  std::atomic<bool> done{false};
  bool failed = false;
  size_t bytes = 0;       // bytes completed (receives: actual length)
  std::string error;      // provider text when failed
  int peer = -1;
  uint64_t tag = 0;
  bool is_send = false;
  int pending_parts = 0;  // internal: messages split over max_msg_size
  void reset() {
    done.store(false, std::memory_order_relaxed);
    failed = false;
    bytes = 0;
    error.clear();
    pending_parts = 0;
  }
};

// A registered memory region handle (opaque); nullptr means "no descriptor".
struct MemRegion;

struct TransportOptions {
  int rank = 0;
  int nranks = 1;
  std::string provider;     // "" = automatic per peer; else e.g. "shm", "tcp", "tcp;ofi_rxm"
  int64_t spin_us = 50;     // busy-poll this long before yielding/blocking
  std::chrono::milliseconds timeout{600000};
  size_t max_part_bytes = 0;  // > 0: split messages above this size (tests); 0: provider limit
  std::string host;           // "" = gethostname(); tests set it to emulate several hosts
  // Ask the endpoints for FI_HMEM + FI_MR_HMEM where the provider offers them (and open
  // without where not): set when this process has a device backend whose memory the
  // NIC must reach. Host-only runs leave it off and open exactly what they always did.
  bool want_hmem = false;
};

class Transport {
 public:
  static std::unique_ptr<Transport> create(const TransportOptions& opts);
  virtual ~Transport() = default;

  // This rank's connection blob (hostname + endpoint names), exchanged by bootstrap allgather.
  virtual std::string local_blob() const = 0;
  // blobs[r] for every rank r (including self). Chooses the endpoint per peer and fills AVs.
  virtual void connect(const std::vector<std::string>& blobs) = 0;
  // Human readable: "shm" or "tcp;ofi_rxm" or "shm+tcp;ofi_rxm".
  virtual std::string provider_summary() const = 0;
  // "" when every endpoint in use (after connect(): those routing some peer) was opened
  // with FI_HMEM; otherwise which providers' endpoints lack it, and why.
  virtual std::string hmem_missing() const { return "this transport does not report FI_HMEM"; }

  // Post a tagged send/recv to/from `peer`. Posting never blocks: what the provider
  // cannot take yet (-FI_EAGAIN) is queued in call order and posted by progress()/wait().
  // A peer may be self. Messages above the part size are split; the receiver must then
  // post the same length as the sender (parts are matched one by one).
  virtual void isend(int peer, const void* buf, size_t len, uint64_t tag, Request* req,
                     MemRegion* mr = nullptr) = 0;
  virtual void irecv(int peer, void* buf, size_t len, uint64_t tag, Request* req,
                     MemRegion* mr = nullptr) = 0;
  // Reads completion queues once, marking finished requests. Thread safe.
  virtual void progress() = 0;
  // Progress until every request is done; throws core::Error(dcclRemoteError) with the
  // provider's text on a failed completion, core::Error(dcclTimeout) after the timeout.
  // `what` names the operation and step for the error message.
  virtual void wait(Request* const* reqs, size_t n, const std::string& what) = 0;
  void wait(Request& r, const std::string& what) {
    Request* p = &r;
    wait(&p, 1, what);
  }
  // Cancels everything in flight (abort). Every pending Request is marked done+failed
  // ("cancelled") and is never touched again, so it may be freed afterwards (buffers of
  // sends may still be read by the provider until the transport is destroyed).
  virtual void cancel_all() = 0;

  // Registers [buf, buf+len) with every endpoint in use (call after connect()); pass the
  // result as `mr` to isend/irecv. Host memory works without it. nullptr: not needed/offered.
  virtual MemRegion* register_memory(const void* /*buf*/, size_t /*len*/) { return nullptr; }
  virtual void deregister_memory(MemRegion* /*mr*/) {}
  // Device memory exported as a dma-buf (fd, offset, len; `base` is the device
  // address), for providers with FI_HMEM on libfabric >= 1.20. iface: fi_hmem_iface.
  virtual MemRegion* register_dmabuf(int /*fd*/, uint64_t /*offset*/, size_t /*len*/, void* /*base*/,
                                     int /*iface*/, int /*device*/) {
    return nullptr;
  }
  // After a peer failed, closing endpoints with cancelled operations can crash
  // inside the provider: when cancel_all() cancelled any, an abandoned transport
  // leaves its fabric resources open (a bounded leak) and later deregistrations do
  // nothing; otherwise it closes normally.
  virtual void abandon() {}
};

}  // namespace dccl::net
