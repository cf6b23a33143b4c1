#include "net/sock/sock_intro.hpp"

#include <cstring>
#include <string>
#include <string_view>

#include "core/hmac.hpp"

namespace dccl::net {

namespace {

constexpr uint32_t kMagic = 0x324b5344;  // "DSK2" (version 1 sent the acceptor's number alone)

enum class Side { Connector, Acceptor };

core::Digest proof_of(Side who, const IntroKey& k, const IntroPair& p, const IntroNonce& other,
                      const IntroNonce& mine) {
  char fixed[4 * 3 + 8 * 2];
  const uint32_t c = static_cast<uint32_t>(p.connector), a = static_cast<uint32_t>(p.acceptor),
                 n = static_cast<uint32_t>(k.nranks);
  memcpy(fixed, &c, 4);
  memcpy(fixed + 4, &a, 4);
  memcpy(fixed + 8, &n, 4);
  memcpy(fixed + 12, &p.acceptor_listener, 8);
  memcpy(fixed + 20, &p.connector_listener, 8);
  auto view = [](const IntroNonce& x) { return std::string_view(reinterpret_cast<const char*>(x.b.data()), x.b.size()); };
  return core::hmac_fields(k.secret.data(), k.secret.size(),
                           {who == Side::Connector ? "dccl socket path: connector" : "dccl socket path: acceptor",
                            view(other), view(mine), std::string_view(fixed, sizeof(fixed))});
}

}  // namespace

IntroNonce IntroNonce::fresh() {
  IntroNonce n;
  core::random_bytes(n.b.data(), n.b.size(), "socket path handshake nonce");
  return n;
}

void intro_hello(char* out, const IntroPair& p, const IntroNonce& nc) {
  const uint32_t from = static_cast<uint32_t>(p.connector);
  memcpy(out, &kMagic, 4);
  memcpy(out + 4, &from, 4);
  memcpy(out + 8, &p.acceptor_listener, 8);
  memcpy(out + 16, nc.b.data(), 16);
}

int intro_hello_from(const char* in, uint64_t acceptor_listener, IntroNonce* nc) {
  uint32_t magic = 0, from = 0;
  uint64_t listener = 0;
  memcpy(&magic, in, 4);
  memcpy(&from, in + 4, 4);
  memcpy(&listener, in + 8, 8);
  if (magic != kMagic || listener != acceptor_listener || from > 0x7fffffffu) return -1;
  memcpy(nc->b.data(), in + 16, 16);
  return static_cast<int>(from);
}

void intro_answer(char* out, const IntroKey& k, const IntroPair& p, const IntroNonce& nc, const IntroNonce& na) {
  const uint32_t from = static_cast<uint32_t>(p.acceptor);
  memcpy(out, &kMagic, 4);
  memcpy(out + 4, &from, 4);
  memcpy(out + 8, na.b.data(), 16);
  const core::Digest d = proof_of(Side::Acceptor, k, p, nc, na);
  memcpy(out + 24, d.data(), d.size());
}

bool intro_check_answer(const char* in, const IntroKey& k, const IntroPair& p, const IntroNonce& nc, char* proof) {
  uint32_t magic = 0, from = 0;
  memcpy(&magic, in, 4);
  memcpy(&from, in + 4, 4);
  if (magic != kMagic || from != static_cast<uint32_t>(p.acceptor)) return false;
  IntroNonce na;
  memcpy(na.b.data(), in + 8, 16);
  const core::Digest want = proof_of(Side::Acceptor, k, p, nc, na);
  if (!core::equal_ct(in + 24, want.data(), want.size())) return false;
  const core::Digest mine = proof_of(Side::Connector, k, p, na, nc);
  memcpy(proof, mine.data(), mine.size());
  return true;
}

bool intro_check_proof(const char* in, const IntroKey& k, const IntroPair& p, const IntroNonce& nc,
                       const IntroNonce& na) {
  const core::Digest want = proof_of(Side::Connector, k, p, na, nc);
  return core::equal_ct(in, want.data(), want.size());
}

}  // namespace dccl::net
