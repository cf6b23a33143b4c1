// libnccl-net-dccl.so driven as NCCL drives it, by two ranks (dccl-run -np 2):
//   plugin_check PLUGIN.so SCENARIO DEVICE_KIND
// SCENARIO: suite (every check below on one connection), peer-death or
// close-after-send.
// DEVICE_KIND: sock, shm or tcp (the first device of that kind; with "all-sock",
// every socket device, one per rail, in turn).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "harness.hpp"
#include "mem/backend.hpp"

using namespace harness;
namespace mem = dccl::mem;

namespace {

NcclNetV10* net = nullptr;
int peer = 0;

struct Reg {
  void* comm;
  void* mh = nullptr;
  Reg(void* c, void* p, size_t n) : comm(c) { OK(net->reg_mr(c, p, n, kNcclPtrHost, &mh)); }
  ~Reg() { OK(net->dereg_mr(comm, mh)); }
};

void* post_send(void* comm, void* p, size_t n, int tag, void* mh) {
  void* req = nullptr;
  while (!req) OK(net->isend(comm, p, n, tag, mh, nullptr, &req));
  return req;
}

void* post_recv(void* comm, int k, void** p, size_t* n, int* tags, void** mh) {
  void* req = nullptr;
  while (!req) OK(net->irecv(comm, k, p, n, tags, mh, nullptr, &req));
  return req;
}

// Both directions, sizes 0 .. 4 MiB, data checked.
void pingpong(Pair& c) {
  const size_t sizes[] = {0, 1, 8, 4096, 65536, 1 << 20, 4 << 20};
  std::vector<char> sbuf(4 << 20), rbuf(4 << 20);
  Reg rs(c.send, sbuf.data(), sbuf.size()), rr(c.recv, rbuf.data(), rbuf.size());
  for (size_t n : sizes) {
    fill(sbuf.data(), n, static_cast<uint32_t>(n + rank()));
    void* rp = rbuf.data();
    int tag = 7;
    for (int turn = 0; turn < 2; ++turn) {
      if (turn == rank()) {
        wait_req(net, post_send(c.send, sbuf.data(), n, 7, rs.mh));
      } else {
        int got = -1;
        wait_req(net, post_recv(c.recv, 1, &rp, &n, &tag, &rr.mh), &got);
        CHECK(got == static_cast<int>(n), "ping-pong %zu bytes: received %d", n, got);
        CHECK(check(rbuf.data(), n, static_cast<uint32_t>(n + peer)), "ping-pong %zu bytes: data differ", n);
      }
    }
  }
}

// 32 sends each way in flight at once, tested in reverse and interleaved order.
void out_of_order(Pair& c) {
  constexpr int kN = kNcclMaxRequests;
  std::vector<std::vector<char>> s(kN), r(kN);
  std::vector<void*> sreq(kN), rreq(kN);
  for (int i = 0; i < kN; ++i) {
    s[i].resize(1000 + 3000 * i);
    r[i].resize(s[i].size());
    fill(s[i].data(), s[i].size(), 100 + i + 1000 * rank());
  }
  for (int i = 0; i < kN; ++i) {
    void* p = r[i].data();
    size_t n = r[i].size();
    int tag = i;
    rreq[i] = post_recv(c.recv, 1, &p, &n, &tag, nullptr);
  }
  for (int i = 0; i < kN; ++i) sreq[i] = post_send(c.send, s[i].data(), s[i].size(), i, nullptr);
  // A 33rd request on a full comm is refused for now (NULL request), not an error.
  void* extra = &extra;
  OK(net->isend(c.send, s[0].data(), 1, 0, nullptr, nullptr, &extra));
  CHECK(extra == nullptr, "a 33rd outstanding isend was accepted");
  std::vector<bool> done(kN, false);
  int left = 2 * kN;
  while (left) {
    for (int i = kN - 1; i >= 0; --i) {  // reverse order: later requests often complete first here
      int d = 0, got = -1;
      if (rreq[i]) {
        OK(net->test(rreq[i], &d, &got));
        if (d) {
          CHECK(got == static_cast<int>(r[i].size()), "out of order: recv %d got %d bytes", i, got);
          CHECK(check(r[i].data(), r[i].size(), 100 + i + 1000 * peer), "out of order: recv %d data differ", i);
          rreq[i] = nullptr;
          --left;
        }
      }
      if (sreq[i]) {
        OK(net->test(sreq[i], &d, nullptr));
        if (d) sreq[i] = nullptr, --left;
      }
    }
  }
}

// One grouped receive of four tags; the sender sends them in another order, each
// shorter than its receive: every size is reported per receive.
void grouped(Pair& c) {
  std::vector<char> s(4096 * 4), r(8192 * 4, 0);
  fill(s.data(), s.size(), 7 + rank());
  const int order[4] = {3, 1, 0, 2};
  void* data[4];
  size_t sizes[4];
  int tags[4];
  for (int i = 0; i < 4; ++i) {
    data[i] = r.data() + 8192 * i;
    sizes[i] = 8192;
    tags[i] = 40 + i;
  }
  void* rq = post_recv(c.recv, 4, data, sizes, tags, nullptr);
  std::vector<void*> sq;
  for (int k : order) sq.push_back(post_send(c.send, s.data() + 4096 * k, 100 * (k + 1), 40 + k, nullptr));
  int got[4] = {-1, -1, -1, -1};
  wait_req(net, rq, got);
  for (void* q : sq) wait_req(net, q);
  std::vector<char> want(s.size());
  fill(want.data(), want.size(), 7 + peer);
  for (int i = 0; i < 4; ++i) {
    CHECK(got[i] == 100 * (i + 1), "grouped: receive %d (tag %d) reports %d bytes, sent %d", i, 40 + i, got[i],
          100 * (i + 1));
    CHECK(memcmp(r.data() + 8192 * i, want.data() + 4096 * i, 100 * (i + 1)) == 0, "grouped: receive %d data differ", i);
  }
  // Too many receives in a group: a clear error.
  void* d9[9];
  size_t n9[9];
  int t9[9];
  void* bad = nullptr;
  CHECK(net->irecv(c.recv, 9, d9, n9, t9, nullptr, nullptr, &bad) == kNcclInvalidArgument, "9 grouped receives");
  CHECK(last_warning().find("receives") != std::string::npos, "no message for 9 grouped receives");
}

// A receive larger than the send reports the sent size; 0 bytes too.
void larger(Pair& c) {
  std::vector<char> s(1000), r(1 << 20, 0x55);
  fill(s.data(), s.size(), 9 + rank());
  for (size_t n : {size_t{1000}, size_t{0}}) {
    void* p = r.data();
    size_t cap = r.size();
    int tag = 3, got = -1;
    void* rq = post_recv(c.recv, 1, &p, &cap, &tag, nullptr);
    void* sq = post_send(c.send, s.data(), n, 3, nullptr);
    wait_req(net, rq, &got);
    wait_req(net, sq);
    CHECK(got == static_cast<int>(n), "a 1 MiB receive of a %zu-byte send reports %d", n, got);
    if (n) CHECK(check(r.data(), n, 9 + peer), "larger receive: data differ");
    CHECK(r[n] == 0x55 || n == 0, "larger receive: bytes past the message were written");
  }
}

// Sim device memory registered through regMrDmaBuf: on fabric devices it moves
// end to end; on the socket device the registration fails with its reason.
void dmabuf(Pair& c, bool fabric) {
  mem::Backend& sim = mem::sim_backend();
  const size_t n = 3 << 20;
  void* sd = sim.alloc(n);
  void* rd = sim.alloc(n);
  mem::DmaBuf sx = sim.export_dmabuf(sd, n), rx = sim.export_dmabuf(rd, n);
  void *smh = nullptr, *rmh = nullptr;
  const NcclResult a = net->reg_mr_dmabuf(c.send, sd, n, kNcclPtrCuda, sx.offset, sx.fd, &smh);
  const NcclResult b = net->reg_mr_dmabuf(c.recv, rd, n, kNcclPtrCuda, rx.offset, rx.fd, &rmh);
  if (!fabric) {
    CHECK(a != kNcclSuccess && b != kNcclSuccess, "the socket device registered device memory");
    CHECK(last_warning().find("socket path") != std::string::npos, "no reason given: '%s'", last_warning().c_str());
  } else {
    CHECK(a == kNcclSuccess && b == kNcclSuccess, "regMrDmaBuf of sim memory: %s", last_warning().c_str());
    std::vector<char> host(n), back(n);
    fill(host.data(), n, 77 + rank());
    sim.wait(sim.copy_async(sd, host.data(), n), 30000);  // the backend's own copies: sim memory faults on the CPU
    sim.wait(sim.memset_async(rd, 0, n), 30000);
    void* p = rd;
    size_t cap = n;
    int tag = 5, got = -1;
    const size_t sent = n - 4096 - 3;  // the receive is larger
    void* rq = post_recv(c.recv, 1, &p, &cap, &tag, &rmh);
    void* sq = post_send(c.send, sd, sent, 5, smh);
    wait_req(net, rq, &got);
    wait_req(net, sq);
    sim.wait(sim.copy_async(back.data(), rd, n), 30000);
    CHECK(got == static_cast<int>(sent), "sim dma-buf: received %d of %zu", got, sent);
    CHECK(check(back.data(), sent, 77 + peer), "sim dma-buf: data differ");
    CHECK(back[sent] == 0, "sim dma-buf: bytes past the message were written");
    OK(net->dereg_mr(c.send, smh));
    OK(net->dereg_mr(c.recv, rmh));
  }
  sim.free(sd);
  sim.free(rd);
}

// Bad input: clear errors, no crash.
void misuse(Pair& c) {
  void* req = nullptr;
  int x = 0;
  CHECK(net->isend(nullptr, &x, 4, 0, nullptr, nullptr, &req) == kNcclInvalidArgument, "isend on a null comm");
  CHECK(net->isend(c.recv, &x, 4, 0, nullptr, nullptr, &req) == kNcclInvalidArgument, "isend on a recv comm");
  void* mh = nullptr;
  CHECK(net->reg_mr(c.send, &x, 4, 99, &mh) == kNcclInvalidArgument, "regMr of type 99");
  char bogus[kNcclHandleBytes] = {};
  void* sc = nullptr;
  CHECK(net->connect(0, nullptr, bogus, &sc, nullptr) == kNcclInvalidArgument, "connect to a zero handle");
  CHECK(net->get_properties(1000, nullptr) == kNcclInvalidArgument, "properties of device 1000");
  CHECK(last_warning().find("device 1000") != std::string::npos, "message: %s", last_warning().c_str());
}

// The v8 table (int sizes) on the same comms: a small exchange.
void v8_table(const Plugin& pl, Pair& c) {
  int v = 1234 + rank(), got = 0, sz = -1, tag = 1;
  void* p = &got;
  int cap = sizeof(got);
  void *rq = nullptr, *sq = nullptr;
  while (!rq) OK(pl.v8->irecv(c.recv, 1, &p, &cap, &tag, nullptr, &rq));
  while (!sq) OK(pl.v8->isend(c.send, &v, sizeof(v), 1, nullptr, &sq));
  for (int d = 0; !d;) OK(pl.v8->test(rq, &d, &sz));
  for (int d = 0; !d;) OK(pl.v8->test(sq, &d, nullptr));
  CHECK(got == 1234 + peer && sz == 4, "v8 table: got %d (%d bytes)", got, sz);
  void* bad = nullptr;
  CHECK(pl.v8->isend(c.send, &v, -1, 1, nullptr, &bad) == kNcclInvalidArgument, "v8 isend of -1 bytes");
}

// The v11 table: a context per communicator (two here, as two communicators
// would open), the same device properties as v10's plus the multi-request limit,
// a connection made under a context with an exchange both ways, the traffic
// hints, misuse, and finalize.
void v11_table(const Plugin& pl, int dev) {
  NcclNetV11* v = pl.v11;
  NcclCommConfig cfg{-1};
  void *ctx = nullptr, *other = nullptr;
  OK(v->init(&ctx, 0x1234, &cfg, log_fn(), nullptr));
  OK(v->init(&other, 0x5678, nullptr, log_fn(), nullptr));
  CHECK(ctx && other && ctx != other, "v11 init: contexts %p and %p", ctx, other);
  NcclPropsV11 p11{};
  NcclPropsV9 p10{};
  OK(v->get_properties(dev, &p11));
  OK(net->get_properties(dev, &p10));
  CHECK(strcmp(p11.v9.name, p10.name) == 0 && p11.v9.ptr_support == p10.ptr_support && p11.v9.speed == p10.speed &&
            p11.v9.max_recvs == p10.max_recvs && p11.v9.max_p2p_bytes == p10.max_p2p_bytes &&
            p11.v9.vprops.ndevs == 1 && p11.v9.vprops.devs[0] == dev && p11.max_multi_request_size == 1,
        "v11 properties of %s differ from v10's (multi-request %d)", p10.name, p11.max_multi_request_size);
  Pair c = connect_pair(v, ctx, dev, peer, "v11-" + std::to_string(dev));
  int out = 4321 + rank(), got = 0, sz = -1, tag = 5;
  void* p = &got;
  size_t cap = sizeof(got);
  void *rq = nullptr, *sq = nullptr;
  while (!rq) OK(v->irecv(c.recv, 1, &p, &cap, &tag, nullptr, nullptr, &rq));
  while (!sq) OK(v->isend(c.send, &out, sizeof(out), 5, nullptr, nullptr, &sq));
  for (int d = 0; !d;) OK(v->test(rq, &d, &sz));
  for (int d = 0; !d;) OK(v->test(sq, &d, nullptr));
  CHECK(got == 4321 + peer && sz == 4, "v11 table: got %d (%d bytes)", got, sz);
  NcclNetAttr attr{};
  attr.send = NcclNetCommAttr{8, 1, 2, 1};
  attr.recv = attr.send;
  OK(v->set_net_attr(ctx, &attr));
  CHECK(v->set_net_attr(ctx, nullptr) == kNcclInvalidArgument, "v11 setNetAttr without attributes");
  char handle[kNcclHandleBytes] = {};
  void* lc = nullptr;
  CHECK(v->listen(&out, dev, handle, &lc) == kNcclInvalidArgument && !lc, "v11 listen under a foreign context");
  CHECK(last_warning().find("context") != std::string::npos, "message: %s", last_warning().c_str());
  OK(v->close_send(c.send));
  OK(v->close_recv(c.recv));
  OK(v->close_listen(c.listen));
  OK(v->finalize(other));
  CHECK(v->connect(other, dev, handle, &lc, nullptr) == kNcclInvalidArgument, "v11 connect under a finalized context");
  CHECK(v->finalize(other) == kNcclInvalidArgument, "v11 finalize twice");
  OK(v->finalize(ctx));
}

// Closing with requests outstanding: a receive nobody sends to, a send nobody receives.
void close_outstanding(Pair& c) {
  static char big[1 << 20];
  int x = 0;
  void* p = &x;
  size_t n = sizeof(x);
  int tag = 999;
  post_recv(c.recv, 1, &p, &n, &tag, nullptr);
  post_send(c.send, big, sizeof(big), 998, nullptr);
  close_pair(net, c);
}

void suite(const Plugin& pl, int dev, const std::string& kind) {
  Pair c = connect_pair(net, dev, peer, peer, "suite" + std::to_string(dev));
  auto step = [](const char* what) { printf("rank %d: %s passed\n", rank(), what); fflush(stdout); };
  pingpong(c);
  step("ping-pong");
  out_of_order(c);
  step("out of order");
  grouped(c);
  step("grouped receive");
  larger(c);
  step("larger receive");
  dmabuf(c, kind != "sock");
  step("dma-buf registration");
  misuse(c);
  step("misuse");
  v8_table(pl, c);
  step("v8 table");
  v11_table(pl, dev);
  step("v11 table");
  barrier("before-close" + std::to_string(dev));
  close_outstanding(c);
  barrier("closed" + std::to_string(dev));  // neither side hung or crashed on close
}

// Rank 1 dies after connecting; rank 0's receive and send must fail, not hang.
void peer_death(int dev) {
  Pair c = connect_pair(net, dev, peer, peer, "death");
  if (rank() == 1) {
    barrier("connected");
    kill(getpid(), SIGKILL);
  }
  barrier("connected");
  const auto t0 = std::chrono::steady_clock::now();
  int x = 0;
  void* p = &x;
  size_t n = sizeof(x);
  int tag = 1, done = 0;
  void* rq = post_recv(c.recv, 1, &p, &n, &tag, nullptr);
  NcclResult rc = kNcclSuccess;
  while (rc == kNcclSuccess && !done) rc = net->test(rq, &done, nullptr);
  CHECK(rc == kNcclRemoteError, "a receive from a dead peer: result %d (done %d)", rc, done);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "rank 0: receive from the dead peer failed after %.1f s: %s\n", s, last_warning().c_str());
  CHECK(!last_warning().empty(), "no message for the failure");
  close_pair(net, c);  // closing after a failure does not hang
}

// Rank 1 closes its send comm the moment its sends completed; rank 0 is slow to
// post its receives, the larger one last. On sockets, where a send completes once
// the kernel holds it, rank 0 posts only after rank 1 closed, and a receive of a
// tag never sent fails on the end of the stream first (by then the connection read
// both messages and the close). On libfabric's devices a send completes only once
// the receiver matched it: rank 0 posts 300 ms late instead. Both messages arrive,
// checked.
void close_after_send(int dev, const std::string& kind) {
  Pair c = connect_pair(net, dev, peer, peer, "early-close");
  const size_t big = 16 << 10;
  std::vector<char> a(big), b(8);
  if (rank() == 1) {
    fill(a.data(), big, 21);
    fill(b.data(), b.size(), 22);
    void* ra = post_send(c.send, a.data(), big, 2, nullptr);
    void* rb = post_send(c.send, b.data(), b.size(), 1, nullptr);
    wait_req(net, ra);
    wait_req(net, rb);
    close_pair(net, c);
    barrier("sender-closed");
    return;
  }
  if (kind == "sock") barrier("sender-closed");
  else usleep(300 * 1000);
  int tag = 1, got = -1;
  void* p = b.data();
  size_t n = b.size();
  wait_req(net, post_recv(c.recv, 1, &p, &n, &tag, nullptr), &got);
  CHECK(got == 8 && check(b.data(), 8, 22), "the small message after the sender closed: %d bytes", got);
  if (kind == "sock") {
    // Nothing more comes: a receive of another tag fails once the end of the
    // stream is read (which happens before the larger message is asked for).
    int x = 0;
    tag = 3;
    p = &x;
    n = sizeof(x);
    void* rq = post_recv(c.recv, 1, &p, &n, &tag, nullptr);
    NcclResult rc = kNcclSuccess;
    for (int done = 0; rc == kNcclSuccess && !done;) rc = net->test(rq, &done, nullptr);
    CHECK(rc == kNcclRemoteError && last_warning().find("closed its connection") != std::string::npos,
          "a receive after the sender closed: result %d: %s", rc, last_warning().c_str());
  }
  tag = 2;
  p = a.data();
  n = big;
  wait_req(net, post_recv(c.recv, 1, &p, &n, &tag, nullptr), &got);
  CHECK(got == static_cast<int>(big) && check(a.data(), big, 21), "the larger message after the sender closed: %d bytes",
        got);
  if (kind != "sock") barrier("sender-closed");
  close_pair(net, c);
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  CHECK(argc == 4, "usage: plugin_check PLUGIN.so suite|peer-death|close-after-send sock|shm|tcp|all-sock");
  CHECK(world() == 2, "two ranks (dccl-run -np 2), not %d", world());
  peer = 1 - rank();
  Plugin pl = load(argv[1]);
  net = pl.v10;
  OK(net->init(log_fn(), nullptr));
  const std::string scenario = argv[2], kind = argv[3];
  std::vector<int> devs;
  int n = 0;
  OK(net->devices(&n));
  for (int d = 0; d < n; ++d) {
    NcclPropsV9 props{};
    OK(net->get_properties(d, &props));
    CHECK(props.ptr_support & kNcclPtrHost, "device %s: no host memory", props.name);
    CHECK(props.max_recvs >= 4 && props.max_p2p_bytes >= (4u << 20), "device %s: limits", props.name);
    const std::string name = props.name;
    if (kind == "all-sock" ? name.rfind("dccl-sock", 0) == 0 : name.rfind("dccl-" + kind, 0) == 0) {
      devs.push_back(d);
      if (kind != "all-sock") break;
    }
  }
  if (devs.empty()) {
    printf("SKIPPED: no %s device here\n", kind.c_str());
    return 77;
  }
  for (int d : devs) {
    if (scenario == "suite") suite(pl, d, kind == "all-sock" ? "sock" : kind);
    else if (scenario == "peer-death") peer_death(d);
    else if (scenario == "close-after-send") close_after_send(d, kind);
    else die("unknown scenario " + scenario);
    printf("rank %d: %s on device %d passed\n", rank(), scenario.c_str(), d);
  }
  cleanup(scenario == "suite");  // after peer-death rank 1 is gone
  return 0;
}
