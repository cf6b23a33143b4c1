// DirectCCL's own socket path for peers routed over TCP.
//
// tcp;ofi_rxm costs 5-6 system calls per small message on the kernel's TCP stack
// (sendto, a wake-up pipe written and read, poll, recvfrom) and ~7.5 us one way on
// loopback; a tagged message needs one sendmsg at the sender and one recv at the
// receiver. This path keeps one TCP connection per peer pair, made at connect() and
// authenticated by a challenge-response over the job secret (net/sock/sock_intro.hpp),
// and carries every tagged message up to the pair's size limit as
// a 16-byte header (tag, length) and the payload:
//  - send: written inline from the caller's buffer when the connection is idle
//    (MSG_DONTWAIT); what the kernel does not take now is queued, in call order, and
//    written by progress(). The request completes once the kernel holds every byte.
//  - receive: progress() reads what arrived; a header is matched against the posted
//    receives from that peer in post order, on tag and length (as the length mark
//    does on the fabric: different lengths never match); the payload goes straight
//    into the receive's buffer (large ones are read there without a copy), or into
//    an unexpected-message buffer that a later receive takes.
// A connection that closes or fails fails everything pending on it, naming the peer;
// the messages that arrived whole before its end are still delivered to the
// receives posted for them later.
// Closing (the destructor) is graceful: what is queued is written, the end of the
// stream follows it (shutdown), and each connection is closed once the peer's kernel
// acknowledged every byte or the peer closed its side (net/sock/sock_close.cc).
// Only host memory takes this path (the caller keeps dma-buf registrations on the
// fabric). Thread safe: one lock, as the fabric endpoints have.
//
// What an outsider can make it hold (docs/reliability.md, "Threat model (data
// plane)"): its sockets listen only during connect(), and only until every expected
// peer connected; a connection from an address that is none of those peers' is
// closed at once, one that has not introduced itself within kHelloWithin is closed,
// and at most kMaxUnidentified such connections are held at a time (the oldest goes).
// From each peer at most kMaxUnexpectedBytes of messages no receive asked for are
// buffered while no receive is posted: past that the connection is not read (TCP's
// flow control holds the sender) until a receive is posted for that peer.
// A pair may also be a rank with itself (connect()'s loop_self): messages are then
// matched in memory, in the same order.
//
// Several flows per pair (connect()'s `flows`, DCCL_NET_FLOWS; net/sock/spray.hpp):
// the pair then has that many TCP connections, each from its own source port, so
// that equal-cost multipath routing and per-flow rate caps treat them apart. Flow 0
// (the lead) carries every message as above, in call order; a message of at least
// kSprayMinBytes instead goes as an announcement on the lead (tag, length: matched
// there exactly as a message is) and its payload as chunks, each with a header
// naming the message (its number among the pair's sprayed messages) and its offset,
// over whichever flows have the fewest bytes queued when the chunk's turn comes
// (sock_spray.cc). The receiver places each chunk at its offset, in any order; the
// message completes when every byte arrived. A flow that fails fails the pair.
//
// Congestion control (set_congestion, DCCL_NET_TCP_CONGESTION): a pair on one host
// ("auto", the default) uses cubic (else reno), whatever the system's default. A
// pacing congestion control (bbr) without the fq qdisc sends part of a flow from the
// pacing timer, on whichever CPU it fires; on the kernel's software devices
// (loopback, veth) each CPU delivers what it sent from its own queue, so segments of
// one connection arrive out of order, and TCP retransmits what it takes for lost.
// 2 ranks on one host, allreduce over this path with bbr: 470 retransmitted segments
// in 610 calls of 4 MiB, and 1.6-2x the time per call of cubic or reno at 1-16 MiB
// (bench/results/2026-12-05-congestion). Pairs across hosts keep the system's choice
// (a NIC keeps a connection's segments in order); a name sets every connection's.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "net/sock/spray.hpp"

namespace dccl::net {

// A wire header's two words: a message's tag and length, or a chunk's offset and
// its word (net/sock/spray.hpp).
void put_header(char* h, uint64_t a, uint64_t b);
// Bytes the kernel holds for a connection that its peer has not yet acknowledged
// (SIOCOUTQ); 0 when unknown or none.
size_t unacked_bytes(int fd);

struct Request;

class SockPath {
 public:
  static constexpr std::chrono::milliseconds kHelloWithin{2000};
  static constexpr size_t kMaxUnidentified = 32;
  static constexpr size_t kMaxUnexpectedBytes = size_t{64} << 20;

  // Listens on each of `ips` (IPv4 or IPv6 literals: the TCP rails' addresses, in
  // rail order) on a port the kernel picks. Messages up to max_bytes (per pair: the
  // smaller of both ends' limits) take this path. Throws core::Error(dcclSystemError).
  // `rails`: the interface names of those addresses ("" when not a rail), for the
  // per-rail byte counts. `secret`: the job secret that both ends of a connection
  // prove they know. `congestion`: as set_congestion() takes it (a refused name
  // throws core::Error(dcclInvalidArgument) first).
  SockPath(int rank, uint64_t max_bytes, std::chrono::milliseconds timeout, const std::vector<std::string>& ips,
           std::vector<std::string> rails = {}, const std::array<uint8_t, 16>& secret = {},
           const std::string& congestion = "auto");
  ~SockPath();
  SockPath(const SockPath&) = delete;
  SockPath& operator=(const SockPath&) = delete;

  // What the connection blob carries: "sock2 LIMIT NONCE FLOWS ip:port ...".
  std::string address() const;
  // Collective over the ranks that take part: peers[r] = (rail index, r's address)
  // for each rank r reached over sockets, rail -1 (or an empty address) for the others;
  // loop_self: this rank's messages to itself take the path too (matched in memory).
  // Throws core::Error(dcclTimeout / dcclSystemError / dcclInvalidArgument) naming the
  // peers it could not connect.
  // `until`: the connections are made by then (default: the timeout from now, and
  // never later than that).
  // `local`: per rank, whether it shares this rank's host (both ends must agree);
  // with the flows both addresses ask for, it gives each pair's number of flows
  // (net/sock/spray.hpp pair_flows).
  void connect(const std::vector<std::pair<int, std::string>>& peers, bool loop_self = false,
               std::chrono::steady_clock::time_point until = {}, const std::vector<bool>& local = {});
  // Flows (TCP connections) this rank asks for per pair: 0 automatic (DCCL_NET_FLOWS).
  void set_flows(int flows) { flows_ = flows; }
  // Bytes a flow may hold queued before the spray passes it over (DCCL_NET_FLOW_WINDOW_BYTES).
  void set_flow_window(size_t bytes) { window_ = bytes ? bytes : spray::kWindowBytes; }
  // The congestion control of the connections: "auto" (cubic, else reno, for a pair
  // on one host; the system's for the others), "system" or "" (the system's for
  // all), or a name for all. Before connect(). Throws core::Error(dcclInvalidArgument)
  // naming the kernel's refusal when a name cannot be set.
  void set_congestion(const std::string& policy);
  // The congestion control of the (lead) connection with `peer`; "" when none.
  std::string congestion(int peer) const;
  // Flows of the pair with `peer`: 0 when it is not reached over this path.
  int flows(int peer) const;
  // Payload bytes each flow to `peer` has sent, lead first.
  std::vector<uint64_t> flow_bytes_sent(int peer);
  // Largest message to `peer` this path carries; 0 when the peer is not reached over it.
  uint64_t limit(int peer) const;
  bool any() const { return !conns_.empty() || self_; }

  // As Transport::isend/irecv for a request already reset and described by the
  // caller; never blocks.
  void post(bool send, int peer, void* buf, size_t len, uint64_t tag, Request* req);
  // Writes what is queued and reads what arrived. block=false skips the pass when
  // another thread is in one. Returns messages completed.
  int progress(bool block = false);
  // Sleeps up to ns nanoseconds, less when a connection turns readable (or writable,
  // where sends are queued).
  void nap(int64_t ns);
  // Fails everything pending ("cancelled"), messages that arrived included; later
  // posts fail at once.
  void cancel_all();
  // For a receive that is taking too long: "; count mismatch: ..." when the peer's
  // message with its tag arrived with another length, else "".
  std::string mismatch_note(const Request& r);
  // "socket path on eth0: sent N bytes, received M bytes" per rail that has a name,
  // else one "socket path: ..." line.
  std::vector<std::string> counters();

 private:
  struct Tx {
    Request* req;  // nullptr: a sprayed message's announcement (its chunks complete it), an end frame
    char hdr[16];
    const char* buf;
    size_t len;
    size_t off;  // over header + payload
    size_t report = 0;  // the length the request completes with
  };
  // A sprayed message being sent: the chunks not yet handed to a flow.
  struct TxSpray {
    Request* req;
    const char* buf;
    size_t len, next, chunk;
    uint32_t seq;
  };
  struct Unexpected;
  struct Buf;
  // A sprayed message being received: where its chunks go, and how much arrived.
  struct RxSpray;
  struct Posted {
    Request* req;
    char* buf;
    size_t len;
    uint64_t tag;
  };
  // Payload storage of unexpected messages, uninitialised, reused through spare_.
  struct Buf {
    std::unique_ptr<char[]> p;
    size_t cap = 0;
  };
  struct Unexpected {
    uint64_t tag;
    size_t len = 0;
    Buf data;
    bool complete = false;  // a receive matching it while it arrives takes over its payload
  };
  struct Conn {
    int fd = -1;
    int peer = -1;
    int rail = 0;  // index into rails_: the interface the connection runs over
    uint64_t limit = 0;
    std::string dead;  // why the connection is unusable ("" while it works)
    std::deque<Tx> txq;
    std::deque<Posted> posted;
    std::list<Unexpected> unexpected;
    // The message being read: header bytes, then payload into dst (a receive's buffer
    // or an unexpected entry's).
    char hdr[16];
    size_t hdr_got = 0;
    bool in_payload = false;
    size_t len = 0, got = 0;
    char* dst = nullptr;
    Request* req = nullptr;
    Unexpected* filling = nullptr;  // the early message being read in, if any
    std::vector<char> stage;  // what one recv() reads when no large payload is due
    uint64_t tag = 0;         // of the message being read
    size_t ux_bytes = 0;      // payload bytes of `unexpected`
    // The message whose header was read is held, unread, until a receive is posted
    // (kMaxUnexpectedBytes); `leftover`: bytes after its header that were read already.
    bool held = false;
    std::vector<char> leftover;
    bool shut = false;  // closing: the end of stream was sent
    // The peer's close ended this flow with an end frame: nothing more comes on it,
    // but the pair's other flows may still hold what the peer sent before (chunks, an
    // announcement). The pair fails once every flow ended (flows_ended).
    bool ended = false;
    // Several flows (net/sock/spray.hpp). Every flow: its pair's lead (itself for the
    // lead), its index, its queued payload bytes; the chunk being read; the number of
    // a message whose announcement it waits for (held until the lead reads it).
    Conn* lead = this;
    int flow = 0;
    size_t tx_bytes = 0;
    uint64_t sent = 0;  // payload bytes written
    RxSpray* chunk_of = nullptr;
    bool spray = false;  // the message whose header was read is an announcement
    int64_t wait_seq = -1;
    // The lead only: the flows (itself first), the sprayed messages' numbers, the
    // messages being sent in chunks and those being received.
    std::vector<Conn*> flows;
    uint32_t tx_seq = 0, rx_seq = 0;
    std::deque<TxSpray> spray_q;
    std::list<RxSpray> rx_sprays;
  };
  struct RxSpray {
    uint32_t seq = 0;
    size_t len = 0, got = 0;
    char* dst = nullptr;
    Request* req = nullptr;
    Unexpected* ux = nullptr;  // arriving as an unexpected message
    char* user = nullptr;      // a receive took it over while it arrived: copied there at the end
    std::unique_ptr<char[]> own;  // that unexpected message's buffer, kept until then
  };

  Conn* conn_of(int peer) const;
  void apply_congestion(int fd, bool near);  // sock_congestion.cc
  // false: the connection failed. complete: each message written completes its
  // request (the destructor's flush passes false: nobody waits on them any more).
  bool write_locked(Conn& c, bool complete = true);
  bool read_locked(Conn& c, int* done);  // false: the connection failed
  void consume_locked(Conn& c, const char* p, size_t n, int* done);
  static bool large_posted(const Conn& c);  // a receive whose payload is read in place is waiting
  void begin_message_locked(Conn& c);
  void buffer_unexpected_locked(Conn& c);  // the message being read goes to an unexpected entry
  void release_held_locked(Conn& c, Request* req, char* dst, uint64_t tag, size_t len);  // a receive was posted
  void watch_locked(Conn& c, bool readable);  // epoll interest: reads on or off
  void send_self_locked(Conn& c, const char* buf, size_t len, uint64_t tag, Request* req);
  void finish_message_locked(Conn& c, int* done);
  static bool flows_ended(const Conn& lead);  // every flow of the pair ended or failed
  void end_flow_locked(Conn& c);              // an end frame was read
  // A flow's failure fails its pair (every flow). keep_arrived: messages that
  // arrived whole stay for the receives posted later.
  void fail_conn_locked(Conn& c, const std::string& why, bool keep_arrived = true);
  void close_gracefully();  // the destructor's: net/sock/sock_close.cc
  Buf take_buf_locked(size_t len);
  // Several flows (sock_spray.cc).
  void post_spray_locked(Conn& c, const char* buf, size_t len, uint64_t tag, Request* req);
  void schedule_locked(Conn& lead);  // hands queued chunks to the flows with room
  void start_spray_locked(Conn& lead);  // an announcement was matched: its chunks may come
  void begin_chunk_locked(Conn& c, uint64_t off, uint64_t word);
  void finish_chunk_locked(Conn& c, int* done);
  bool take_arriving_locked(Conn& c, Unexpected& u, Request* req, char* dst);
  void fail_flow_locked(Conn& c, const std::string& why, bool keep_arrived = true);
  std::string flow_note(const Conn& c) const;
  void drop_unexpected_locked(Conn& c, std::list<Unexpected>::iterator it);  // its buffer may go to spare_

  int rank_;
  int flows_ = 0;  // asked for per pair (0: automatic)
  size_t window_ = spray::kWindowBytes;
  std::string near_cc_, far_cc_;  // congestion controls of pairs on one host, across hosts ("": the system's)
  uint64_t max_bytes_;
  std::chrono::milliseconds timeout_;
  std::array<uint8_t, 16> secret_{};
  uint64_t nonce_ = 0;  // names this listener in the blob; bound into every introduction
  std::vector<std::pair<int, std::string>> listeners_;  // fd, "ip:port"
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> by_peer_;
  std::unique_ptr<Conn> self_;  // loop_self: this rank's own pair (no socket)
  int epfd_ = -1;  // readiness of every connection when there are several
  std::mutex mu_;
  uint64_t sent_ = 0, recvd_ = 0;
  std::vector<std::string> rails_;
  std::vector<uint64_t> rail_sent_, rail_recvd_;  // per rail, under mu_
  std::vector<Buf> spare_;  // freed unexpected-message buffers (at most 8 of <= 4 MiB, pages already touched)
};

// "ip" of a tcp;ofi_rxm endpoint's name (fi_getname bytes: a sockaddr), or "".
std::string sockaddr_ip(const std::string& name);

}  // namespace dccl::net
