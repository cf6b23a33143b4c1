// The data paths: how the transport reaches an operation's buffers.
// Host memory needs no path (the transport reads it directly). Device memory goes
// either direct (the transport reaches device memory through its dma-buf
// registration) or staged (through registered host staging slots, pipelined).
#pragma once
#include <cstddef>
#include <cstdint>

#include "net/transport.hpp"

namespace dccl::mem {

// One point-to-point transfer; must not move while in flight.
struct Xfer {
  net::Request req;
  void* path_state = nullptr;  // owned by the data path (staged transfers)
  bool active = false;         // posted and not yet observed complete
  net::Transport* net = nullptr;
  Xfer() = default;
  Xfer(const Xfer&) = delete;
  Xfer& operator=(const Xfer&) = delete;
  // Safety net for error paths: a transfer still in flight when its owner unwinds
  // is cancelled, so the transport never writes to a destroyed Request.
  ~Xfer() {
    if (active && net && !req.done.load(std::memory_order_acquire)) net->cancel_all();
  }
};

class DataPath {
 public:
  virtual ~DataPath() = default;
  virtual void post_send(int peer, const void* p, size_t bytes, uint64_t tag, Xfer& x) = 0;
  virtual void post_recv(int peer, void* p, size_t bytes, uint64_t tag, Xfer& x) = 0;
  // Advances x; true when complete. Throws core::Error when it failed.
  virtual bool progress(Xfer& x) = 0;
};

}  // namespace dccl::mem
