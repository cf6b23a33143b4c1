// The out-of-band handshake that turns NCCL's listen handle into a connection:
// the listening side's address travels inside the handle (NCCL exchanges it over
// its own bootstrap), the connecting side dials it, and both swap their transport
// blobs (net/blob.hpp: host, endpoint names, socket-path listeners), each blob
// sealed with an HMAC over the handle's secret, so that only a holder of the
// handle can join. The data then flows over the transport, never this socket.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace dccl::plugin {

using Clock = std::chrono::steady_clock;
using Secret = std::array<uint8_t, 16>;

// What NCCL carries from listen() to connect(): at most kNcclHandleBytes bytes.
struct Handle {
  char magic[8];  // "dcclnet1"
  int32_t dev;
  uint16_t port;
  char ip[46];  // numeric IPv4 or IPv6, NUL-terminated
  uint8_t secret[16];
  // The connecting side's progress between NCCL's calls of connect() (NCCL keeps
  // the handle's bytes until connect returns a comm, as its own plugins use them).
  uint64_t pending;
};

class Listener {
 public:
  // Listens on the host's bootstrap address (DCCL_SOCKET_IFNAME, else the default
  // route's interface, else loopback) on a port the kernel picks. Throws core::Error.
  Listener(int dev, const Secret& secret);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  const Handle& handle() const { return handle_; }
  // A connection that arrived, or -1 (never blocks). Throws core::Error on failure.
  int try_accept();

 private:
  int fd_ = -1;
  Handle handle_{};
};

// Parses and checks a handle NCCL passed in; throws core::Error(dcclInvalidArgument).
Handle parse_handle(const void* bytes);

// Dials the handle's address by `until`; the connected descriptor. Throws core::Error.
int dial(const Handle& h, Clock::time_point until);

// Sends `mine` and returns the peer's blob, both sealed with the secret (the dialer
// speaks first: `dialer` tells which end this is). Throws core::Error naming the
// peer's address on a bad seal, a closed connection or the deadline.
std::string swap_blobs(int fd, const std::string& mine, const Secret& secret, bool dialer, Clock::time_point until);

}  // namespace dccl::plugin
