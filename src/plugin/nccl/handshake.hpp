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
#include <memory>
#include <string>
#include <vector>

#include "plugin/nccl/link_adapter.hpp"

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
  // route's interface, else loopback) on a port the kernel picks. `op` names the
  // call and device in errors ("listen on dccl-sock-eth0"). Throws core::Error.
  Listener(int dev, const Secret& secret, const std::string& op);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  const Handle& handle() const { return handle_; }
  // A connection that arrived, or -1 (never blocks); *from: the dialer's address.
  // Throws core::Error on failure.
  int try_accept(std::string* from);

 private:
  int fd_ = -1;
  std::string op_;
  Handle handle_{};
};

// Parses and checks a handle NCCL passed in; throws core::Error(dcclInvalidArgument).
Handle parse_handle(const void* bytes);

// Dials the handle's address by `until`; the connected descriptor. `op` names the
// call and device. Throws core::Error.
int dial(const Handle& h, Clock::time_point until, const std::string& op);

// One sealed blob each way (the dialer speaks first). `from_dialer` tells whose
// blob it is; `op` names the call, device and peer in errors. Both throw
// core::Error on a closed connection, the deadline, and (recv_blob) a blob that
// is too long or not sealed with the secret (the dialer does not hold the handle).
void send_blob(int fd, const std::string& blob, const Secret& secret, bool from_dialer, Clock::time_point until,
               const std::string& op);
std::string recv_blob(int fd, const Secret& secret, bool from_dialer, Clock::time_point until, const std::string& op);

// -----------------------------------------------------------------------------
// Making a connection on threads of their own (the handshake and the transport's
// connect block; NCCL's connect and accept must not).
//
// The connecting side dials the handle's address, sends its sealed blob, reads
// the listener's and connects the transport. The listening side runs one
// handshake per arriving connection, several at once: a dialer that closes, sends
// bytes that are not this plugin's handshake, or does not hold the handle's
// secret (a port scanner, a stray process) is dropped, logged once, and the
// listener goes on waiting for the handle's holder; only a failure after the
// holder authenticated fails accept.

// How the plugin logs (NCCL's log when it gave one): level is kNcclLogWarn or kNcclLogInfo.
using SayFn = void (*)(int level, const std::string& msg);

struct Setup;  // one connection in the making

// connect's side: start_dial starts dialing; finish_dial returns the link once
// made, nullptr while the setup runs (s kept), and throws core::Error when it
// failed (s is freed once it ended, either way).
Setup* start_dial(const Device& dev, const Handle& h);
std::unique_ptr<Link> finish_dial(Setup*& s);

class Acceptor {
 public:
  // Listens for device `dev` (a Listener). Throws core::Error.
  Acceptor(const Device& dev, int index, const Secret& secret, SayFn say);
  // Stops the handshakes in progress (a transport connect already under way
  // ends by its deadline).
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;
  const Handle& handle() const { return listener_.handle(); }
  // A connection from the handle's holder, or nullptr while none is made (never
  // blocks). Throws core::Error when the holder's connection failed, or when no
  // holder connected within DCCL_TIMEOUT_S of the first call (since the
  // previous connection, for a later one).
  std::unique_ptr<Link> poll();

 private:
  const Device& dev_;
  Secret secret_;
  SayFn say_;
  Listener listener_;
  std::vector<std::unique_ptr<Setup>> pending_;
  bool started_ = false;
  std::chrono::steady_clock::time_point deadline_{};
  uint64_t dropped_ = 0;
};

}  // namespace dccl::plugin
