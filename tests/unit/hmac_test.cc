// SHA-256 against FIPS 180-2's examples and padding-boundary lengths (digests
// from Python's hashlib), HMAC-SHA256 against RFC 4231's seven test cases, the
// length-prefixed field form, and the constant-time comparison.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/hmac.hpp"

using dccl::core::Digest;

namespace {

std::string hex(const Digest& d, size_t n = 32) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += k[d[i] >> 4];
    s += k[d[i] & 15];
  }
  return s;
}

std::string sha(const std::string& m) { return hex(dccl::core::sha256(m.data(), m.size())); }

std::string mac(const std::string& key, const std::string& data, size_t n = 32) {
  return hex(dccl::core::hmac_sha256(key.data(), key.size(), data.data(), data.size()), n);
}

std::string pattern(size_t n) {
  std::string m(n, '\0');
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<char>((i * 7 + 3) & 0xff);
  return m;
}

}  // namespace

TEST(Sha256, Fips180Examples) {
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  dccl::core::Sha256 s;  // one million 'a', fed in uneven pieces
  const std::string a(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, a.size());
    s.update(a.data(), n);
    left -= n;
  }
  EXPECT_EQ(hex(s.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  const std::vector<std::pair<size_t, std::string>> want = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"}};
  for (const auto& [n, d] : want) {
    const std::string m = pattern(n);
    EXPECT_EQ(sha(m), d) << n << " bytes";
    for (size_t cut = 1; cut < n; cut += 13) {  // the same digest whatever the pieces
      dccl::core::Sha256 s;
      s.update(m.data(), cut);
      s.update(m.data() + cut, n - cut);
      EXPECT_EQ(hex(s.finish()), d) << n << " bytes cut at " << cut;
    }
  }
}

TEST(HmacSha256, Rfc4231) {
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  const std::string big(131, '\xaa');
  EXPECT_EQ(mac(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(mac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(mac(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  EXPECT_EQ(mac(key4, std::string(50, '\xcd')), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(mac(std::string(20, '\x0c'), "Test With Truncation", 16), "a3b6167473100ee06e0c796c2955552b");
  EXPECT_EQ(mac(big, "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(mac(big, "This is a test using a larger than block-size key and a larger than block-size data. The key "
                     "needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

// Fields are length-prefixed: moving a byte from one field to the next changes
// the result, and the result is the HMAC of the prefixed concatenation.
TEST(HmacSha256, FieldsAreUnambiguous) {
  const std::string key = "0123456789abcdef";
  const Digest ab_c = dccl::core::hmac_fields(key.data(), key.size(), {"ab", "c"});
  const Digest a_bc = dccl::core::hmac_fields(key.data(), key.size(), {"a", "bc"});
  EXPECT_NE(hex(ab_c), hex(a_bc));
  const std::string flat = std::string("\0\0\0\2ab\0\0\0\1c", 11);
  EXPECT_EQ(hex(ab_c), mac(key, flat));
}

TEST(EqualCt, ComparesEveryByte) {
  const std::string a = "0123456789abcdef", b = "0123456789abcdeF", c = "X123456789abcdef";
  EXPECT_TRUE(dccl::core::equal_ct(a.data(), a.data(), a.size()));
  EXPECT_FALSE(dccl::core::equal_ct(a.data(), b.data(), a.size()));
  EXPECT_FALSE(dccl::core::equal_ct(a.data(), c.data(), a.size()));
  EXPECT_TRUE(dccl::core::equal_ct(a.data(), b.data(), a.size() - 1));
}

TEST(RandomBytes, Differ) {
  uint8_t x[32], y[32];
  dccl::core::random_bytes(x, sizeof(x), "test");
  dccl::core::random_bytes(y, sizeof(y), "test");
  EXPECT_FALSE(dccl::core::equal_ct(x, y, sizeof(x)));
}
