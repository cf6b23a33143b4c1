// dcclUniqueId layout (128 bytes):
//   [0..4)    magic "DCID"
//   [4]       layout version (1)
//   [5]       host length n (1..kMaxHost)
//   [6..8)    port, big-endian (non-zero)
//   [8..24)   job secret
//   [24..24+n) host text (numeric IPv4 or IPv6), then zeros up to byte 124
//   [124..128) FNV-1a 32-bit checksum of bytes [0..124), big-endian
#include "bootstrap/unique_id.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/hmac.hpp"

namespace dccl::boot {

namespace {

constexpr char kMagic[4] = {'D', 'C', 'I', 'D'};
constexpr uint8_t kLayoutVersion = 1;
constexpr size_t kHostOff = 24;
constexpr size_t kSumOff = 124;
constexpr size_t kMaxHost = kSumOff - kHostOff;  // 100

uint32_t fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

[[noreturn]] void bad(const std::string& op, const std::string& cause) {
  core::raise(dcclInvalidArgument, core::describe(-1, op, cause));
}

// Numeric IPv4, or IPv6 with an optional %scope suffix.
bool numeric_host(const std::string& h) {
  unsigned char buf[sizeof(in6_addr)];
  if (inet_pton(AF_INET, h.c_str(), buf) == 1) return true;
  std::string core = h.substr(0, h.find('%'));
  if (core.size() != h.size()) {
    std::string scope = h.substr(core.size() + 1);
    if (scope.empty()) return false;
    for (char c : scope)
      if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  }
  return inet_pton(AF_INET6, core.c_str(), buf) == 1;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses exactly `n` bytes of hex; false on bad length or digit.
bool from_hex(const std::string& hex, uint8_t* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

void encode_id(const UniqueIdData& d, dcclUniqueId* out) {
  if (out == nullptr) bad("encode unique id", "null output");
  if (d.host.empty() || d.host.size() > kMaxHost || !numeric_host(d.host))
    bad("encode unique id", "host '" + d.host + "' is not a numeric IPv4/IPv6 address of at most " +
                                std::to_string(kMaxHost) + " characters");
  if (d.port == 0) bad("encode unique id", "port is 0");
  uint8_t b[DCCL_UNIQUE_ID_BYTES] = {};
  std::memcpy(b, kMagic, 4);
  b[4] = kLayoutVersion;
  b[5] = static_cast<uint8_t>(d.host.size());
  b[6] = static_cast<uint8_t>(d.port >> 8);
  b[7] = static_cast<uint8_t>(d.port);
  std::memcpy(b + 8, d.secret.data(), 16);
  std::memcpy(b + kHostOff, d.host.data(), d.host.size());
  uint32_t sum = fnv1a(b, kSumOff);
  for (int i = 0; i < 4; ++i) b[kSumOff + i] = static_cast<uint8_t>(sum >> (24 - 8 * i));
  std::memcpy(out->internal, b, sizeof(b));
}

UniqueIdData decode_id(const dcclUniqueId& id) {
  const auto* b = reinterpret_cast<const uint8_t*>(id.internal);
  const std::string op = "decode unique id";
  if (std::memcmp(b, kMagic, 4) != 0)
    bad(op, "bad magic: not a DirectCCL unique id (uninitialised, or corrupted in transit?)");
  if (b[4] != kLayoutVersion)
    bad(op, "unsupported id layout version " + std::to_string(b[4]) + " (this build reads " +
                std::to_string(kLayoutVersion) + ")");
  uint32_t sum = 0;
  for (int i = 0; i < 4; ++i) sum = sum << 8 | b[kSumOff + i];
  if (sum != fnv1a(b, kSumOff)) bad(op, "checksum mismatch: the id was corrupted");
  const size_t n = b[5];
  if (n == 0 || n > kMaxHost) bad(op, "host length " + std::to_string(n) + " out of range");
  for (size_t i = kHostOff + n; i < kSumOff; ++i)
    if (b[i] != 0) bad(op, "non-zero padding after the host");
  UniqueIdData d;
  d.host.assign(reinterpret_cast<const char*>(b + kHostOff), n);
  if (!numeric_host(d.host)) bad(op, "host is not a numeric IPv4/IPv6 address");
  d.port = static_cast<uint16_t>(b[6] << 8 | b[7]);
  if (d.port == 0) bad(op, "port is 0");
  std::memcpy(d.secret.data(), b + 8, 16);
  return d;
}

std::string id_to_hex(const dcclUniqueId& id) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * DCCL_UNIQUE_ID_BYTES);
  for (char c : id.internal) {
    auto u = static_cast<uint8_t>(c);
    s.push_back(digits[u >> 4]);
    s.push_back(digits[u & 15]);
  }
  return s;
}

dcclUniqueId id_from_hex(const std::string& hex) {
  dcclUniqueId id{};
  if (!from_hex(hex, reinterpret_cast<uint8_t*>(id.internal), DCCL_UNIQUE_ID_BYTES))
    bad("parse unique id", "expected " + std::to_string(2 * DCCL_UNIQUE_ID_BYTES) +
                               " hex digits, got " + std::to_string(hex.size()) + " characters" +
                               (hex.size() == 2 * DCCL_UNIQUE_ID_BYTES ? " with a non-hex digit" : ""));
  return id;
}

std::array<uint8_t, 16> random_secret() {
  std::array<uint8_t, 16> s{};
  core::random_bytes(s.data(), s.size(), "generate job secret");
  return s;
}

std::array<uint8_t, 16> child_secret(const std::array<uint8_t, 16>& parent, const std::array<uint8_t, 16>& salt) {
  const core::Digest d = core::hmac_fields(
      parent.data(), parent.size(),
      {"dccl child communicator secret", std::string_view(reinterpret_cast<const char*>(salt.data()), salt.size())});
  std::array<uint8_t, 16> out{};
  std::memcpy(out.data(), d.data(), out.size());
  return out;
}

std::array<uint8_t, 16> secret_from_hex(const std::string& hex) {
  std::array<uint8_t, 16> s{};
  if (!from_hex(hex, s.data(), s.size()))
    bad("parse job secret", "expected 32 hex digits, got " + std::to_string(hex.size()) +
                                " characters (not echoed: it is a secret)");
  return s;
}

}  // namespace dccl::boot
