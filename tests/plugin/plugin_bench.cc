// The plugin's cost: ping-pong latency and streaming bandwidth through
// libnccl-net-dccl.so's v10 table next to DirectCCL's own transport
// (net::Transport, two ranks, the options the plugin's device uses), on the same
// path in the same two processes, rounds alternating. Not a test: a benchmark.
//   dccl-run -n 2 plugin_bench PLUGIN.so sock|shm|tcp [ROUNDS]
// Transports: one carrying both directions (as DirectCCL uses it), and one per
// direction (as NCCL's send and recv comms are). Prints one line per size: medians
// over the rounds and the ratios.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "harness.hpp"
#include "net/fabric/provider.hpp"
#include "net/transport.hpp"
#include "topo/topology.hpp"

using namespace harness;
namespace net = dccl::net;
using Clock = std::chrono::steady_clock;

namespace {

// One side of the measured exchange: post a send or a receive, wait for it.
struct Side {
  std::function<void*(bool send, void* p, size_t n)> post;
  std::function<void(void* req)> wait;
};

double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// Half a round trip, in microseconds (median of iters).
double pingpong(Side& s, std::vector<char>& buf, size_t n, int iters) {
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    if (rank() == 0) {
      s.wait(s.post(true, buf.data(), n));
      s.wait(s.post(false, buf.data(), n));
    } else {
      s.wait(s.post(false, buf.data(), n));
      s.wait(s.post(true, buf.data(), n));
    }
    t.push_back(secs(t0) * 1e6 / 2);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// GB/s from rank 0 to rank 1: `window` messages in flight, `reps` windows, then an ack.
double stream(Side& s, std::vector<char>& buf, size_t n, int window, int reps) {
  std::vector<void*> q(static_cast<size_t>(window));
  const auto t0 = Clock::now();
  // The receiver posts a window, then grants the next one with a 1-byte message,
  // as NCCL's receiver frees its slots: the sender never runs ahead of the posted
  // receives (see the results' NOTES.md for what happens on the socket path when
  // it does).
  for (int r = 0; r < reps; ++r) {
    for (int w = 0; w < window; ++w) q[w] = s.post(rank() == 0, buf.data() + static_cast<size_t>(w) * n, n);
    for (void* x : q) s.wait(x);
    s.wait(s.post(rank() == 1, buf.data(), 1));  // the grant, inside the registered buffer
  }
  return static_cast<double>(n) * window * reps / secs(t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc >= 3 && world() == 2, "usage: dccl-run -n 2 plugin_bench PLUGIN.so sock|shm|tcp [ROUNDS]");
  const std::string kind = argv[2];
  const int rounds = argc > 3 ? std::stoi(argv[3]) : 5;
  const int peer = 1 - rank();
  Plugin pl = load(argv[1]);
  NcclNetV10* nccl = pl.v10;
  OK(nccl->init(log_fn(), nullptr));
  const int dev = find_device(nccl, kind);
  CHECK(dev >= 0, "no %s device", kind.c_str());
  NcclPropsV9 props{};
  OK(nccl->get_properties(dev, &props));
  Pair c = connect_pair(nccl, dev, peer, peer, "bench");

  // DirectCCL's transport on the same path (the options link_adapter.cc gives the device).
  const dccl::core::Config& cfg = dccl::core::config();
  net::TransportOptions to;
  to.rank = rank();
  to.nranks = 2;
  to.host = dccl::topo::host_identity(cfg.host_id);
  to.spin_us = cfg.spin_us;
  to.timeout = std::chrono::seconds(60);
  to.provider = kind == "shm" ? net::kShmProvider : "tcp";
  to.trust_network = kind == "tcp";
  to.sock_bytes = kind == "sock" ? size_t{1} << 30 : 0;
  to.ifnames = std::string(props.name).rfind("dccl-sock-", 0) == 0 ? std::string(props.name).substr(10)
               : kind == "tcp" ? std::string(props.name).substr(9) : "";
  net::set_provider_defaults(cfg.rxm_eager_bytes);
  // Three transports: one carrying both directions (DirectCCL's own use), and one
  // per direction (as NCCL's comms are: a send comm and a recv comm per peer).
  auto make = [&](const std::string& name) {
    auto t = net::Transport::create(to);
    const std::string mine = t->local_blob();
    const uint32_t len = static_cast<uint32_t>(mine.size());
    publish(name + "-len." + std::to_string(rank()), &len, sizeof(len));
    publish(name + "." + std::to_string(rank()), mine.data(), mine.size());
    uint32_t plen = 0;
    fetch(name + "-len." + std::to_string(peer), &plen, sizeof(plen));
    std::string theirs(plen, '\0');
    fetch(name + "." + std::to_string(peer), theirs.data(), plen);
    std::vector<std::string> blobs(2);
    blobs[static_cast<size_t>(rank())] = mine;
    blobs[static_cast<size_t>(peer)] = theirs;
    t->connect(blobs);
    return t;
  };
  auto tr = make("both");
  auto up = make("up");      // rank 0 -> rank 1
  auto down = make("down");  // rank 1 -> rank 0

  const size_t big = size_t{4} << 20, window = 8;
  std::vector<char> buf(big * window);
  void *smh = nullptr, *rmh = nullptr;
  OK(nccl->reg_mr(c.send, buf.data(), buf.size(), kNcclPtrHost, &smh));
  OK(nccl->reg_mr(c.recv, buf.data(), buf.size(), kNcclPtrHost, &rmh));
  net::MemRegion* mr = tr->register_memory(buf.data(), buf.size());
  net::MemRegion* mr_up = up->register_memory(buf.data(), buf.size());
  net::MemRegion* mr_down = down->register_memory(buf.data(), buf.size());

  Side plug{[&](bool send, void* p, size_t n) {
              void* r = nullptr;
              int tag = 0;
              while (!r) {
                if (send) OK(nccl->isend(c.send, p, n, 0, smh, nullptr, &r));
                else OK(nccl->irecv(c.recv, 1, &p, &n, &tag, &rmh, nullptr, &r));
              }
              return r;
            },
            [&](void* r) { wait_req(nccl, r); }};
  std::vector<std::unique_ptr<net::Request>> reqs;
  // A transport side: sends on `tx`, receives on `rx` (the same one, or one per direction).
  auto raw_side = [&](net::Transport* tx, net::MemRegion* txmr, net::Transport* rx, net::MemRegion* rxmr) {
    return Side{[&, tx, txmr, rx, rxmr](bool send, void* p, size_t n) {
                  auto r = std::make_unique<net::Request>();
                  if (send) tx->isend(peer, p, n, 0, r.get(), txmr);
                  else rx->irecv(peer, p, n, 0, r.get(), rxmr);
                  reqs.push_back(std::move(r));
                  return static_cast<void*>(reqs.back().get());
                },
                [&, tx, rx](void* r) {
                  auto* q = static_cast<net::Request*>(r);
                  while (!q->done.load(std::memory_order_acquire)) (q->is_send ? tx : rx)->progress();
                  CHECK(!q->failed, "transport request failed: %s", q->error.c_str());
                }};
  };
  Side raw = raw_side(tr.get(), mr, tr.get(), mr);
  Side raw2 = rank() == 0 ? raw_side(up.get(), mr_up, down.get(), mr_down) : raw_side(down.get(), mr_down, up.get(), mr_up);

  struct Row {
    const char* what;
    size_t n;
    std::vector<double> p, t, t2;
  };
  std::vector<Row> rows = {{"latency us", 8, {}, {}, {}},          {"latency us", 4096, {}, {}, {}},
                           {"latency us", 65536, {}, {}, {}},      {"bandwidth GB/s", 65536, {}, {}, {}},
                           {"bandwidth GB/s", 1 << 20, {}, {}, {}}, {"bandwidth GB/s", big, {}, {}, {}}};
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up
    for (Row& r : rows) {
      for (int k = 0; k < 3; ++k) {  // the order rotates with the round
        const int which = (k + round) % 3;  // 0 plugin, 1 transport, 2 transport per direction
        Side& s = which == 0 ? plug : which == 1 ? raw : raw2;
        const char* names[3] = {"plugin", "transport", "transport2"};
        if (getenv("BENCH_TRACE")) fprintf(stderr, "rank %d: round %d %s %zu %s\n", rank(), round, r.what, r.n, names[which]);
        const double v = r.what[0] == 'l' ? pingpong(s, buf, r.n, 200)
                                          : stream(s, buf, r.n, static_cast<int>(window), r.n >= big ? 4 : 16);
        reqs.clear();
        if (round) (which == 0 ? r.p : which == 1 ? r.t : r.t2).push_back(v);
      }
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (rank() == 1)
    for (Row& r : rows)
      printf("%s %-15s %8zu B: plugin %9.2f  transport %9.2f  per-direction %9.2f  plugin/transport %.3f  "
             "plugin/per-direction %.3f  (medians of %d rounds)\n",
             props.name, r.what, r.n, med(r.p), med(r.t), med(r.t2), med(r.p) / med(r.t), med(r.p) / med(r.t2), rounds);
  OK(nccl->dereg_mr(c.send, smh));
  OK(nccl->dereg_mr(c.recv, rmh));
  if (mr) tr->deregister_memory(mr);
  if (mr_up) up->deregister_memory(mr_up);
  if (mr_down) down->deregister_memory(mr_down);
  close_pair(nccl, c);
  cleanup();
  return 0;
}
