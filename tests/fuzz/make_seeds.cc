// Writes the seed corpus of fuzz_wire into the directory given: one valid frame
// of every type (from the wire encoders, so the seeds follow the protocol), a
// few frame sequences as the store sees them, and some near misses.
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "bootstrap/wire.hpp"

namespace wire = dccl::boot::wire;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::array<uint8_t, 16> secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(0x11 * i);

  std::vector<std::pair<std::string, std::string>> seeds;
  auto add = [&](const char* name, auto&& make) {
    std::string s;
    make(s);
    seeds.emplace_back(name, std::move(s));
  };
  wire::Nonce nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(0x21 * i + 5);
  add("challenge", [&](std::string& s) { wire::append_challenge(s, nonce); });
  add("hello", [&](std::string& s) { wire::append_hello(s, secret, nonce, 3, 8); });
  add("hello_claim", [&](std::string& s) {
    wire::Hello h;
    h.nonce = nonce;
    h.rank = 1;
    h.nranks = 4;
    h.flags = wire::kHelloWatch;
    h.pid = 4242;
    h.ns = "env0";
    h.host = "node01";
    h.proof = wire::hello_proof(secret, wire::Prover::Client, nonce, h);
    wire::append_hello(s, h);
  });
  add("hello_bad_nslen", [&](std::string& s) {
    wire::Hello h;
    h.ns = "ns";
    wire::append_hello(s, h);
    s[5 + 69] = 0x40;  // namespace length beyond the frame
  });
  add("welcome", [&](std::string& s) {
    wire::append_welcome(s, wire::hello_proof(secret, wire::Prover::Store, nonce, wire::Hello{}),
                         "rank 0 (pid 7 on node01)");
  });
  add("welcome_empty", [](std::string& s) { wire::append_welcome(s, wire::Proof{}); });
  add("refused_busy", [](std::string& s) { wire::append_refused(s, "busy: too many connections"); });
  add("refused", [](std::string& s) { wire::append_refused(s, "wrong job secret"); });
  add("set", [](std::string& s) { wire::append_set(s, 1, "ns/ag/0/1", std::string("blob\0blob", 9)); });
  add("set_empty", [](std::string& s) { wire::append_set(s, 2, "", ""); });
  add("get", [](std::string& s) { wire::append_get(s, 3, "ns/ag/0/2"); });
  add("del", [](std::string& s) { wire::append_del(s, 4, "ns/ag/0/0"); });
  add("value", [](std::string& s) { wire::append_value(s, 5, "the value"); });
  add("ok", [](std::string& s) { wire::append_ok(s, 6); });
  add("error", [](std::string& s) { wire::append_error(s, 7, "store full"); });
  add("lease", [](std::string& s) { wire::append_lease(s, 8, "ns/failed", "rank 3 (pid 42) died"); });
  add("unlease", [](std::string& s) { wire::append_unlease(s, 9); });
  add("client_session", [&](std::string& s) {  // what one rank sends over its lifetime
    wire::append_hello(s, secret, nonce, 0, 2);
    wire::append_lease(s, 1, "failed", "rank 0");
    wire::append_set(s, 2, "ag/0/0", "x");
    wire::append_get(s, 3, "ag/0/1");
    wire::append_del(s, 4, "ag/0/0");
    wire::append_unlease(s, 5);
  });
  add("server_session", [&](std::string& s) {
    wire::append_challenge(s, nonce);
    wire::append_welcome(s, wire::Proof{});
    wire::append_ok(s, 1);
    wire::append_value(s, 3, "y");
    wire::append_error(s, 2, "no");
  });
  add("lease_truncated", [](std::string& s) {
    wire::append_lease(s, 1, "key", "value");
    s.resize(s.size() - 3);
  });
  add("lease_bad_keylen", [](std::string& s) {
    wire::append_lease(s, 1, "key", "value");
    s[16] = 0x7f;  // key length (low byte) beyond the frame
  });

  for (auto& [name, bytes] : seeds) {
    const std::string path = dir + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
      std::perror(path.c_str());
      return 1;
    }
  }
  std::printf("make_seeds: %zu seeds in %s\n", seeds.size(), dir.c_str());
  return 0;
}
