// The socket path's introduction: a challenge-response over the job secret, so
// that a connection is taken only from a process that knows the secret, the
// secret itself never crosses the wire, and nothing captured from one
// connection opens another.
//
// The lower rank C connects to the higher rank A (which published NONCE_A, a
// random number naming its listener, in its connection blob) and the two
// exchange three messages:
//   C -> A  hello   u32 magic, u32 C, u64 NONCE_A, nc[16]          (32 bytes)
//   A -> C  answer  u32 magic, u32 A, na[16], proof_A[32]          (56 bytes)
//   C -> A  proof   proof_C[32]                                    (32 bytes)
// proof_X = HMAC-SHA256(secret, label of X's side, the other side's nonce, X's
// nonce, C, A, world size, NONCE_A, NONCE_C) (core/hmac.hpp); nc and na are
// fresh random per connection. A checks hello's rank and NONCE_A before it
// computes anything and proof_C before it takes the connection; C checks
// proof_A before it sends proof_C, so C never proves itself to a listener that
// does not know the secret.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace dccl::net {

struct IntroKey {
  std::array<uint8_t, 16> secret{};  // the job secret
  int nranks = 0;
};

struct IntroNonce {
  std::array<uint8_t, 16> b{};
  static IntroNonce fresh();
};

inline constexpr size_t kIntroHelloBytes = 32;
inline constexpr size_t kIntroAnswerBytes = 56;
inline constexpr size_t kIntroProofBytes = 32;

// The numbers every message and proof is bound to.
struct IntroPair {
  int connector = -1, acceptor = -1;
  uint64_t connector_listener = 0, acceptor_listener = 0;  // the NONCEs of both blobs
};

// Connector: the hello (kIntroHelloBytes) with nonce `nc`.
void intro_hello(char* out, const IntroPair& p, const IntroNonce& nc);
// Acceptor: who sent the hello, or -1 when its magic or NONCE_A is wrong.
int intro_hello_from(const char* in, uint64_t acceptor_listener, IntroNonce* nc);
// Acceptor: the answer (kIntroAnswerBytes) with nonce `na`.
void intro_answer(char* out, const IntroKey& k, const IntroPair& p, const IntroNonce& nc, const IntroNonce& na);
// Connector: true when the answer comes from p.acceptor and proves the secret;
// then `proof` (kIntroProofBytes) is the connector's proof to send.
bool intro_check_answer(const char* in, const IntroKey& k, const IntroPair& p, const IntroNonce& nc, char* proof);
// Acceptor: true when the connector's proof is right.
bool intro_check_proof(const char* in, const IntroKey& k, const IntroPair& p, const IntroNonce& nc,
                       const IntroNonce& na);

}  // namespace dccl::net
