// Bootstrap layer: unique id, wire parser, store server, client.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "bootstrap/wire.hpp"
#include "catch_error.hpp"
#include "core/error.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using dccl::core::Error;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<StoreServer> local_server(const StoreLimits& lim = {}) {
  return StoreServer::start("127.0.0.1", 0, random_secret(), lim);
}

int raw_connect(const UniqueIdData& id) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(id.port);
  inet_pton(AF_INET, id.host.c_str(), &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

// True when the server closes `fd` (EOF or reset) within 2 s; bytes it sends first are skipped.
bool closed_by_server(int fd) {
  auto end = Clock::now() + 2s;
  char buf[256];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

// Reads the CHALLENGE the store sends on accept; its nonce.
wire::Nonce read_challenge(int fd) {
  std::string got;
  char buf[64];
  while (got.size() < 5 + wire::kChallengePayload) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) break;
    const ssize_t n = recv(fd, buf, 5 + wire::kChallengePayload - got.size(), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  auto r = wire::parse_frame(reinterpret_cast<const uint8_t*>(got.data()), got.size());
  EXPECT_TRUE(r.status == wire::ParseStatus::Ok && r.frame.type == wire::FrameType::Challenge)
      << "no CHALLENGE from the store (" << got.size() << " bytes)";
  return r.frame.nonce;
}

void send_bytes(int fd, const std::string& s) {
  ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

uint16_t unused_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A correct client can still do a full round trip.
void expect_serves(const UniqueIdData& id) {
  Bootstrap b(id, 0, 1, 2s);
  b.set("probe", "ok");
  EXPECT_EQ(b.get("probe"), "ok");
  EXPECT_EQ(b.allgather("x"), std::vector<std::string>{"x"});
}

std::string blob(int rank, int round) {
  if (rank == 0) return "";
  if (rank == 1) return std::string(1 << 20, static_cast<char>('a' + round));
  std::string s = std::to_string(rank);  // no "lit" + string: GCC 12 -Wrestrict false positive
  s += 'k';
  s += std::to_string(round);
  s.append(static_cast<size_t>(rank * 37), 'z');
  return s;
}

}  // namespace

TEST(UniqueId, RoundTrip) {
  for (std::string host : {"10.1.2.3", "127.0.0.1", "fe80::1%lo", "2001:db8::42"}) {
    UniqueIdData d{host, 29500, random_secret(), ""};
    dcclUniqueId id;
    encode_id(d, &id);
    UniqueIdData back = decode_id(id_from_hex(id_to_hex(id)));
    EXPECT_EQ(back.host, host);
    EXPECT_EQ(back.port, 29500);
    EXPECT_EQ(back.secret, d.secret);
    EXPECT_EQ(id_to_hex(id).size(), 256u);
  }
  auto s = random_secret();
  EXPECT_NE(s, random_secret());
  std::string hex = "00112233445566778899aabbccddeeff";
  EXPECT_EQ(secret_from_hex(hex)[15], 0xff);
  EXPECT_EQ(catch_error([] { secret_from_hex("0011"); }).code(), dcclInvalidArgument);
  EXPECT_EQ(catch_error([] { secret_from_hex(std::string(32, 'g')); }).code(), dcclInvalidArgument);
}

TEST(UniqueId, RejectsGarbage) {
  dcclUniqueId zero{};
  EXPECT_EQ(catch_error([&] { decode_id(zero); }).code(), dcclInvalidArgument);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    dcclUniqueId g;
    for (char& c : g.internal) c = static_cast<char>(rng());
    EXPECT_EQ(catch_error([&] { decode_id(g); }).code(), dcclInvalidArgument);
  }
  dcclUniqueId good;
  encode_id({"10.0.0.1", 1234, random_secret(), ""}, &good);
  for (int i : {0, 5, 7, 20, 40, 100, 127}) {  // any flipped byte is caught
    dcclUniqueId bad = good;
    bad.internal[i] ^= 0x10;
    EXPECT_EQ(catch_error([&] { decode_id(bad); }).code(), dcclInvalidArgument) << "byte " << i;
  }
  EXPECT_EQ(catch_error([] { id_from_hex("abc"); }).code(), dcclInvalidArgument);
  EXPECT_EQ(catch_error([] { id_from_hex(std::string(256, 'x')); }).code(), dcclInvalidArgument);
  dcclUniqueId out;
  EXPECT_EQ(catch_error([&] { encode_id({"node01", 1, {}, ""}, &out); }).code(), dcclInvalidArgument);
  EXPECT_EQ(catch_error([&] { encode_id({"1.2.3.4", 0, {}, ""}, &out); }).code(), dcclInvalidArgument);
}

namespace {
wire::ParseResult parse(const std::string& s) {
  return wire::parse_frame(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
// Every strict prefix needs more bytes; the whole frame parses and is consumed exactly.
wire::Frame parse_whole(const std::string& s) {
  for (size_t n = 0; n < s.size(); ++n) EXPECT_EQ(parse(s.substr(0, n)).status, wire::ParseStatus::NeedMore) << n;
  auto r = parse(s + "trailing");
  EXPECT_EQ(r.status, wire::ParseStatus::Ok) << r.error;
  EXPECT_EQ(r.consumed, s.size());
  return r.frame;
}
std::string header(uint32_t len, uint8_t type) {
  std::string s(5, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(len >> (24 - 8 * i));
  s[4] = static_cast<char>(type);
  return s;
}
void expect_malformed(const std::string& s, const char* what) {
  auto r = parse(s);
  EXPECT_EQ(r.status, wire::ParseStatus::Malformed) << what;
  EXPECT_FALSE(r.error.empty()) << what;
}
}  // namespace

TEST(Wire, EachFrameType) {
  using wire::FrameType;
  std::string s;
  auto sec = random_secret();
  const wire::Nonce sn = wire::fresh_nonce();
  wire::append_challenge(s, sn);
  auto f = parse_whole(s);
  EXPECT_EQ(f.type, FrameType::Challenge);
  EXPECT_EQ(f.version, wire::kProtocolVersion);
  EXPECT_EQ(f.nonce, sn);
  EXPECT_FALSE(wire::is_client_frame(FrameType::Challenge));
  s.clear(), wire::append_hello(s, sec, sn, 3, 8);
  f = parse_whole(s);
  EXPECT_EQ(f.type, FrameType::Hello);
  EXPECT_EQ(f.rank, 3);
  EXPECT_EQ(f.nranks, 8);
  EXPECT_EQ(f.version, wire::kProtocolVersion);
  EXPECT_EQ(s.find(std::string(reinterpret_cast<const char*>(sec.data()), sec.size())), std::string::npos);
  wire::Hello h;
  h.nonce = f.nonce;
  h.rank = 3;
  h.nranks = 8;
  EXPECT_TRUE(wire::proof_ok(f.proof, wire::hello_proof(sec, wire::Prover::Client, sn, h)));
  s.clear(), wire::append_welcome(s, f.proof, "rank 0");
  f = parse_whole(s);
  EXPECT_EQ(f.type, FrameType::Welcome);
  EXPECT_EQ(f.value, "rank 0");
  EXPECT_TRUE(wire::proof_ok(f.proof, wire::hello_proof(sec, wire::Prover::Client, sn, h)));
  s.clear(), wire::append_refused(s, "nope");
  EXPECT_EQ(parse_whole(s).value, "nope");
  s.clear(), wire::append_set(s, 42, "key", std::string("v\0v", 3));
  f = parse_whole(s);
  EXPECT_EQ(f.type, FrameType::Set);
  EXPECT_EQ(f.req, 42u);
  EXPECT_EQ(f.key, "key");
  EXPECT_EQ(f.value, std::string("v\0v", 3));
  s.clear(), wire::append_set(s, 1, "", "");
  EXPECT_EQ(parse_whole(s).key, "");
  s.clear(), wire::append_get(s, 7, "g");
  f = parse_whole(s);
  EXPECT_EQ(f.type, FrameType::Get);
  EXPECT_EQ(f.key, "g");
  EXPECT_EQ(f.req, 7u);
  s.clear(), wire::append_del(s, 8, "d");
  EXPECT_EQ(parse_whole(s).type, FrameType::Del);
  s.clear(), wire::append_value(s, 1ull << 40, "val");
  f = parse_whole(s);
  EXPECT_EQ(f.req, 1ull << 40);
  EXPECT_EQ(f.value, "val");
  s.clear(), wire::append_ok(s, 9);
  EXPECT_EQ(parse_whole(s).req, 9u);
  s.clear(), wire::append_error(s, 10, "full");
  f = parse_whole(s);
  EXPECT_EQ(f.type, FrameType::Error);
  EXPECT_EQ(f.value, "full");
  EXPECT_EQ(catch_error([] { std::string o; wire::append_get(o, 1, std::string(1025, 'k')); }).code(),
            dcclInvalidArgument);
}

// HELLO carries the claim (namespace, pid, host, flags) and its proof, which
// covers every field and both nonces under a label per direction: changing any
// of them, or the secret, gives another proof.
TEST(Wire, HelloCarriesTheClaimAndItsProof) {
  const auto secret = random_secret();
  const wire::Nonce sn = wire::fresh_nonce();
  wire::Hello h;
  h.nonce = wire::fresh_nonce();
  h.rank = 2;
  h.nranks = 4;
  h.flags = wire::kHelloWatch;
  h.pid = 4242;
  h.ns = "env0";
  h.host = "node7";
  h.proof = wire::hello_proof(secret, wire::Prover::Client, sn, h);
  std::string s;
  wire::append_hello(s, h);
  auto f = parse_whole(s);
  EXPECT_EQ(f.version, wire::kProtocolVersion);
  EXPECT_EQ(f.nonce, h.nonce);
  EXPECT_EQ(f.proof, h.proof);
  EXPECT_EQ(f.rank, 2);
  EXPECT_EQ(f.nranks, 4);
  EXPECT_EQ(f.flags, wire::kHelloWatch);
  EXPECT_EQ(f.pid, 4242u);
  EXPECT_EQ(f.ns, "env0");
  EXPECT_EQ(f.host, "node7");
  const wire::Proof good = h.proof;
  auto changed = [&](auto edit) {
    wire::Hello o = h;
    auto sec = secret;
    auto nonce = sn;
    edit(o, sec, nonce);
    return !wire::proof_ok(good, wire::hello_proof(sec, wire::Prover::Client, nonce, o));
  };
  EXPECT_FALSE(changed([](wire::Hello&, auto&, auto&) {}));
  EXPECT_TRUE(changed([](wire::Hello&, auto& sec, auto&) { sec[15] ^= 1; }));
  EXPECT_TRUE(changed([](wire::Hello&, auto&, auto& n) { n[0] ^= 1; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) { o.nonce[7] ^= 1; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) { o.rank = 1; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) { o.nranks = 5; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) { o.flags = 0; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) { o.pid = 4243; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) { o.ns = "env1"; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) { o.host = "node8"; }));
  EXPECT_TRUE(changed([](wire::Hello& o, auto&, auto&) {  // the same bytes, split otherwise
    o.ns = "env";
    o.host = "0node7";
  }));
  EXPECT_FALSE(wire::proof_ok(good, wire::hello_proof(secret, wire::Prover::Store, sn, h)));
  // Bounds: namespace and host name lengths, and a namespace length past the frame.
  h.ns = std::string(wire::kMaxNamespace + 1, 'n');
  EXPECT_EQ(catch_error([&] { std::string o; wire::append_hello(o, h); }).code(), dcclInvalidArgument);
  h.ns = "ns";
  s.clear(), wire::append_hello(s, h);
  s[5 + 68] = 0x7f;  // namespace length, high byte
  expect_malformed(s, "HELLO namespace length beyond the frame");
  s.clear(), wire::append_challenge(s, sn);
  s += "xx";  // a CHALLENGE with extra bytes
  s[3] = static_cast<char>(s[3] + 2);
  expect_malformed(s, "CHALLENGE of the wrong size");
}

TEST(Wire, Malformed) {
  EXPECT_EQ(wire::parse_frame(nullptr, 0).status, wire::ParseStatus::NeedMore);
  expect_malformed(std::string(4, '\0'), "zero length");
  expect_malformed("\xff\xff\xff\xff", "4 GiB length, header only");
  expect_malformed(header(wire::kMaxFrameLen + 1, 4), "just over the bound");
  expect_malformed(header(9, 0), "type 0");
  expect_malformed(header(9, 200), "unknown type");
  expect_malformed(header(10, 1), "HELLO of the wrong size");
  expect_malformed(header(1 + 4, 8), "OK too short");
  expect_malformed(header(1 + 8 + 1025, 5), "GET key over 1 KiB");
  expect_malformed(header(1 + 1025, 3), "REFUSED reason over 1 KiB");
  expect_malformed(header(1 + 8 + (16u << 20) + 1, 7), "VALUE over 16 MiB");
  std::string hello;
  wire::append_hello(hello, {}, {}, 5, 4);
  expect_malformed(hello, "rank >= nranks");
  hello.clear(), wire::append_hello(hello, {}, {}, 0, 0);
  expect_malformed(hello, "nranks 0");
  std::string set = header(1 + 12 + 4, 4) + std::string(8, '\0') + std::string("\0\0\0\x05", 4) + "abcd";
  expect_malformed(set, "SET key length beyond the frame");
  set = header(1 + 12 + 2000, 4) + std::string(8, '\0') + std::string("\0\0\x07\xd0", 4) + std::string(2000, 'k');
  expect_malformed(set, "SET key over 1 KiB");
  std::mt19937 rng(1);  // random input: never crashes, never over-consumes
  for (int i = 0; i < 20000; ++i) {
    std::string b(rng() % 48, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    if (!b.empty() && i % 2) b[0] = 0;  // make plausible lengths common
    auto r = parse(b);
    if (r.status == wire::ParseStatus::Ok) {
      EXPECT_LE(r.consumed, b.size());
    }
  }
}

TEST(Store, AllgatherEightRanksManyRounds) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  constexpr int n = 8;
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        Bootstrap b(id, r, n, 20s);
        for (int k = 0; k < 5; ++k) {
          auto all = b.allgather(blob(r, k));
          for (int q = 0; q < n; ++q)
            if (all[static_cast<size_t>(q)] != blob(q, k)) ++failures;
          b.barrier();
        }
        const int next = (r + 1) % n;
        b.set(std::string("from/").append(std::to_string(r)), std::to_string(r * r));
        if (b.get(std::string("from/").append(std::to_string(next))) != std::to_string(next * next))
          ++failures;
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Store, NamespacesDoNotInterfere) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (std::string ns : {"commA", "commB"})
    for (int r = 0; r < 3; ++r)
      ts.emplace_back([&, ns, r] {
        try {
          Bootstrap b(id, r, 3, 20s, nullptr, ns);
          b.set("shared", ns);
          for (int k = 0; k < 4; ++k) {
            auto all = b.allgather(ns + std::to_string(r) + "/" + std::to_string(k));
            for (int q = 0; q < 3; ++q)
              if (all[static_cast<size_t>(q)] != ns + std::to_string(q) + "/" + std::to_string(k)) ++failures;
          }
          b.barrier();
          if (b.get("shared") != ns) ++failures;
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
        }
      });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Store, WrongSecretIsRefused) {
  auto server = local_server();
  UniqueIdData bad = server->id();
  bad.secret[0] ^= 1;
  Error e = catch_error([&] { Bootstrap b(bad, 2, 4, 2s); });
  EXPECT_EQ(e.code(), dcclRemoteError);
  EXPECT_NE(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
  expect_serves(server->id());
}

TEST(Store, BadPeersAreClosed) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  int fd = raw_connect(id);  // text garbage
  send_bytes(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(closed_by_server(fd));
  close(fd);
  fd = raw_connect(id);  // a frame announcing 4 GiB
  send_bytes(fd, "\xff\xff\xff\xff\x04");
  EXPECT_TRUE(closed_by_server(fd));
  close(fd);
  fd = raw_connect(id);  // a valid frame, but not HELLO
  std::string s;
  wire::append_get(s, 1, "k");
  send_bytes(fd, s);
  EXPECT_TRUE(closed_by_server(fd));
  close(fd);
  fd = raw_connect(id);  // a truncated HELLO, then we close
  s.clear(), wire::append_hello(s, id.secret, {}, 0, 1);
  send_bytes(fd, s.substr(0, 10));
  close(fd);
  fd = raw_connect(id);  // garbage after a good HELLO
  s.clear(), wire::append_hello(s, id.secret, read_challenge(fd), 0, 1);
  send_bytes(fd, s + std::string("\x00\x00\x00\x09\x63xxxxxxxx", 13));
  EXPECT_TRUE(closed_by_server(fd));
  close(fd);
  fd = raw_connect(id);  // 4 GiB announced after a good HELLO
  s.clear(), wire::append_hello(s, id.secret, read_challenge(fd), 0, 1);
  send_bytes(fd, s + "\xff\xff\xff\xff\x04");
  EXPECT_TRUE(closed_by_server(fd));
  close(fd);
  expect_serves(id);
}

TEST(Store, LimitsAreEnforced) {
  StoreLimits lim;
  lim.max_total_bytes = 1 << 20;
  lim.max_connections = 2;
  lim.hello_timeout = 200ms;
  auto server = local_server(lim);
  const UniqueIdData id = server->id();
  {
    Bootstrap a(id, 0, 2, 2s);
    a.set("big1", std::string(600 << 10, 'x'));
    Error e = catch_error([&] { a.set("big2", std::string(600 << 10, 'y')); });
    EXPECT_EQ(e.code(), dcclRemoteError);
    EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
    a.set("big1", "small");  // overwriting frees the space; the connection is still fine
    a.set("big2", std::string(600 << 10, 'y'));
    Bootstrap b(id, 1, 2, 2s);
    // A third authenticated connection is turned away as busy; the client retries
    // until its timeout and then names the store's reason.
    auto t0 = Clock::now();
    e = catch_error([&] { Bootstrap c(id, 0, 1, 300ms, nullptr, "other"); });
    EXPECT_EQ(e.code(), dcclTimeout);
    EXPECT_LT(Clock::now() - t0, 1500ms);
    EXPECT_NE(std::string(e.what()).find("too many connections"), std::string::npos) << e.what();
  }
  std::this_thread::sleep_for(100ms);  // let the store see a and b go
  int fd = raw_connect(id);  // silent after connecting: closed after hello_timeout
  auto t0 = Clock::now();
  EXPECT_TRUE(closed_by_server(fd));
  EXPECT_LT(Clock::now() - t0, 1500ms);
  close(fd);
  expect_serves(id);
}

TEST(Store, GetTimesOutAndConnectionStaysUsable) {
  auto server = local_server();
  Bootstrap b(server->id(), 0, 1, 300ms, nullptr, "ns1");
  auto t0 = Clock::now();
  Error e = catch_error([&] { b.get("missing"); });
  auto took = Clock::now() - t0;
  EXPECT_EQ(e.code(), dcclTimeout);
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 1s);
  EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  b.set("missing", "late");  // answers the parked GET too: its late VALUE must be dropped
  b.set("other", "v");
  EXPECT_EQ(b.get("other"), "v");
  EXPECT_EQ(b.get("missing"), "late");
}

TEST(Store, ConnectToNobodyTimesOut) {
  UniqueIdData id{"127.0.0.1", unused_port(), random_secret(), ""};
  auto t0 = Clock::now();
  Error e = catch_error([&] { Bootstrap b(id, 1, 2, 300ms); });
  EXPECT_EQ(e.code(), dcclTimeout);
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
}

TEST(Store, ClientWaitsForLateServer) {
  auto secret = random_secret();
  UniqueIdData id{"127.0.0.1", unused_port(), secret, ""};
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    Bootstrap root(id, 0, 2, 5s, StoreServer::start("127.0.0.1", id.port, secret));
    EXPECT_EQ(root.allgather("zero")[1], "one");
  });
  Bootstrap b(id, 1, 2, 5s);
  EXPECT_EQ(b.allgather("one")[0], "zero");
  late.join();
}

TEST(Store, ParkAndTakeAndPromptShutdown) {
  auto server = local_server();
  const UniqueIdData id = server->id();
  park_server(std::move(server));
  UniqueIdData other = id;
  other.secret[3] ^= 1;
  EXPECT_EQ(take_parked_server(other), nullptr);
  server = take_parked_server(id);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(take_parked_server(id), nullptr);
  Bootstrap idle(id, 0, 2, 2s);  // connected but idle: does not hold up shutdown
  auto t0 = Clock::now();
  server.reset();
  EXPECT_LT(Clock::now() - t0, 500ms);
  EXPECT_EQ(catch_error([&] { idle.get("x"); }).code(), dcclRemoteError);
}

TEST(Store, BindAddressFromInterface) {
  setenv("DCCL_SOCKET_IFNAME", "lo", 1);
  auto s = StoreServer::start("", 0, random_secret());
  EXPECT_EQ(s->id().host, "127.0.0.1");
  expect_serves(s->id());
  setenv("DCCL_SOCKET_IFNAME", "no-such-if0", 1);
  Error e = catch_error([] { StoreServer::start("", 0, random_secret()); });
  EXPECT_EQ(e.code(), dcclInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("no-such-if0"), std::string::npos) << e.what();
  unsetenv("DCCL_SOCKET_IFNAME");
  s = StoreServer::start("", 0, random_secret());  // default-route interface or 127.0.0.1
  expect_serves(s->id());
  try {  // IPv6, where the host has it
    s = StoreServer::start("::1", 0, random_secret());
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback: " << e.what();
  }
  EXPECT_EQ(s->id().host, "::1");
  expect_serves(s->id());
}
