#include "bootstrap/wire.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/hmac.hpp"

namespace dccl::boot::wire {

namespace {

struct Bounds {
  size_t min_payload, max_payload;
};

// Payload bounds per type; false for an unknown type byte.
bool bounds_of(uint8_t type, Bounds* b) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::Challenge: *b = {kChallengePayload, kChallengePayload}; return true;
    case FrameType::Hello: *b = {kHelloMinPayload, kHelloMaxPayload}; return true;
    case FrameType::Welcome: *b = {4 + kProofBytes, 4 + kProofBytes + kMaxReason}; return true;
    case FrameType::Refused: *b = {0, kMaxReason}; return true;
    case FrameType::Set:
    case FrameType::Lease: *b = {12, 12 + kMaxKey + kMaxValue}; return true;
    case FrameType::Get:
    case FrameType::Del: *b = {8, 8 + kMaxKey}; return true;
    case FrameType::Value: *b = {8, 8 + kMaxValue}; return true;
    case FrameType::Ok:
    case FrameType::Unlease: *b = {8, 8}; return true;
    case FrameType::Error: *b = {8, 8 + kMaxReason}; return true;
  }
  return false;
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
uint64_t get_u64(const uint8_t* p) { return (uint64_t{get_u32(p)} << 32) | get_u32(p + 4); }
uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

void put_u32(std::string& out, uint32_t v) {
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
               static_cast<char>(v)};
  out.append(b, 4);
}
void put_u16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}
void put_u64(std::string& out, uint64_t v) {
  put_u32(out, static_cast<uint32_t>(v >> 32));
  put_u32(out, static_cast<uint32_t>(v));
}

void put_header(std::string& out, FrameType t, size_t payload) {
  put_u32(out, static_cast<uint32_t>(1 + payload));
  out.push_back(static_cast<char>(t));
}

void check_len(const char* what, size_t n, size_t max) {
  if (n > max)
    core::raise(dcclInvalidArgument, std::string("bootstrap wire: ") + what + " of " +
                                         std::to_string(n) + " bytes exceeds the limit of " +
                                         std::to_string(max));
}

ParseResult malformed(std::string why) {
  ParseResult r;
  r.status = ParseStatus::Malformed;
  r.error = std::move(why);
  return r;
}

}  // namespace

const char* type_name(FrameType t) {
  switch (t) {
    case FrameType::Hello: return "HELLO";
    case FrameType::Welcome: return "WELCOME";
    case FrameType::Refused: return "REFUSED";
    case FrameType::Set: return "SET";
    case FrameType::Get: return "GET";
    case FrameType::Del: return "DEL";
    case FrameType::Value: return "VALUE";
    case FrameType::Ok: return "OK";
    case FrameType::Error: return "ERROR";
    case FrameType::Lease: return "LEASE";
    case FrameType::Unlease: return "UNLEASE";
    case FrameType::Challenge: return "CHALLENGE";
  }
  return "UNKNOWN";
}

bool is_client_frame(FrameType t) {
  return t == FrameType::Hello || t == FrameType::Set || t == FrameType::Get || t == FrameType::Del ||
         t == FrameType::Lease || t == FrameType::Unlease;
}

ParseResult parse_frame(const uint8_t* data, size_t size) {
  ParseResult r;
  if (data == nullptr) size = 0;
  if (size < 4) {
    r.need = 4;
    return r;
  }
  const uint32_t len = get_u32(data);
  if (len == 0) return malformed("frame length is zero");
  if (len > kMaxFrameLen)
    return malformed("frame length " + std::to_string(len) + " exceeds the limit of " +
                     std::to_string(kMaxFrameLen));
  if (size < kHeaderBytes) {
    r.need = kHeaderBytes;
    return r;
  }
  const uint8_t type = data[4];
  Bounds b{};
  if (!bounds_of(type, &b)) return malformed("unknown frame type " + std::to_string(type));
  const size_t payload = len - 1;
  const auto ft = static_cast<FrameType>(type);
  if (payload < b.min_payload || payload > b.max_payload)
    return malformed(std::string(type_name(ft)) + " payload of " + std::to_string(payload) +
                     " bytes is outside [" + std::to_string(b.min_payload) + ", " +
                     std::to_string(b.max_payload) + "]");
  const size_t total = 4 + static_cast<size_t>(len);
  if (size < total) {
    r.need = total;
    return r;
  }

  // Whole frame present; payload sizes were checked against each type's minimum.
  const uint8_t* p = data + kHeaderBytes;
  const uint8_t* end = data + total;
  Frame& f = r.frame;
  f.type = ft;
  auto rest = [&](const uint8_t* from) { return std::string(reinterpret_cast<const char*>(from), end - from); };
  switch (ft) {
    case FrameType::Challenge:
      f.version = get_u32(p);
      std::memcpy(f.nonce.data(), p + 4, kNonceBytes);
      break;
    case FrameType::Hello: {
      f.version = get_u32(p);
      std::memcpy(f.nonce.data(), p + 4, kNonceBytes);
      std::memcpy(f.proof.data(), p + 4 + kNonceBytes, kProofBytes);
      const uint8_t* q = p + 4 + kNonceBytes + kProofBytes;
      f.rank = static_cast<int32_t>(get_u32(q));
      f.nranks = static_cast<int32_t>(get_u32(q + 4));
      if (f.nranks < 1) return malformed("HELLO nranks " + std::to_string(f.nranks) + " < 1");
      if (f.rank < 0 || f.rank >= f.nranks)
        return malformed("HELLO rank " + std::to_string(f.rank) + " outside [0, " +
                         std::to_string(f.nranks) + ")");
      f.flags = get_u32(q + 8);
      f.pid = get_u32(q + 12);
      const size_t nslen = get_u16(q + 16);
      const size_t avail = payload - kHelloMinPayload;
      if (nslen > kMaxNamespace) return malformed("HELLO namespace of " + std::to_string(nslen) + " bytes");
      if (nslen > avail) return malformed("HELLO namespace length exceeds the frame");
      if (avail - nslen > kMaxHostName) return malformed("HELLO host name over " + std::to_string(kMaxHostName) + " bytes");
      f.ns.assign(reinterpret_cast<const char*>(p + kHelloMinPayload), nslen);
      f.host = rest(p + kHelloMinPayload + nslen);
      break;
    }
    case FrameType::Welcome:
      f.version = get_u32(p);
      std::memcpy(f.proof.data(), p + 4, kProofBytes);
      f.value = rest(p + 4 + kProofBytes);
      break;
    case FrameType::Refused: f.value = rest(p); break;
    case FrameType::Set:
    case FrameType::Lease: {
      const auto name = [ft] { return std::string(type_name(ft)); };  // error paths only
      f.req = get_u64(p);
      const uint32_t klen = get_u32(p + 8);
      const size_t avail = static_cast<size_t>(end - (p + 12));
      if (klen > kMaxKey) return malformed(name() + " key length " + std::to_string(klen) + " exceeds 1024");
      if (klen > avail)
        return malformed(name() + " key length " + std::to_string(klen) + " exceeds the frame");
      if (avail - klen > kMaxValue) return malformed(name() + " value exceeds 16 MiB");
      f.key.assign(reinterpret_cast<const char*>(p + 12), klen);
      f.value = rest(p + 12 + klen);
      break;
    }
    case FrameType::Get:
    case FrameType::Del:
      f.req = get_u64(p);
      f.key = rest(p + 8);
      break;
    case FrameType::Value:
    case FrameType::Error:
      f.req = get_u64(p);
      f.value = rest(p + 8);
      break;
    case FrameType::Ok:
    case FrameType::Unlease: f.req = get_u64(p); break;
  }
  r.status = ParseStatus::Ok;
  r.consumed = total;
  return r;
}

void append_challenge(std::string& out, const Nonce& store_nonce, uint32_t version) {
  put_header(out, FrameType::Challenge, kChallengePayload);
  put_u32(out, version);
  out.append(reinterpret_cast<const char*>(store_nonce.data()), store_nonce.size());
}

void append_hello(std::string& out, const Hello& h) {
  check_len("namespace", h.ns.size(), kMaxNamespace);
  check_len("host name", h.host.size(), kMaxHostName);
  put_header(out, FrameType::Hello, kHelloMinPayload + h.ns.size() + h.host.size());
  put_u32(out, h.version);
  out.append(reinterpret_cast<const char*>(h.nonce.data()), h.nonce.size());
  out.append(reinterpret_cast<const char*>(h.proof.data()), h.proof.size());
  put_u32(out, static_cast<uint32_t>(h.rank));
  put_u32(out, static_cast<uint32_t>(h.nranks));
  put_u32(out, h.flags);
  put_u32(out, h.pid);
  put_u16(out, static_cast<uint16_t>(h.ns.size()));
  out.append(h.ns);
  out.append(h.host);
}

void append_hello(std::string& out, const std::array<uint8_t, 16>& secret, const Nonce& store_nonce,
                  int32_t rank, int32_t nranks) {
  Hello h;
  h.nonce = fresh_nonce();
  h.rank = rank;
  h.nranks = nranks;
  h.proof = hello_proof(secret, Prover::Client, store_nonce, h);
  append_hello(out, h);
}

void append_welcome(std::string& out, const Proof& proof, std::string_view host, uint32_t version) {
  host = host.substr(0, kMaxReason);
  put_header(out, FrameType::Welcome, 4 + kProofBytes + host.size());
  put_u32(out, version);
  out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  out.append(host);
}

Hello hello_of(const Frame& f) {
  Hello h;
  h.nonce = f.nonce;
  h.proof = f.proof;
  h.rank = f.rank;
  h.nranks = f.nranks;
  h.flags = f.flags;
  h.pid = f.pid;
  h.ns = f.ns;
  h.host = f.host;
  h.version = f.version;
  return h;
}

Proof hello_proof(const std::array<uint8_t, 16>& secret, Prover who, const Nonce& store_nonce, const Hello& h) {
  std::string fixed;  // the HELLO's numbers, as they travel
  put_u32(fixed, h.version);
  put_u32(fixed, static_cast<uint32_t>(h.rank));
  put_u32(fixed, static_cast<uint32_t>(h.nranks));
  put_u32(fixed, h.flags);
  put_u32(fixed, h.pid);
  auto view = [](const auto& a) { return std::string_view(reinterpret_cast<const char*>(a.data()), a.size()); };
  return core::hmac_fields(secret.data(), secret.size(),
                           {who == Prover::Client ? "dccl store hello: client" : "dccl store hello: store",
                            view(store_nonce), view(h.nonce), fixed, h.ns, h.host});
}

bool proof_ok(const Proof& got, const Proof& want) { return core::equal_ct(got.data(), want.data(), got.size()); }

Nonce fresh_nonce() {
  Nonce n;
  core::random_bytes(n.data(), n.size(), "bootstrap handshake nonce");
  return n;
}

void append_refused(std::string& out, std::string_view reason) {
  reason = reason.substr(0, kMaxReason);
  put_header(out, FrameType::Refused, reason.size());
  out.append(reason);
}

static void append_keyed_value(std::string& out, FrameType t, uint64_t req, std::string_view key,
                               std::string_view value) {
  check_len("key", key.size(), kMaxKey);
  check_len("value", value.size(), kMaxValue);
  put_header(out, t, 12 + key.size() + value.size());
  put_u64(out, req);
  put_u32(out, static_cast<uint32_t>(key.size()));
  out.append(key);
  out.append(value);
}

void append_set(std::string& out, uint64_t req, std::string_view key, std::string_view value) {
  append_keyed_value(out, FrameType::Set, req, key, value);
}
void append_lease(std::string& out, uint64_t req, std::string_view key, std::string_view value) {
  append_keyed_value(out, FrameType::Lease, req, key, value);
}

static void append_keyed(std::string& out, FrameType t, uint64_t req, std::string_view key) {
  check_len("key", key.size(), kMaxKey);
  put_header(out, t, 8 + key.size());
  put_u64(out, req);
  out.append(key);
}

void append_get(std::string& out, uint64_t req, std::string_view key) {
  append_keyed(out, FrameType::Get, req, key);
}
void append_del(std::string& out, uint64_t req, std::string_view key) {
  append_keyed(out, FrameType::Del, req, key);
}

void append_value(std::string& out, uint64_t req, std::string_view value) {
  check_len("value", value.size(), kMaxValue);
  put_header(out, FrameType::Value, 8 + value.size());
  put_u64(out, req);
  out.append(value);
}

void append_ok(std::string& out, uint64_t req) {
  put_header(out, FrameType::Ok, 8);
  put_u64(out, req);
}

void append_unlease(std::string& out, uint64_t req) {
  put_header(out, FrameType::Unlease, 8);
  put_u64(out, req);
}

void append_error(std::string& out, uint64_t req, std::string_view reason) {
  reason = reason.substr(0, kMaxReason);
  put_header(out, FrameType::Error, 8 + reason.size());
  put_u64(out, req);
  out.append(reason);
}

}  // namespace dccl::boot::wire
