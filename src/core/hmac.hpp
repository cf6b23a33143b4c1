// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), self-contained, for the
// challenge-response handshakes that prove knowledge of the job secret without
// sending it: the bootstrap store's HELLO and the socket path's introduction.
// Also a constant-time comparison and fresh random bytes for nonces.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace dccl::core {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Digest finish();  // the object is spent afterwards

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

Digest sha256(const void* data, size_t len);

// HMAC-SHA256 over the concatenation of the parts fed to update().
class Hmac {
 public:
  Hmac(const void* key, size_t key_len);
  void update(const void* data, size_t len) { inner_.update(data, len); }
  void update(std::string_view s) { inner_.update(s); }
  Digest finish();

 private:
  Sha256 inner_, outer_;
};

Digest hmac_sha256(const void* key, size_t key_len, const void* data, size_t len);

// HMAC-SHA256 over a list of fields, each preceded by its length (u32,
// big-endian), so that no two different lists give the same input. The
// handshakes' proofs: fields = (direction label, nonces, connection parameters).
Digest hmac_fields(const void* key, size_t key_len, std::initializer_list<std::string_view> fields);

// True when the n bytes at a and b are equal; the time taken does not depend
// on where they differ.
bool equal_ct(const void* a, const void* b, size_t n);

// n bytes from getrandom(); throws core::Error(dcclSystemError) naming `what`
// (callers that know their rank catch and add it; getrandom fails only when
// the kernel lacks it).
void random_bytes(void* out, size_t n, const char* what);

}  // namespace dccl::core
