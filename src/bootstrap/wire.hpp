// Bootstrap store wire protocol.
//
// Every frame: u32 length (big-endian; counts the type byte and the payload),
// u8 type, payload. All integers are big-endian. Payloads:
//   CHALLENGE s->c u32 version, store nonce[16]                    (sent on accept)
//   HELLO   c->s  u32 version, client nonce[16], proof[32],        (first frame, exactly once)
//                 i32 rank, i32 nranks, u32 flags, u32 pid, u16 nslen, namespace, host name (the rest)
//   WELCOME s->c  u32 version, proof[32], who hosts the store (text) (HELLO accepted)
//   REFUSED s->c  reason text                                     (then the server closes)
//   SET     c->s  u64 req, u32 keylen, key, value                 (answered by OK or ERROR)
//   GET     c->s  u64 req, key                                    (answered by VALUE when the key exists)
//   DEL     c->s  u64 req, key                                    (answered by OK)
//   VALUE   s->c  u64 req, value
//   OK      s->c  u64 req
//   ERROR   s->c  u64 req, reason text
//   LEASE   c->s  u64 req, u32 keylen, key, value                 (answered by OK or ERROR)
//   UNLEASE c->s  u64 req                                         (answered by OK)
// The job secret never crosses the wire. The store sends a fresh random nonce as
// it accepts a connection; HELLO proves the client knows the secret with
// HMAC-SHA256(secret, "client" label, store nonce, client nonce, every other
// HELLO field) (hello_proof), and WELCOME proves the store knows it with the
// same over the "store" label. A captured HELLO is worthless on another
// connection (another store nonce), and a WELCOME on another (another client
// nonce). The version travels in CHALLENGE first, so a client can name a store
// of another version before it says anything; the layouts above are those of
// version 3 (versions 1 and 2 sent the secret itself).
// LEASE: the store remembers (key, value) for this connection (one lease per
// connection; a new LEASE replaces the old). When the connection closes for any
// reason other than the store shutting down while a lease is held, the store
// performs SET(key, value) unless the key already exists, waking the GETs parked
// on it. UNLEASE drops the connection's lease (graceful exit).
// Sizes are bounded (key <= 1 KiB, value <= 16 MiB, reason <= 1 KiB), so a frame
// never exceeds kMaxFrameLen and the parser never allocates more than that.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dccl::boot::wire {

inline constexpr uint32_t kProtocolVersion = 3;
inline constexpr size_t kHeaderBytes = 5;  // u32 length + u8 type
inline constexpr size_t kMaxKey = 1024;
inline constexpr size_t kMaxValue = 16u << 20;
inline constexpr size_t kMaxReason = 1024;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kMaxNamespace = 256;
inline constexpr size_t kMaxHostName = 64;
inline constexpr size_t kChallengePayload = 4 + kNonceBytes;
inline constexpr size_t kHelloMinPayload = 4 + kNonceBytes + kProofBytes + 4 + 4 + 4 + 4 + 2;  // empty strings
inline constexpr size_t kHelloMaxPayload = kHelloMinPayload + kMaxNamespace + kMaxHostName;
// HELLO flags. Watch: a second connection of a rank that already holds its claim
// (the failure watcher); it is checked against the namespace's world size but
// claims nothing.
inline constexpr uint32_t kHelloWatch = 1;
inline constexpr std::string_view kBusy = "busy: ";
inline constexpr std::string_view kConflict = "conflict: ";
// A rank's init failed (or its process ended during init): the key it sets, or its
// connection's lease sets, in its namespace; the store then fails the namespace with
// kAbandoned + the value, so that the other ranks' init waits end at once naming it.
inline constexpr std::string_view kAbandonKey = "!init-abandoned";
inline constexpr std::string_view kAbandoned = "abandoned: ";
// Largest legal value of the length field: type byte + SET's payload at its bounds.
inline constexpr size_t kMaxFrameLen = 1 + 8 + 4 + kMaxKey + kMaxValue;

enum class FrameType : uint8_t {
  Hello = 1,
  Welcome = 2,
  Refused = 3,
  Set = 4,
  Get = 5,
  Del = 6,
  Value = 7,
  Ok = 8,
  Error = 9,
  Lease = 10,
  Unlease = 11,
  Challenge = 12,
};
const char* type_name(FrameType t);
bool is_client_frame(FrameType t);  // HELLO, SET, GET, DEL, LEASE, UNLEASE

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

struct Frame {
  FrameType type = FrameType::Ok;
  uint64_t req = 0;                  // SET GET DEL VALUE OK ERROR LEASE UNLEASE
  uint32_t version = 0;              // CHALLENGE HELLO WELCOME
  Nonce nonce{};                     // CHALLENGE (the store's) HELLO (the client's)
  Proof proof{};                     // HELLO WELCOME
  int32_t rank = 0, nranks = 0;      // HELLO (0 <= rank < nranks)
  uint32_t flags = 0, pid = 0;       // HELLO
  std::string ns, host;              // HELLO: key namespace, client's host name
  std::string key;                   // SET GET DEL LEASE
  std::string value;                 // SET VALUE LEASE; the reason for REFUSED and ERROR; WELCOME's text
};

// What a client says in HELLO.
struct Hello {
  Nonce nonce{};  // the client's, fresh per connection
  Proof proof{};  // hello_proof(secret, Prover::Client, store nonce, *this)
  int32_t rank = 0, nranks = 1;
  uint32_t flags = 0, pid = 0;
  std::string ns, host;  // at most kMaxNamespace and kMaxHostName bytes
  uint32_t version = kProtocolVersion;
};

// The proofs of the handshake. Prover::Client goes in HELLO, Prover::Store in
// WELCOME; both cover the store's nonce, the client's nonce (h.nonce) and every
// other field of the HELLO, under a label of their own, so neither can stand in
// for the other nor be moved to another connection or claim.
enum class Prover { Client, Store };
Proof hello_proof(const std::array<uint8_t, 16>& secret, Prover who, const Nonce& store_nonce, const Hello& h);
// A decoded HELLO frame's fields (its proof included).
Hello hello_of(const Frame& f);
// True when `got` equals the proof expected (compared in constant time).
bool proof_ok(const Proof& got, const Proof& want);
Nonce fresh_nonce();  // from getrandom()

enum class ParseStatus { NeedMore, Ok, Malformed };

struct ParseResult {
  ParseStatus status = ParseStatus::NeedMore;
  size_t consumed = 0;  // Ok: bytes of the frame, to drop from the buffer
  size_t need = 0;      // NeedMore: total bytes the frame needs (at least)
  Frame frame;          // Ok
  std::string error;    // Malformed: why
};

// Parses the frame at the start of [data, data+size). Pure: never reads outside
// the buffer, never allocates more than kMaxFrameLen, never throws on bad bytes.
// A bad header (zero, oversized or out-of-range length, unknown type) is reported
// as soon as its 5 bytes are present, before the payload arrives.
ParseResult parse_frame(const uint8_t* data, size_t size);

// Encoders append one frame to `out`. Keys, values and reasons over their bounds
// throw core::Error(dcclInvalidArgument) (reasons are truncated instead).
void append_challenge(std::string& out, const Nonce& store_nonce, uint32_t version = kProtocolVersion);
void append_hello(std::string& out, const Hello& h);
// A HELLO with an empty namespace and host name, pid 0 and no flags, its nonce
// fresh and its proof made with `secret` for the CHALLENGE's `store_nonce`.
void append_hello(std::string& out, const std::array<uint8_t, 16>& secret, const Nonce& store_nonce,
                  int32_t rank, int32_t nranks);
// `host` (truncated to kMaxReason) says who hosts the store.
void append_welcome(std::string& out, const Proof& proof, std::string_view host = {},
                    uint32_t version = kProtocolVersion);
void append_refused(std::string& out, std::string_view reason);
void append_set(std::string& out, uint64_t req, std::string_view key, std::string_view value);
void append_get(std::string& out, uint64_t req, std::string_view key);
void append_del(std::string& out, uint64_t req, std::string_view key);
void append_value(std::string& out, uint64_t req, std::string_view value);
void append_ok(std::string& out, uint64_t req);
void append_error(std::string& out, uint64_t req, std::string_view reason);
void append_lease(std::string& out, uint64_t req, std::string_view key, std::string_view value);
void append_unlease(std::string& out, uint64_t req);

}  // namespace dccl::boot::wire
