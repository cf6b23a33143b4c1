// Rendezvous store hosted by rank 0: a TCP key/value server with blocking get.
// Every connection must first present the job secret; others are refused.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "bootstrap/unique_id.hpp"

namespace dccl::boot {

// Bounds that protect the store from a misbehaving or hostile peer.
struct StoreLimits {
  size_t max_total_bytes = size_t{256} << 20;  // keys + values held; a SET beyond it gets ERROR
  size_t max_connections = 4096;               // further connections get REFUSED and are closed
  size_t max_parked_per_conn = size_t{1} << 20;  // GETs waiting on one connection
  std::chrono::milliseconds hello_timeout{10000};  // unauthenticated connections are closed after it
  std::chrono::milliseconds drain_timeout{2000};   // destructor: longest wait for in-flight replies
};

class StoreServer {
 public:
  // Listens on host:port (port 0 = any; host "" = the address chosen by
  // DCCL_SOCKET_IFNAME or the default-route interface). Serves in a background thread.
  static std::unique_ptr<StoreServer> start(const std::string& host, uint16_t port,
                                            const std::array<uint8_t, 16>& secret);
  static std::unique_ptr<StoreServer> start(const std::string& host, uint16_t port,
                                            const std::array<uint8_t, 16>& secret,
                                            const StoreLimits& limits);
  virtual ~StoreServer() = default;  // stops the thread, closes every socket
  virtual UniqueIdData id() const = 0;  // address actually bound, port, secret
};

// Keeps a server that dcclGetUniqueId started alive until the communicator that
// uses the same id takes it (rank 0), or the process exits.
void park_server(std::unique_ptr<StoreServer> s);
std::unique_ptr<StoreServer> take_parked_server(const UniqueIdData& id);

}  // namespace dccl::boot
