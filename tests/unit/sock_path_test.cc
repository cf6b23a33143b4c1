// DirectCCL's socket path (net/sock/sock_path.hpp) through the transport: unexpected
// messages, matching on tag and length, which sizes take it, a peer that goes away,
// the published address. The ByProvider suite of transport_test runs its exchanges
// over it too ("tcpsock").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backoff.hpp"
#include "core/error.hpp"
#include "net/blob.hpp"
#include "net/sock/sock_path.hpp"
#include "net_ranks.hpp"

namespace dccl::net {
namespace {

using namespace dccl::net::nettest;
using Clock = std::chrono::steady_clock;

// Sends arrive before their receives are posted (the receiver waits at a barrier):
// each is kept as an unexpected message and taken by the receive with its tag and
// length, whatever order the receives come in. Sizes around the direct-read bound.
TEST(SockPath, UnexpectedMessagesMatchTagAndLength) {
  run_ranks(2, opts("tcpsock"), [](Ctx& c) {
    const std::vector<size_t> lens = {0, 8, 4095, 4096, 4097, 70000, (size_t(1) << 20) + 3};
    if (c.rank == 0) {
      std::vector<std::vector<uint8_t>> out(lens.size());
      std::vector<Request> rs(lens.size());
      std::vector<Request*> all;
      for (size_t k = 0; k < lens.size(); ++k) {  // one tag for all: only the length tells them apart
        out[k].resize(lens[k]);
        fill(out[k], 0, static_cast<int>(k));
        c.t->isend(1, out[k].data(), lens[k], 77, &rs[k]);
        all.push_back(&rs[k]);
      }
      c.t->wait(all.data(), all.size(), "sends");  // complete once the kernel holds them
      for (size_t k = 0; k < lens.size(); ++k) CHILD_CHECK(rs[k].bytes == lens[k] && !rs[k].failed);
      c.barrier("sent");
      return;
    }
    c.barrier("sent");
    std::vector<std::vector<uint8_t>> in(lens.size());
    std::vector<Request> rr(lens.size());
    std::vector<Request*> all;
    for (size_t k = lens.size(); k-- > 0;) {  // reverse order
      in[k].assign(lens[k] + 1, 0xee);
      c.t->irecv(0, in[k].data(), lens[k], 77, &rr[k]);
      all.push_back(&rr[k]);
    }
    c.t->wait(all.data(), all.size(), "receives");
    for (size_t k = 0; k < lens.size(); ++k) {
      CHILD_CHECK(rr[k].bytes == lens[k]);
      CHILD_CHECK(verify(in[k], lens[k], 0, static_cast<int>(k)) && in[k][lens[k]] == 0xee);
    }
  });
}

// A receive posted while its (large) message is still arriving as unexpected takes
// it over; many small messages queued behind it come through in order.
TEST(SockPath, ReceivePostedMidMessage) {
  run_ranks(2, opts("tcpsock"), [](Ctx& c) {
    const size_t big = size_t(24) << 20;
    if (c.rank == 0) {
      std::vector<uint8_t> out(big);
      fill(out, 0, 5);
      std::vector<uint32_t> small(200);
      std::vector<Request> rs(201);
      std::vector<Request*> all;
      c.t->isend(1, out.data(), big, 3, &rs[0]);
      all.push_back(&rs[0]);
      for (int k = 0; k < 200; ++k) {
        small[k] = 1000 + k;
        c.t->isend(1, &small[k], 4, 4, &rs[k + 1]);
        all.push_back(&rs[k + 1]);
      }
      c.t->wait(all.data(), all.size(), "sends");
      return;
    }
    std::vector<uint8_t> in(big);
    std::vector<uint32_t> small(200);
    std::vector<Request> rr(201);
    for (int i = 0; i < 50; ++i) c.t->progress();  // part of the big message arrives unexpected
    c.t->irecv(0, in.data(), big, 3, &rr[0]);
    for (int k = 0; k < 200; ++k) c.t->irecv(0, &small[k], 4, 4, &rr[k + 1]);
    std::vector<Request*> all;
    for (auto& r : rr) all.push_back(&r);
    c.t->wait(all.data(), all.size(), "receives");
    CHILD_CHECK(verify(in, big, 0, 5));
    for (int k = 0; k < 200; ++k) CHILD_CHECK(small[k] == uint32_t(1000 + k));
  });
}

// While a large receive is posted the path reads headers alone, so that the large
// payload lands in place: small messages around it (other tags, arriving first and
// after) still come through whole, as unexpected, and in order.
TEST(SockPath, LargeReceivePostedFirst) {
  run_ranks(2, opts("tcpsock"), [](Ctx& c) {
    const size_t big = 100000, n_small = 6;
    if (c.rank == 0) {
      c.barrier("posted");
      std::vector<uint8_t> out(big);
      fill(out, 0, 9);
      std::vector<uint64_t> small(n_small);
      std::vector<Request> rs(n_small + 1);
      std::vector<Request*> all;
      for (size_t k = 0; k < n_small; ++k) {
        small[k] = 0x5150000 + k;
        if (k == n_small / 2) {
          c.t->isend(1, out.data(), big, 1, &rs[n_small]);
          all.push_back(&rs[n_small]);
        }
        c.t->isend(1, &small[k], 8, 2, &rs[k]);
        all.push_back(&rs[k]);
      }
      c.t->wait(all.data(), all.size(), "sends");
      return;
    }
    std::vector<uint8_t> in(big + 1, 0xee);
    Request rb;
    c.t->irecv(0, in.data(), big, 1, &rb);
    c.barrier("posted");
    Request* pb = &rb;
    c.t->wait(&pb, 1, "large receive");
    CHILD_CHECK(rb.bytes == big && verify(in, big, 0, 9) && in[big] == 0xee);
    std::vector<uint64_t> small(n_small, 0);
    std::vector<Request> rr(n_small);
    std::vector<Request*> all;
    for (size_t k = 0; k < n_small; ++k) {
      c.t->irecv(0, &small[k], 8, 2, &rr[k]);
      all.push_back(&rr[k]);
    }
    c.t->wait(all.data(), all.size(), "small receives");
    for (size_t k = 0; k < n_small; ++k) CHILD_CHECK(rr[k].bytes == 8 && small[k] == 0x5150000 + k);
  });
}

// Messages above DCCL_NET_SOCK_BYTES go through libfabric, those up to it through
// the sockets: the socket path's byte counts say which.
TEST(SockPath, SizeLimitSplitsTraffic) {
  TransportOptions o = opts("tcp");
  o.sock_bytes = 4096;
  run_ranks(2, o, [](Ctx& c) {
    int peer = 1 - c.rank;
    for (size_t len : {size_t(4096), size_t(4097)}) {
      std::vector<uint8_t> out(len), in(len);
      fill(out, c.rank, 2);
      Request rs, rr;
      send_recv(c, peer, out.data(), peer, in.data(), len, 6, "exchange", rs, rr);
      CHILD_CHECK(verify(in, len, peer, 2));
    }
    // One line per rail ("socket path on eth0: ..."), or one line without rails.
    const std::vector<std::string> lines = c.t->rail_counters();
    bool found = false;
    const std::string want = ": sent 4096 bytes, received 4096 bytes";
    for (const std::string& l : lines)
      if (l.rfind("socket path", 0) == 0 && l.size() > want.size() && l.compare(l.size() - want.size(), want.size(), want) == 0)
        found = true;
    if (!found)
      for (const std::string& l : lines) fprintf(stderr, "counter: %s\n", l.c_str());
    CHILD_CHECK(found);
  });
}

// A wait whose message has already arrived in the socket (read by the wait's own
// progress) returns without an idle step: no yield, no nap after the progress that
// completed it. With no spin budget (ranks sharing a CPU, busy CPUs) such a step
// was a whole nap (up to 1 ms) per message.
TEST(SockPath, WaitTakesNoIdleStepForAMessageThatArrived) {
  TransportOptions o = opts("tcpsock", 20000);
  o.spin_us = 0;  // no spin: the first idle step yields or naps
  run_ranks(2, o, [](Ctx& c) {
    for (int k = 0; k < 20; ++k) {
      const std::string round = std::to_string(k);
      uint64_t v = 0;
      Request r;
      if (c.rank == 1) c.t->irecv(0, &v, 8, static_cast<uint64_t>(k), &r);
      exchange(c.dir, "posted" + round, c.rank, c.n, "x");  // no progress meanwhile
      if (c.rank == 0) {
        v = 1000 + static_cast<uint64_t>(k);
        c.t->isend(1, &v, 8, static_cast<uint64_t>(k), &r);
        c.t->wait(r, "send");
      }
      exchange(c.dir, "sent" + round, c.rank, c.n, "x");
      if (c.rank == 0) continue;
      usleep(2000);  // loopback has long delivered it
      const uint64_t before = core::Backoff::idle_steps();
      c.t->wait(r, "recv of a message that arrived");
      CHILD_CHECK(v == 1000 + static_cast<uint64_t>(k) && r.bytes == 8);
      CHILD_CHECK(core::Backoff::idle_steps() == before);
    }
  });
}

// A peer that exits fails the receive waiting for it at once, naming the peer,
// instead of waiting out the timeout; later posts to it fail too.
TEST(SockPath, PeerExitFailsPendingReceive) {
  run_ranks(2, opts("tcpsock", 20000), [](Ctx& c) {
    if (c.rank == 0) {
      c.barrier("ready");
      _exit(0);  // closes its sockets; the harness counts exit code 0
    }
    uint64_t v = 0;
    Request r;
    c.t->irecv(0, &v, 8, 1, &r);
    c.barrier("ready");
    const auto t0 = Clock::now();
    try {
      c.t->wait(r, "recv from a peer that exits");
      CHILD_CHECK(false);
    } catch (const core::Error& e) {
      fprintf(stderr, "expected: %s\n", e.what());
      CHILD_CHECK(e.code() == dcclRemoteError);
      CHILD_CHECK(std::string(e.what()).find("rank 0 closed its connection") != std::string::npos);
    }
    CHILD_CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    Request s;
    c.t->isend(0, &v, 8, 2, &s);
    CHILD_CHECK(s.done && s.failed);
    _exit(0);  // rank 0 is gone: skip the closing barrier
  });
}

// A rank that sends and closes at once (its transport destroyed the moment its sends
// completed), a peer that receives later: every message that arrived before the
// end of the stream is delivered, in whatever order the receives come, although
// the peer read them, and the end, before any receive for them was posted.
TEST(SockPath, CloseRightAfterSendDeliversWhatArrived) {
  run_ranks(2, opts("tcpsock", 20000), [](Ctx& c) {
    const size_t big = 16 << 10;
    if (c.rank == 0) {
      std::vector<uint8_t> a(big), b(8);
      fill(a, 0, 1);
      fill(b, 0, 2);
      Request ra, rb;
      c.t->isend(1, a.data(), big, 2, &ra);
      c.t->isend(1, b.data(), b.size(), 1, &rb);
      Request* both[] = {&ra, &rb};
      c.t->wait(both, 2, "sends");
      c.t.reset();  // closes the connection: the messages are in the kernels' hands only
      c.barrier("closed");
      _exit(0);
    }
    c.barrier("closed");
    // A receive of a tag never sent: it fails once the end of the stream is read,
    // after both messages (kept as unexpected ones).
    std::vector<uint8_t> a(big), b(8);
    Request rc;
    c.t->irecv(0, b.data(), b.size(), 3, &rc);
    try {
      c.t->wait(rc, "a message never sent");
      CHILD_CHECK(false);
    } catch (const core::Error& e) {
      CHILD_CHECK(std::string(e.what()).find("rank 0 closed its connection") != std::string::npos);
    }
    Request ra, rb;
    c.t->irecv(0, b.data(), b.size(), 1, &rb);
    c.t->wait(rb, "the small message");
    CHILD_CHECK(rb.bytes == 8 && verify(b, 8, 0, 2));
    c.t->irecv(0, a.data(), big, 2, &ra);
    c.t->wait(ra, "the larger message");
    CHILD_CHECK(ra.bytes == big && verify(a, big, 0, 1));
    _exit(0);  // rank 0 is gone: skip the closing barrier
  });
}

// A rank closes right after a large send completed, its tail still in its kernel
// (the receiver has not read yet), with a message to it lying unread: a plain
// close() then resets the connection and drops that tail. The close hands the
// peer every byte first. These barriers do not progress the transport, so that
// nothing is read meanwhile.
TEST(SockPath, CloseWithUnreadDataKeepsTheSentTail) {
  run_ranks(2, opts("tcpsock", 20000), [](Ctx& c) {
    const size_t big = 2 << 20;  // the kernels take it whole while nobody reads
    auto quiet = [&c](const char* key) { exchange(c.dir, key, c.rank, c.n, "x"); };
    if (c.rank == 1) {
      quiet("sent");
      uint64_t never_read = 42;
      Request s;
      c.t->isend(0, &never_read, 8, 9, &s);
      CHILD_CHECK(s.done && !s.failed);
      quiet("unread");
      usleep(300 * 1000);  // the sender closes meanwhile
      std::vector<uint8_t> in(big);
      Request r;
      c.t->irecv(0, in.data(), big, 3, &r);
      c.t->wait(r, "the large message");
      CHILD_CHECK(r.bytes == big && verify(in, big, 0, 4));
      _exit(0);
    }
    std::vector<uint8_t> out(big);
    fill(out, 0, 4);
    Request s;
    c.t->isend(1, out.data(), big, 3, &s);
    c.t->wait(s, "the large message");
    quiet("sent");
    quiet("unread");
    usleep(50 * 1000);  // the peer's message arrives, unread
    c.t.reset();
    _exit(0);
  });
}

TEST(SockPath, AddressAndBlob) {
  SockPath p(0, 1234, std::chrono::milliseconds(1000), {"127.0.0.1"});
  const std::string a = p.address();
  EXPECT_EQ(a.rfind("sock2 1234 ", 0), 0u) << a;
  EXPECT_NE(a.find(" 127.0.0.1:"), std::string::npos) << a;
  Blob b;
  b.host = "h";
  b.boot_id = "b";
  b.pid = 1;
  b.sock = a;
  EXPECT_EQ(Blob::decode(b.encode(), "test").sock, a);
  b.sock.clear();
  EXPECT_EQ(Blob::decode(b.encode(), "test").sock, "");
  // A malformed peer address is refused by name.
  SockPath q(1, 1234, std::chrono::milliseconds(500), {"127.0.0.1"});
  try {
    q.connect({{0, "sock2 99 zz"}, {-1, ""}});
    ADD_FAILURE() << "no error";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), dcclInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("rank 0's socket address"), std::string::npos) << e.what();
  }
  // A peer that never answers: a timeout naming it.
  SockPath r(1, 1234, std::chrono::milliseconds(300), {"127.0.0.1"});
  try {
    r.connect({{0, "sock2 99 1 0 127.0.0.1:1"}, {-1, ""}});  // rank 0 < 1: it would connect to us
    ADD_FAILURE() << "no error";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), dcclTimeout);
    EXPECT_NE(std::string(e.what()).find("no connection with rank(s) 0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sockaddr_ip(std::string(3, 'x')), "");
}

// connect() ends by the caller's deadline (init's), not a timeout of its own after it.
TEST(SockPath, ConnectEndsByTheCallersDeadline) {
  SockPath r(1, 1234, std::chrono::milliseconds(20000), {"127.0.0.1"});
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.connect({{0, "sock2 99 1 0 127.0.0.1:1"}, {-1, ""}}, false, t0 + std::chrono::milliseconds(300));
    ADD_FAILURE() << "no error";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), dcclTimeout);
    EXPECT_NE(std::string(e.what()).find("no connection with rank(s) 0"), std::string::npos) << e.what();
  }
  // Well before the path's own 20 s: the deadline, and a margin for a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// Request::up_to (NCCL's receive semantics): a receive takes a message of at most
// its length and reports the length that came; messages arrive before and after
// their receives. On the socket path and on the fabric (shm), in order.
void up_to_exchange(const std::string& prov) {
  run_ranks(2, opts(prov), [](Ctx& c) {
    const std::vector<size_t> lens = {0, 8, 5000, 70000, 8, 70000};
    const size_t cap = 100000;
    if (c.rank == 0) {
      std::vector<std::vector<uint8_t>> out(lens.size());
      std::vector<Request> rs(lens.size());
      std::vector<Request*> all;
      for (size_t k = 0; k < lens.size(); ++k) {
        out[k].resize(lens[k]);
        fill(out[k], 0, static_cast<int>(k));
        c.t->isend(1, out[k].data(), lens[k], 5, &rs[k]);
        all.push_back(&rs[k]);
        if (k == 2) c.barrier("half");  // the rest after the receives are posted
      }
      c.t->wait(all.data(), all.size(), "sends");
      return;
    }
    c.barrier("half");
    std::vector<std::vector<uint8_t>> in(lens.size());
    std::vector<Request> rr(lens.size());
    std::vector<Request*> all;
    for (size_t k = 0; k < lens.size(); ++k) {
      in[k].assign(cap, 0xee);
      rr[k].up_to = true;
      c.t->irecv(0, in[k].data(), cap, 5, &rr[k]);
      all.push_back(&rr[k]);
    }
    c.t->wait(all.data(), all.size(), "receives");
    for (size_t k = 0; k < lens.size(); ++k) {
      CHILD_CHECK(rr[k].bytes == lens[k] && !rr[k].failed);
      CHILD_CHECK(verify(in[k], lens[k], 0, static_cast<int>(k)) && in[k][lens[k]] == 0xee);
    }
  });
}

TEST(SockPath, ReceiveUpToItsLength) { up_to_exchange("tcpsock"); }
TEST(SockPath, ReceiveUpToItsLengthOnTheFabric) { up_to_exchange("shm"); }

}  // namespace
}  // namespace dccl::net
