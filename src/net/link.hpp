// A Link: one peer's data path, behind one interface. The transport routes each
// message to one of its peer's links (net/link_transport.hpp) and waits; the link
// moves the bytes. Three kinds:
//   net/fabric/fabric_link.hpp   one libfabric endpoint and the peer's address on it
//   net/fabric/striped_link.hpp  pieces of a message over several rails' endpoints
//   net/sock/sock_link.hpp       DirectCCL's socket path (one TCP connection per pair)
//   net/sock/flows_link.hpp      the socket path over several TCP connections per pair,
//                                large messages sprayed over them in chunks
// A new path (a link driven by an NCCL network plugin) is a
// new kind: it implements this class, lists the links it is made of in parts(),
// and the code that plans routes (net/transport_routes.cc) gives it to the peers it
// serves. Nothing in the transport branches on the kind.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "net/transport.hpp"

namespace dccl::net {

class Link {
 public:
  virtual ~Link() = default;

  // What carries the messages, for logs and error texts: "shm", "tcp;ofi_rxm on
  // eth0, striped over 2 rails", "DirectCCL sockets".
  virtual std::string describe() const = 0;

  // Posts a tagged send (send) or receive of `len` bytes at `buf` for `req`, which
  // the transport has reset and described (peer, tag, len, is_send, link). Never
  // blocks: what cannot go now is queued and posted by progress(). On completion the
  // link sets req->bytes (a receive: the length that arrived) and req->done, or
  // req->fail(cause) first. `mr`: the buffer's registration, or nullptr.
  // Throws core::Error when the message cannot be posted at all.
  virtual void post(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) = 0;

  // Drives what this link's requests wait on (a completion queue, a socket) once,
  // without blocking. Links that share what they drive return the same engine()
  // (one libfabric endpoint serves every peer it reaches; one socket path serves
  // every socket peer): the transport progresses, counts and cancels one link per
  // engine.
  virtual void progress() = 0;
  virtual const void* engine() const = 0;
  // Whether `r` (posted here) has finished, done or failed; progresses once first if not.
  bool test(Request& r) {
    if (!r.done.load(std::memory_order_acquire)) progress();
    return r.done.load(std::memory_order_acquire);
  }

  // Cancels everything in flight on the engine: each pending request is marked done
  // and failed ("cancelled") and never touched again.
  virtual void cancel() = 0;
  // Bytes moved by the engine: "tcp;ofi_rxm on eth0: sent N bytes, received M bytes",
  // one line per rail; none where there is nothing to say.
  virtual std::vector<std::string> counters() const = 0;
  // For a receive posted here that is taking too long: "; count mismatch: ..." when the
  // peer's message for it arrived with another length, "; call mismatch: ..." when it
  // came from a call that differs (net/transport.hpp call_mismatch_note), else "".
  virtual std::string mismatch_note(const Request& r) const = 0;
  // For a request (send or receive) posted here that is taking too long: where its
  // parts wait when the link spreads them ("; pieces still pending on tcp;ofi_rxm on
  // eth0, flow 3 of 8"), else "".
  virtual std::string pending_note(const Request& /*r*/) const { return ""; }
  // Sleeps up to `ns` nanoseconds, less as soon as the engine has something to do;
  // false when it cannot (the transport then sleeps the whole time).
  virtual bool nap(int64_t /*ns*/) { return false; }
  // The links that do the work: this one, or the parts a link is made of (a striped
  // link's rails). The transport progresses and counts the parts' engines.
  virtual void parts(std::vector<Link*>* out) { out->push_back(this); }
  // Releases what the link holds for its peer; the engine stays with its owner.
  virtual void close() {}
};

// Whether a registration is of device memory (a dma-buf): such a buffer never takes a
// link that reads it with the CPU (net/fabric/registration.cc).
bool device_memory(const MemRegion* mr);

}  // namespace dccl::net
