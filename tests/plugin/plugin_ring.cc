// A ring allreduce (sum of float32) written on NCCL's plugin API alone: each rank
// sends to rank+1 and receives from rank-1 over libnccl-net-dccl.so, reduce-scatter
// then allgather in chunks, results checked against a float64 reference.
//   plugin_ring PLUGIN.so DEVICE_KIND [COUNT] [ITERS]
// With ITERS > 1 it prints the median time and bus bandwidth (2(n-1)/n * bytes / t).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace harness;

namespace {

NcclNetV10* net = nullptr;

float input(int rank, size_t i) { return static_cast<float>((static_cast<int>(i % 1013) - 500) * 0.25 + rank * 1.5); }

void* post(bool send, void* comm, void* p, size_t n, int tag, void* mh) {
  void* req = nullptr;
  while (!req) {
    if (send) OK(net->isend(comm, p, n, tag, mh, nullptr, &req));
    else OK(net->irecv(comm, 1, &p, &n, &tag, &mh, nullptr, &req));
  }
  return req;
}

// One ring step: send block `sb` of buf to the next rank while receiving the
// previous rank's block into tmp; then either add it into block `rb` (reduce) or
// it already landed in place (gather).
void ring(Pair& c, std::vector<float>& buf, std::vector<float>& tmp, void* smh, void* bmh, void* tmh, int n, int r) {
  const size_t count = buf.size(), block = (count + n - 1) / n;
  auto lo = [&](int b) { return std::min(count, static_cast<size_t>(b) * block); };
  auto hi = [&](int b) { return std::min(count, static_cast<size_t>(b + 1) * block); };
  auto mod = [&](int x) { return ((x % n) + n) % n; };
  for (int step = 0; step < 2 * (n - 1); ++step) {
    const bool reduce = step < n - 1;
    const int s = reduce ? mod(r - step) : mod(r + 1 - (step - (n - 1)));
    const int rb = mod(s - 1);
    void* rdst = reduce ? static_cast<void*>(tmp.data()) : static_cast<void*>(buf.data() + lo(rb));
    void* rq = post(false, c.recv, rdst, (hi(rb) - lo(rb)) * sizeof(float), step, reduce ? tmh : bmh);
    void* sq = post(true, c.send, buf.data() + lo(s), (hi(s) - lo(s)) * sizeof(float), step, smh);
    int got = -1;
    wait_req(net, rq, &got);
    wait_req(net, sq);
    CHECK(got == static_cast<int>((hi(rb) - lo(rb)) * sizeof(float)), "step %d: received %d bytes", step, got);
    if (reduce)
      for (size_t i = lo(rb); i < hi(rb); ++i) buf[i] += tmp[i - lo(rb)];
  }
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc >= 3, "usage: plugin_ring PLUGIN.so DEVICE_KIND [COUNT] [ITERS]");
  const int n = world(), r = rank();
  CHECK(n >= 2, "at least two ranks (dccl-run -n N)");
  const size_t count = argc > 3 ? std::stoul(argv[3]) : 1000003;
  const int iters = argc > 4 ? std::stoi(argv[4]) : 1;
  Plugin pl = load(argv[1]);
  net = pl.v10;
  OK(net->init(log_fn(), nullptr));
  const int dev = find_device(net, argv[2]);
  if (dev < 0) {
    printf("SKIPPED: no %s device\n", argv[2]);
    return 77;
  }
  Pair c = connect_pair(net, dev, (r + 1) % n, (r + n - 1) % n, "ring");
  std::vector<float> buf(count), tmp((count + n - 1) / n + 1);
  void *bmh = nullptr, *tmh = nullptr;
  OK(net->reg_mr(c.send, buf.data(), buf.size() * sizeof(float), kNcclPtrHost, &bmh));
  OK(net->reg_mr(c.recv, tmp.data(), tmp.size() * sizeof(float), kNcclPtrHost, &tmh));
  // Receives land in buf too (allgather): register it on the recv comm as well.
  void* bmh_recv = nullptr;
  OK(net->reg_mr(c.recv, buf.data(), buf.size() * sizeof(float), kNcclPtrHost, &bmh_recv));
  std::vector<double> times;
  for (int it = 0; it < iters; ++it) {
    for (size_t i = 0; i < count; ++i) buf[i] = input(r, i);
    const auto t0 = std::chrono::steady_clock::now();
    ring(c, buf, tmp, bmh, bmh_recv, tmh, n, r);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      for (int k = 0; k < n; ++k) want += static_cast<double>(input(k, i));
      if (std::fabs(static_cast<double>(buf[i]) - want) > 1e-5 * (1 + std::fabs(want))) ++bad;
    }
    CHECK(bad == 0, "iteration %d: %zu of %zu elements differ from the float64 reference", it, bad, count);
  }
  // No barrier before closing: a rank closes the moment its last send completed,
  // while its neighbour may still be reading (the sockets' close hands over every
  // byte; the receiver delivers what arrived before the end of the stream).
  OK(net->dereg_mr(c.send, bmh));
  OK(net->dereg_mr(c.recv, tmh));
  OK(net->dereg_mr(c.recv, bmh_recv));
  close_pair(net, c);
  cleanup();
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2], bytes = static_cast<double>(count * sizeof(float));
  printf("rank %d: ring allreduce of %zu floats over %d ranks on %s: correct; median %.3f ms, busbw %.2f GB/s\n", r,
         count, n, argv[2], med * 1e3, 2.0 * (n - 1) / n * bytes / med / 1e9);
  return 0;
}
