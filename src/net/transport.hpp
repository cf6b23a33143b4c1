// The transport: tagged messages to every rank of a communicator, each peer served
// by its links (net/link.hpp): same-host peers over libfabric's `shm`, others over
// `tcp;ofi_rxm` rails (only when the network is trusted: DirectCCL's authenticated
// socket path otherwise); DCCL_PROVIDER overrides.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config_table.hpp"

namespace dccl::net {

// The top six bits of every wire tag hold a hash of the message's length (of each
// part as the provider sees it; both ends cut alike): a send and a receive of
// different lengths never match, so ranks that disagree on a count cannot truncate or corrupt each other's
// buffers or wedge a provider mid-transfer; the receive waits, and its timeout
// says what it found (Endpoint::peek; a striped receive fails at once when the
// sender's note names another length). Callers' tags leave these bits clear.
inline constexpr uint64_t kLengthMarkBits = 0x3fULL << 58;
inline uint64_t length_mark(size_t len) {
  return ((static_cast<uint64_t>(len) * 0x9E3779B97F4A7C15ULL) >> 58) << 58;
}

// Collective tags (bits [57:56] = 01) carry a hash of their call in [55:40]
// (coll::make_coll_tag): ranks whose calls differ never pair. A receive that timed
// out peeks ignoring these bits too, and says that the calls differ.
inline constexpr uint64_t kCallMarkBits = 0xffffULL << 40;
inline bool has_call_mark(uint64_t tag) { return ((tag >> 56) & 3) == 1; }

// Send/recv tags (bits [57:56] = 10) carry a hash of the whole message's length in
// [31:24] (size_mark; coll::make_p2p_tag). The first part of such a receive is posted
// ignoring this mark and the length mark, and what arrives for it says at once
// whether the sender's message had another length: the receive fails then with
// "count mismatch", not at its timeout (a send/recv pair has no call check).
inline constexpr uint64_t kSizeMarkBits = 0xffULL << 24;
inline bool has_size_mark(uint64_t tag) { return ((tag >> 56) & 3) == 2; }
inline uint64_t size_mark(size_t len) {
  return ((static_cast<uint64_t>(len) * 0xC2B2AE3D27D4EB4FULL) >> 56) << 24;
}

class Link;

// One outstanding send or receive. The transport fills `done`/`failed`/`error`
// when its completion is read; it must stay alive (not move) until then.
// A request may be carried by several messages (parts above the part size, pieces
// striped over rails) completing on different endpoints, hence the atomics.
struct Request {
  std::atomic<bool> done{false};
  bool failed = false;
  std::atomic<size_t> bytes{0};  // bytes completed (receives: actual length)
  std::string error;      // provider text when failed
  bool misuse = false;    // failed because the ranks' calls disagree (count mismatch)
  int peer = -1;
  uint64_t tag = 0;
  size_t len = 0;  // as posted
  bool is_send = false;
  Link* link = nullptr;  // internal: the link it was posted to (net/link.hpp)
  // Set by the caller before posting a receive (reset() keeps it): the receive takes a
  // message of at most len bytes, `bytes` telling how many came (NCCL's receive
  // semantics). One message part: len must not exceed the part size, and the
  // receive is never striped.
  bool up_to = false;
  std::atomic<int> pending_parts{0};  // internal: messages still in flight
  std::atomic<bool> fail_claimed{false};  // internal: the first failure writes `error`
  void reset() {
    done.store(false, std::memory_order_relaxed);
    failed = false;
    misuse = false;
    bytes.store(0, std::memory_order_relaxed);
    error.clear();
    link = nullptr;
    pending_parts.store(0, std::memory_order_relaxed);
    fail_claimed.store(false, std::memory_order_relaxed);
  }
  // Internal: records a failure (the first one's text wins); visible once done.
  void fail(const std::string& text, bool calls_differ = false) {
    if (fail_claimed.exchange(true, std::memory_order_acq_rel)) return;
    error = text;
    misuse = calls_differ;
    failed = true;
  }
  // Internal: reset() and described for a new message of n bytes to or from peer p,
  // which `parts` messages will complete.
  void arm(int p, uint64_t t, size_t n, bool send, int parts = 0) {
    reset();
    peer = p;
    tag = t;
    len = n;
    is_send = send;
    pending_parts.store(parts, std::memory_order_release);
  }
  // Internal: unless it finished already, the request ends now, failed with `text`
  // (cancelled: what is still in flight for it is never counted).
  void abandon(const std::string& text) {
    if (done.load(std::memory_order_acquire)) return;
    fail(text);
    pending_parts.store(0, std::memory_order_relaxed);
    done.store(true, std::memory_order_release);
  }
  // Internal: `n` messages of this request finished (or will never be posted); the
  // last one marks the request done.
  void parts_done(int n = 1) {
    if (pending_parts.fetch_sub(n, std::memory_order_acq_rel) <= n) done.store(true, std::memory_order_release);
  }
};

// "; call mismatch: rank P sent a message for this step of a call that differs …"
// for a receive `r` that timed out while the peer's message (`got` bytes) for the
// same step waited under another call mark.
std::string call_mismatch_note(const Request& r, size_t got);

// A registered memory region handle (opaque); nullptr means "no descriptor".
struct MemRegion;

struct TransportOptions {
  int rank = 0;
  int nranks = 1;
  std::string provider;     // "" = automatic per peer; else e.g. "shm", "tcp", "tcp;ofi_rxm"
  int64_t spin_us = DCCL_DEFAULT_SPIN_US;     // busy-poll this long before yielding/blocking
  std::chrono::milliseconds timeout{DCCL_DEFAULT_TIMEOUT_S * 1000};
  size_t max_part_bytes = 0;  // > 0: split messages above this size (tests); 0: provider limit
  std::string host;           // "" = gethostname(); tests set it to emulate several hosts
  // Rails (net/rails.hpp). local_rank: this process's place on its host, the same
  // for every communicator of the process (it picks the rank's rail); local_size:
  // ranks on its host (1 allows striping; 0: unknown, never striped).
  int local_rank = 0;
  int local_size = 0;
  std::string ifnames;        // DCCL_NET_IFNAME: "" = every non-loopback interface the provider offers
  uint64_t stripe_bytes = 0;  // DCCL_NET_STRIPE_BYTES: stripe parts of at least this size (0: never)
  // Ask the endpoints for FI_HMEM + FI_MR_HMEM where the provider offers them (and open
  // without where not): set when this process has a device backend whose memory the
  // NIC must reach. Host-only runs leave it off and open exactly what they always did.
  bool want_hmem = false;
  // DCCL_NET_SOCK_BYTES: host-memory messages up to this size to peers routed over
  // tcp;ofi_rxm take DirectCCL's socket path (net/sock/sock_path.hpp); 0: never.
  uint64_t sock_bytes = 0;
  // DCCL_NET_FLOWS: TCP connections per pair on the socket path (0: automatic,
  // net/sock/spray.hpp).
  int flows = 0;
  size_t flow_window = 0;  // DCCL_NET_FLOW_WINDOW_BYTES (0: net/sock/spray.hpp's)
  // DCCL_NET_TCP_CONGESTION: the socket path's congestion control (SockPath::set_congestion).
  std::string tcp_congestion = "auto";
  // DCCL_NET_LANE_BALANCE: striped libfabric links fill each message into the lanes
  // with the fewest bytes outstanding (net/fabric/lane_fill.hpp); false: equal pieces.
  bool lane_balance = true;
  // DCCL_NET_LANE_WINDOW_BYTES: a balanced striped link holds a send while every lane
  // has at least this many bytes outstanding (net/fabric/striped_link.hpp); 0: never.
  size_t lane_window = 0;
  // Striped libfabric links cut by these weights, one per lane, instead (tests).
  std::vector<uint16_t> lane_weights;
  // The job secret: both ends of a socket-path connection prove they know it.
  std::array<uint8_t, 16> secret{};
  // DCCL_TRUST_NETWORK: false (the default) keeps every untrusted provider
  // (net/fabric/provider.hpp's table: tcp;ofi_rxm, udp, sockets) from carrying data: host
  // memory to peers reached over tcp takes the socket path at every size, without
  // opening tcp;ofi_rxm; another untrusted DCCL_PROVIDER is refused. true: every
  // provider is used as it is.
  bool trust_network = false;
};

class Transport {
 public:
  static std::unique_ptr<Transport> create(const TransportOptions& opts);
  virtual ~Transport() = default;

  // This rank's connection blob (hostname + endpoint names), exchanged by bootstrap allgather.
  virtual std::string local_blob() const = 0;
  // blobs[r] for every rank r (including self). Chooses the endpoint per peer and fills AVs.
  // `until`: the connections are made by then (the caller's deadline; default: the
  // options' timeout from now), or connect() throws naming who did not come.
  virtual void connect(const std::vector<std::string>& blobs,
                       std::chrono::steady_clock::time_point until = {}) = 0;
  // Human readable: "shm" or "tcp;ofi_rxm" or "shm+tcp;ofi_rxm".
  virtual std::string provider_summary() const = 0;
  // After connect(): every rank's rails and how each pair of ranks is connected, as
  // this rank plans it (net/rails.hpp topology_lines); one line each.
  virtual std::vector<std::string> topology() const { return {}; }
  // Bytes completed per rail endpoint in use: "tcp;ofi_rxm on eth0: sent N, received M".
  virtual std::vector<std::string> rail_counters() const { return {}; }
  // "" when every endpoint in use (after connect(): those routing some peer) was opened
  // with FI_HMEM; otherwise which providers' endpoints lack it, and why.
  virtual std::string hmem_missing() const { return "this transport does not report FI_HMEM"; }
  // After connect(): "" when every peer is reached over a trusted provider (or the
  // network is trusted); else which ranks are not, and why. Device memory to them
  // cannot take the direct path (the viability layer "trusted network").
  virtual std::string untrusted_routes() const { return ""; }

  // Post a tagged send/recv to/from `peer`. Posting never blocks: what the provider
  // cannot take yet (-FI_EAGAIN) is queued in call order and posted by progress()/wait().
  // A peer may be self. Messages above the part size are split, and parts of at least
  // the pair's stripe size are striped over its rails (net/rails.hpp WireCut); the
  // receiver must then post the same length as the sender (parts are matched one by one).
  virtual void isend(int peer, const void* buf, size_t len, uint64_t tag, Request* req,
                     MemRegion* mr = nullptr) = 0;
  virtual void irecv(int peer, void* buf, size_t len, uint64_t tag, Request* req,
                     MemRegion* mr = nullptr) = 0;
  // Reads completion queues once, marking finished requests. Thread safe.
  virtual void progress() = 0;
  // Sleeps up to `ns` nanoseconds while waiting for requests (core::Backoff's naps):
  // returns early when the socket path has something to read or room to write.
  virtual void nap(int64_t ns) {
    timespec ts{0, static_cast<long>(ns)};
    nanosleep(&ts, nullptr);
  }
  // Whether nap() ends as soon as any pending request can progress (so that a
  // long nap costs no latency): true when the socket path carries every route.
  virtual bool nap_wakes() const { return false; }
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
  // A peer failed (called from the failure watcher's thread, beside a thread that
  // may be stuck in the provider): frees what exited same-host peers left locked.
  virtual void peers_failed() {}
  // For a posted receive that is taking too long: "; count mismatch: ..." when the
  // peer's message for it arrived with another length, else "".
  virtual std::string mismatch_note(const Request& /*r*/) const { return ""; }
};

}  // namespace dccl::net
