// Rendezvous store hosted by rank 0: a TCP key/value server with blocking get.
// Every connection must first present the job secret; others are refused.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "bootstrap/unique_id.hpp"

namespace dccl::boot {

class StoreServer {
 public:
  // Listens on host:port (port 0 = any; host "" = the address chosen by
  // DCCL_SOCKET_IFNAME or the default-route interface). Serves in a background thread.
  static std::unique_ptr<StoreServer> start(const std::string& host, uint16_t port,
                                            const std::array<uint8_t, 16>& secret);
  virtual ~StoreServer() = default;  // stops the thread, closes every socket
  virtual UniqueIdData id() const = 0;  // address actually bound, port, secret
};

// Keeps a server that dcclGetUniqueId started alive until the communicator that
// uses the same id takes it (rank 0), or the process exits.
void park_server(std::unique_ptr<StoreServer> s);
std::unique_ptr<StoreServer> take_parked_server(const UniqueIdData& id);

}  // namespace dccl::boot
