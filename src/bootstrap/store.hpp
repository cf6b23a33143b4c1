// Rendezvous store hosted by rank 0: a TCP key/value server with blocking get.
// Every connection must first prove it knows the job secret, answering the
// store's challenge (bootstrap/wire.hpp); others are refused. The
// HELLO also claims (namespace, rank, world size): a rank claimed by a live
// connection, or a world size other than the namespace's, is refused with both
// claims named (and, while the namespace is still forming, fails it for every rank).
// StoreServer::start adopts the secret file that rank 0 published for the same
// (secret, port) (bootstrap/secret_file.hpp) and removes it when the store stops.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "bootstrap/unique_id.hpp"

namespace dccl::boot {

// Bounds that protect the store from a misbehaving or hostile peer.
// Connections that have not proved the secret yet cost the job nothing: they
// are bounded by max_pending (the oldest is dropped for a new one) and by
// hello_timeout, and never count against max_connections.
struct StoreLimits {
  size_t max_total_bytes = size_t{256} << 20;  // keys + values held; a SET beyond it gets ERROR
  size_t max_connections = 4096;  // authenticated connections; a HELLO beyond it gets REFUSED (busy: retried)
  size_t max_pending = 128;       // connections waiting to present HELLO; beyond it the oldest is closed
  size_t max_parked_per_conn = size_t{1} << 20;  // GETs waiting on one connection
  std::chrono::milliseconds hello_timeout{2000};  // unauthenticated connections are closed after it
  std::chrono::milliseconds drain_timeout{2000};  // destructor: longest wait for in-flight replies
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
  // How the rank whose process hosts the store is named ("rank R"; Bootstrap
  // calls it for the server it owns, a split communicator again with the name its
  // parent gives that rank): WELCOME then tells clients "rank R (pid P on H)", so
  // that a rank that loses the store can name who went.
  virtual void set_host_label(const std::string& label) = 0;
};

// Keeps a server that dcclGetUniqueId started alive until the communicator that
// uses the same id takes it (rank 0), or the process exits.
void park_server(std::unique_ptr<StoreServer> s);
std::unique_ptr<StoreServer> take_parked_server(const UniqueIdData& id);

}  // namespace dccl::boot
