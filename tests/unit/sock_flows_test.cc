// The socket path with several flows per pair (net/sock/sock_path.hpp,
// net/sock/sock_spray.cc), over loopback between processes: large messages sprayed
// in chunks and placed by offset, small ones whole and in order among them,
// receives posted before, during and after their message arrives, and a flow that
// dies failing the pair by name instead of hanging.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "net/sock/sock_path.hpp"
#include "net/sock/spray.hpp"
#include "net_ranks.hpp"
#include "sock_pair.hpp"

namespace dccl::net {
namespace {

using namespace dccl::net::nettest;
using Clock = std::chrono::steady_clock;

TransportOptions flows_opts(int flows) {
  TransportOptions o = opts("tcpsock");
  o.flows = flows;
  return o;
}

// Two SockPaths in one process connect with four flows each way asked: the pair has
// four; on loopback with the automatic setting, one.
TEST(SockFlows, PairTakesTheFlowsBothAskFor) {
  for (int ask : {4, 0}) {
    SockPath a(0, 1 << 20, std::chrono::milliseconds(10000), {"127.0.0.1"});
    SockPath b(1, 1 << 20, std::chrono::milliseconds(10000), {"127.0.0.1"});
    a.set_flows(ask);
    b.set_flows(ask);
    nettest::connect_pair(a, b);
    EXPECT_EQ(a.flows(1), ask == 0 ? 1 : ask);
    EXPECT_EQ(b.flows(0), ask == 0 ? 1 : ask);
  }
}

// A sprayed message goes over every flow (each carries some of it, together all of
// it) and lands whole; a small one goes on the lead flow alone.
TEST(SockFlows, ChunksSpreadOverEveryFlow) {
  SockPath a(0, uint64_t{1} << 30, std::chrono::milliseconds(10000), {"127.0.0.1"});
  SockPath b(1, uint64_t{1} << 30, std::chrono::milliseconds(10000), {"127.0.0.1"});
  a.set_flows(4);
  b.set_flows(4);
  nettest::connect_pair(a, b);
  const size_t big = (size_t{32} << 20) + 5;
  std::vector<uint8_t> out(big), in(big, 0);
  fill(out, 0, 4);
  Request rs, rr;
  rs.peer = rr.peer = -1;
  b.post(false, 0, in.data(), big, 3, &rr);
  a.post(true, 1, out.data(), big, 3, &rs);
  const auto until = Clock::now() + std::chrono::seconds(20);
  while ((!rs.done || !rr.done) && Clock::now() < until) {
    a.progress(true);
    b.progress(true);
  }
  ASSERT_TRUE(rs.done && rr.done);
  EXPECT_FALSE(rs.failed || rr.failed) << rs.error << rr.error;
  EXPECT_EQ(rr.bytes, big);
  EXPECT_TRUE(verify(in, big, 0, 4));
  std::vector<uint64_t> sent = a.flow_bytes_sent(1);
  ASSERT_EQ(sent.size(), 4u);
  uint64_t sum = 0;
  for (size_t k = 0; k < sent.size(); ++k) {
    EXPECT_GT(sent[k], 0u) << "flow " << k;
    sum += sent[k];
  }
  EXPECT_EQ(sum, big);
  uint64_t v = 0x1234, w = 0;
  Request ss, sr;
  b.post(false, 0, &w, 8, 4, &sr);
  a.post(true, 1, &v, 8, 4, &ss);
  while ((!ss.done || !sr.done) && Clock::now() < until) {
    a.progress(true);
    b.progress(true);
  }
  EXPECT_TRUE(ss.done && sr.done && w == v);
  EXPECT_EQ(a.flow_bytes_sent(1)[0], sent[0] + 8);  // the lead flow
}

// Sizes around the spray bound and the chunk size, each followed by a small message
// with the same tag: every message whole, in call order, whether its receive was
// posted before it came (the second round) or after (the first: read in as an
// unexpected message while the receiver progresses).
TEST(SockFlows, SprayedMessagesKeepOrderAndBytes) {
  run_ranks(2, flows_opts(4), [](Ctx& c) {
    const std::vector<size_t> lens = {spray::kSprayMinBytes - 1, spray::kSprayMinBytes, 300000, (size_t{1} << 20) + 3,
                                      size_t{9} << 20, 8, size_t{5} << 20, 4096};
    for (int round = 0; round < 2; ++round) {
      const bool early_recv = round == 1;
      if (c.rank == 0) {
        if (early_recv) c.barrier("posted");
        std::vector<std::vector<uint8_t>> out(2 * lens.size());
        std::vector<Request> rs(out.size());
        std::vector<Request*> all;
        for (size_t k = 0; k < out.size(); ++k) {
          out[k].resize(k % 2 ? 16 : lens[k / 2]);
          fill(out[k], 0, static_cast<int>(k + 40 * round));
          c.t->isend(1, out[k].data(), out[k].size(), 9, &rs[k]);
          all.push_back(&rs[k]);
        }
        if (!early_recv) c.barrier("posted");
        c.t->wait(all.data(), all.size(), "sends");
        for (size_t k = 0; k < out.size(); ++k) CHILD_CHECK(rs[k].bytes == out[k].size() && !rs[k].failed);
        c.barrier("round");
        continue;
      }
      if (!early_recv) {
        c.barrier("posted");
        const auto until = Clock::now() + std::chrono::milliseconds(100);
        while (Clock::now() < until) c.t->progress();  // the messages arrive unexpected
      }
      std::vector<std::vector<uint8_t>> in(2 * lens.size());
      std::vector<Request> rr(in.size());
      std::vector<Request*> all;
      for (size_t k = 0; k < in.size(); ++k) {
        const size_t len = k % 2 ? 16 : lens[k / 2];
        in[k].assign(len + 1, 0xee);
        c.t->irecv(0, in[k].data(), len, 9, &rr[k]);
        all.push_back(&rr[k]);
      }
      if (early_recv) c.barrier("posted");
      c.t->wait(all.data(), all.size(), "receives");
      for (size_t k = 0; k < in.size(); ++k) {
        const size_t len = in[k].size() - 1;
        CHILD_CHECK(rr[k].bytes == len && !rr[k].failed);
        CHILD_CHECK(verify(in[k], len, 0, static_cast<int>(k + 40 * round)) && in[k][len] == 0xee);
      }
      c.barrier("round");
    }
  });
}

// Both ranks send large messages to each other at once, on several tags, the
// receives posted in reverse tag order: each lands whole in its own buffer.
TEST(SockFlows, BothWaysAtOnce) {
  run_ranks(2, flows_opts(3), [](Ctx& c) {
    const int peer = 1 - c.rank;
    const size_t len = (size_t{6} << 20) + 17;
    const int tags = 4;
    std::vector<std::vector<uint8_t>> out(tags), in(tags);
    std::vector<Request> rs(tags), rr(tags);
    std::vector<Request*> all;
    for (int t = tags; t-- > 0;) {
      in[t].assign(len, 0);
      c.t->irecv(peer, in[t].data(), len, 100 + t, &rr[t]);
      all.push_back(&rr[t]);
    }
    for (int t = 0; t < tags; ++t) {
      out[t].resize(len);
      fill(out[t], c.rank, t);
      c.t->isend(peer, out[t].data(), len, 100 + t, &rs[t]);
      all.push_back(&rs[t]);
    }
    c.t->wait(all.data(), all.size(), "exchange");
    for (int t = 0; t < tags; ++t) CHILD_CHECK(rr[t].bytes == len && verify(in[t], len, peer, t));
  });
}

// DCCL_NET_FLOW_WINDOW_BYTES below one chunk (the transport's option, as init passes
// it): a flow takes its next chunk only once its queue drained below the window, and
// every message still lands whole, both ways at once.
TEST(SockFlows, WindowBelowAChunkStillCarriesEverything) {
  TransportOptions o = flows_opts(4);
  o.flow_window = 4096;
  run_ranks(2, o, [](Ctx& c) {
    const int peer = 1 - c.rank;
    const std::vector<size_t> lens = {(size_t{8} << 20) + 3, spray::kSprayMinBytes, 12};
    std::vector<std::vector<uint8_t>> out(lens.size()), in(lens.size());
    std::vector<Request> rs(lens.size()), rr(lens.size());
    std::vector<Request*> all;
    for (size_t k = 0; k < lens.size(); ++k) {
      in[k].assign(lens[k], 0);
      c.t->irecv(peer, in[k].data(), lens[k], 200 + static_cast<int>(k), &rr[k]);
      out[k].resize(lens[k]);
      fill(out[k], c.rank, static_cast<int>(k));
      c.t->isend(peer, out[k].data(), lens[k], 200 + static_cast<int>(k), &rs[k]);
      all.push_back(&rr[k]);
      all.push_back(&rs[k]);
    }
    c.t->wait(all.data(), all.size(), "exchange");
    for (size_t k = 0; k < lens.size(); ++k)
      CHILD_CHECK(rr[k].bytes == lens[k] && !rr[k].failed && verify(in[k], lens[k], peer, static_cast<int>(k)));
  });
}

// A receive posted while its sprayed message is arriving as unexpected takes it over:
// the bytes still to come go on into the early buffer and are copied at the end.
TEST(SockFlows, ReceivePostedWhileChunksArrive) {
  run_ranks(2, flows_opts(4), [](Ctx& c) {
    const size_t big = size_t{48} << 20;
    if (c.rank == 0) {
      std::vector<uint8_t> out(big);
      fill(out, 0, 3);
      Request rs;
      c.t->isend(1, out.data(), big, 7, &rs);
      c.barrier("started");
      c.t->wait(rs, "large send");
      return;
    }
    c.barrier("started");
    for (int i = 0; i < 20; ++i) {  // read part of it as an unexpected message
      c.t->progress();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::vector<uint8_t> in(big);
    Request rr;
    c.t->irecv(0, in.data(), big, 7, &rr);
    c.t->wait(rr, "large receive");
    CHILD_CHECK(rr.bytes == big && verify(in, big, 0, 3));
  });
}

// The highest-numbered TCP socket of this process: the last flow connect() made.
int last_socket() {
  int best = -1;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    const int fd = atoi(e->d_name);
    struct stat st {};
    int type = 0;
    socklen_t tl = sizeof(type);
    if (fd > 2 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM)
      best = std::max(best, fd);
  }
  closedir(d);
  return best;
}

// A rank that closes right after its last send completed: its close writes the tail
// and ends every flow at once, so the receiver sees the flows that carried nothing (or
// whose share it already read) end while the rest of the message still waits in the
// lead flow's kernel (the receiver's buffer is full: it read nothing yet). The message
// lands whole, a message sent whole or sprayed alike; only a receive posted after every
// flow ended fails, naming the peer, at once.
TEST(SockFlows, PeerClosingAfterItsLastSendHandsEveryByteOver) {
  for (size_t len : {spray::kSprayMinBytes - 1, size_t{300000}}) {
    auto a = std::make_unique<SockPath>(0, uint64_t{1} << 30, std::chrono::milliseconds(10000),
                                        std::vector<std::string>{"127.0.0.1"});
    SockPath b(1, uint64_t{1} << 30, std::chrono::milliseconds(10000), {"127.0.0.1"});
    a->set_flows(4);
    b.set_flows(4);
    nettest::connect_pair(*a, b);
    std::vector<uint8_t> out(len), in(len + 1, 0xee);
    fill(out, 0, 6);
    Request rs, rr;
    rs.peer = rr.peer = -1;
    b.post(false, 0, in.data(), len, 7, &rr);
    a->post(true, 1, out.data(), len, 7, &rs);
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (!rs.done && Clock::now() < until) a->progress(true);  // written to the kernel
    ASSERT_TRUE(rs.done && !rs.failed) << len << ": " << rs.error;
    std::thread closer([&] { a.reset(); });  // waits until b's kernel took every byte
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the idle flows' ends arrive first
    while (!rr.done && Clock::now() < until) b.progress(true);
    closer.join();  // within a's timeout even if b stopped reading
    ASSERT_TRUE(rr.done) << len;
    EXPECT_FALSE(rr.failed) << len << ": " << rr.error;
    EXPECT_EQ(rr.bytes, len);
    EXPECT_TRUE(verify(in, len, 0, 6) && in[len] == 0xee) << len;
    uint64_t more = 0;
    Request late;
    late.peer = -1;
    b.post(false, 0, &more, 8, 8, &late);
    while (!late.done && Clock::now() < until) b.progress(true);
    ASSERT_TRUE(late.done) << len;
    EXPECT_TRUE(late.failed) << len;
    EXPECT_NE(late.error.find("rank 0 closed its connection"), std::string::npos) << late.error;
  }
}

// One flow of a pair dies while a sprayed message is under way: the receive fails at
// once, naming the peer and the flow, instead of waiting out the timeout.
TEST(SockFlows, LostFlowFailsThePairByName) {
  run_ranks(2, flows_opts(4), [](Ctx& c) {
    const size_t big = size_t{8} << 20;
    if (c.rank == 0) {
      std::vector<uint8_t> out(big);
      fill(out, 0, 1);
      c.barrier("ready");
      Request rs;
      c.t->isend(1, out.data(), big / 2, 1, &rs);  // sprayed: every flow carries some
      const int fd = last_socket();
      CHILD_CHECK(fd >= 0);
      shutdown(fd, SHUT_RDWR);
      try {
        c.t->wait(rs, "send on a flow that dies");
      } catch (const core::Error&) {
      }
      c.barrier("checked");
      _exit(0);
    }
    std::vector<uint8_t> in(big);
    Request rr;
    c.t->irecv(0, in.data(), big, 1, &rr);  // longer than what comes: waits for more
    c.barrier("ready");
    const auto t0 = Clock::now();
    try {
      c.t->wait(rr, "recv while a flow dies");
      CHILD_CHECK(false);
    } catch (const core::Error& e) {
      fprintf(stderr, "expected: %s\n", e.what());
      const std::string w = e.what();
      CHILD_CHECK(w.find("rank 0") != std::string::npos);
      CHILD_CHECK(w.find("of 4 to rank 0)") != std::string::npos);
      CHILD_CHECK(w.find("recv while a flow dies") != std::string::npos);
    }
    CHILD_CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    c.barrier("checked");
    _exit(0);
  });
}

}  // namespace
}  // namespace dccl::net
