// dccl-tcp-floor: the least a float32 allreduce over loopback TCP costs on this
// machine with no collective library at all (not a test).
//   dccl-tcp-floor [-n 2] [-b 64K] [-e 64M] [-f 4] [--sizes 8,1K,...]
//                  [--algo rd|ring|both] [--reps 5] [--iters N [--warmup W]]
//                  [--no-reduce] [--json FILE]
// Forks n processes joined by one loopback TCP connection per pair
// (TCP_NODELAY). Each runs a bare allreduce of S bytes: recursive doubling
// (log2 n rounds, each exchanging all S with rank ^ 2^k, n a power of two) or
// the ring (n-1 reduce-scatter steps then n-1 allgather steps, each sending
// S/n to the next rank while receiving S/n from the previous), sends and
// receives of a step progressed together from one poll() loop, the float sum
// a plain loop the compiler vectorises. With --no-reduce the sums are skipped:
// the sockets' cost alone. Ranks are pinned one per CPU when they fit the
// CPUs (as dccl-run --bind-to core) and then poll without sleeping;
// oversubscribed, they wait in poll() and give the core to the ranks that
// share it. Per size: back-to-back calls for
// about 40 ms after a barrier (with --iters: N calls after the checked first
// call and W untimed ones, as dccl-perf -n N -w W), repeated --reps times;
// prints the median time
// per call on rank 0 (the convention of dccl-perf's time column); --json
// writes [{"size", "rd_us", "ring_us", "best_us"}] (null where not run).
// bench/compare runs it beside the libraries and prints it next to the TCP
// targets: a target time below it asks a library to beat the sockets used
// directly (a library could still win by pipelining the reduction into the
// transfer, which this does not).
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dccl-perf/args.hpp"

namespace {

[[noreturn]] void die(int rank, const char* what) {
  std::fprintf(stderr, "dccl-tcp-floor: rank %d: %s: %s\n", rank, what, std::strerror(errno));
  std::exit(1);
}

// dccl-perf's size syntax (8, 64K, 1M ...); a malformed size is an error.
size_t size_arg(const std::string& s) {
  size_t v = 0;
  if (!dcclperf::parse_size(s, &v) || v == 0) {
    std::fprintf(stderr, "dccl-tcp-floor: '%s' is not a size > 0 (8, 64K, 1M ...)\n", s.c_str());
    std::exit(2);
  }
  return v;
}

__attribute__((noinline)) void add(float* __restrict d, const float* __restrict a, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] += a[i];
}

struct Dir {  // one direction of one step: bytes still to move on fd
  int fd;
  char* p;
  size_t left;
  bool send;
};

bool g_spin = false;  // pinned, one rank per CPU: poll without sleeping

// Moves every Dir to completion from one poll() loop; 30 s without progress is an error.
void progress(int rank, std::vector<Dir> ds) {
  std::vector<pollfd> pf;
  int idle = 0;
  for (;;) {
    pf.clear();
    for (Dir& d : ds) {
      while (d.left) {
        ssize_t r = d.send ? ::send(d.fd, d.p, d.left, MSG_DONTWAIT | MSG_NOSIGNAL)
                           : ::recv(d.fd, d.p, d.left, MSG_DONTWAIT);
        if (r > 0) {
          d.p += r;
          d.left -= static_cast<size_t>(r);
          continue;
        }
        if (r == 0) die(rank, "peer closed");
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) die(rank, d.send ? "send" : "recv");
        break;
      }
      if (d.left) pf.push_back({d.fd, static_cast<short>(d.send ? POLLOUT : POLLIN), 0});
    }
    if (pf.empty()) return;
    const int wait_ms = g_spin && ++idle < (1 << 24) ? 0 : 30000;
    int r = ::poll(pf.data(), pf.size(), wait_ms);
    if (r > 0) idle = 0;
    if (r == 0 && wait_ms) {
      errno = ETIMEDOUT;
      die(rank, "poll");
    }
    if (r < 0 && errno != EINTR) die(rank, "poll");
  }
}

struct Rank {
  int r, n;
  std::vector<int> fd;  // fd[peer]
  bool reduce;

  void exchange(int peer, const void* out, size_t nout, void* in, size_t nin) {
    progress(r, {{fd[peer], const_cast<char*>(static_cast<const char*>(out)), nout, true},
                 {fd[peer], static_cast<char*>(in), nin, false}});
  }
  void ring_step(const void* out, size_t nout, void* in, size_t nin) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    progress(r, {{fd[next], const_cast<char*>(static_cast<const char*>(out)), nout, true},
                 {fd[prev], static_cast<char*>(in), nin, false}});
  }
  void barrier() {
    char a = 0, b = 0;
    for (int k = 1; k < n; k <<= 1) {  // dissemination
      const int to = (r + k) % n, from = (r + n - k) % n;
      progress(r, {{fd[to], &a, 1, true}, {fd[from], &b, 1, false}});
    }
  }
  void rd(float* buf, float* tmp, size_t count) {
    for (int m = 1; m < n; m <<= 1) {
      exchange(r ^ m, buf, count * 4, tmp, count * 4);
      if (reduce) add(buf, tmp, count);
    }
  }
  void ring(float* buf, float* tmp, size_t count) {
    auto off = [&](int b) { return count * static_cast<size_t>(b) / static_cast<size_t>(n); };
    auto len = [&](int b) { return off(b + 1) - off(b); };
    for (int t = 0; t < n - 1; ++t) {  // reduce-scatter: block (r - t) out, (r - t - 1) in
      const int sb = ((r - t) % n + n) % n, rb = ((r - t - 1) % n + n) % n;
      ring_step(buf + off(sb), len(sb) * 4, tmp, len(rb) * 4);
      if (reduce) add(buf + off(rb), tmp, len(rb));
    }
    for (int t = 0; t < n - 1; ++t) {  // allgather: block (r + 1 - t) out, (r - t) in
      const int sb = ((r + 1 - t) % n + n) % n, rb = ((r - t) % n + n) % n;
      ring_step(buf + off(sb), len(sb) * 4, buf + off(rb), len(rb) * 4);
    }
  }
};

int listener(uint16_t* port) {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) || ::listen(l, 64) ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &al))
    die(-1, "listen");
  *port = ntohs(a.sin_port);
  return l;
}

void nodelay(int rank, int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))) die(rank, "TCP_NODELAY");
}

// Rank r connects to every higher rank's listener and accepts every lower rank.
std::vector<int> mesh(int r, int n, const std::vector<int>& lst, const std::vector<uint16_t>& ports) {
  std::vector<int> fd(static_cast<size_t>(n), -1);
  for (int j = r + 1; j < n; ++j) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(ports[static_cast<size_t>(j)]);
    if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a))) die(r, "connect");
    int32_t me = r;
    if (::send(s, &me, 4, MSG_NOSIGNAL) != 4) die(r, "hello");
    nodelay(r, s);
    fd[static_cast<size_t>(j)] = s;
  }
  for (int k = 0; k < r; ++k) {
    int s = ::accept(lst[static_cast<size_t>(r)], nullptr, nullptr);
    int32_t who = -1;
    if (s < 0 || ::recv(s, &who, 4, MSG_WAITALL) != 4 || who < 0 || who >= r) die(r, "accept");
    nodelay(r, s);
    fd[static_cast<size_t>(who)] = s;
  }
  return fd;
}

struct Opts {
  std::vector<size_t> sizes;
  std::string json;
  int n = 2;
  size_t lo = 64 << 10, hi = size_t{64} << 20, factor = 4;
  std::string algo = "both";
  int reps = 5;
  int iters = 0;   // timed calls per repeat; 0: about 40 ms of them (at most 2,000)
  int warmup = 0;  // untimed calls before the repeats, with --iters
  bool reduce = true;
};

// One size, one algorithm: the median over reps of the mean time per call (rank 0).
double time_algo(Rank& k, bool ring, size_t bytes, const Opts& o) {
  const size_t count = bytes / 4;
  std::vector<float> buf(count, 1.0f), tmp(count, 0.0f);
  auto call = [&] { ring ? k.ring(buf.data(), tmp.data(), count) : k.rd(buf.data(), tmp.data(), count); };
  call();  // warm-up, checked; then the iteration count from one timed call (rank 0's, sent round)
  if (k.reduce && std::any_of(buf.begin(), buf.end(), [&](float x) { return x != static_cast<float>(k.n); })) {
    std::fprintf(stderr, "dccl-tcp-floor: rank %d: %s allreduce of %zu bytes: wrong sum\n", k.r, ring ? "ring" : "rd",
                 bytes);
    std::exit(1);
  }
  k.barrier();
  auto t0 = std::chrono::steady_clock::now();
  int32_t iters = o.iters;  // the same on every rank: each got the same arguments
  if (iters > 0) {
    for (int i = 0; i < o.warmup; ++i) call();
  } else {
    call();
    double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    iters = static_cast<int32_t>(std::clamp(0.04 / std::max(one, 1e-7), 3.0, 2000.0));
    for (int m = 1; m < k.n; m <<= 1) {  // rank 0's count to everyone (a broadcast by doubling)
      if (k.r < m && (k.r | m) < k.n) progress(k.r, {{k.fd[static_cast<size_t>(k.r | m)], reinterpret_cast<char*>(&iters), 4, true}});
      else if (k.r >= m && k.r < 2 * m) progress(k.r, {{k.fd[static_cast<size_t>(k.r & ~m)], reinterpret_cast<char*>(&iters), 4, false}});
    }
  }
  std::vector<double> per;
  for (int rep = 0; rep < o.reps; ++rep) {
    k.barrier();
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call();
    per.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

int rank_main(int r, const Opts& o, std::vector<int> fd) {
  Rank k{r, o.n, std::move(fd), o.reduce};
  const bool pow2 = (o.n & (o.n - 1)) == 0;
  if (r == 0) {
    std::printf("# %d processes over loopback TCP, bare allreduce%s, median of %d repeats, us per call\n", o.n,
                o.reduce ? " (float32 sum)" : " with no reduction", o.reps);
    std::printf("%12s %12s %12s\n", "size", "rd", "ring");
  }
  std::string js = "[";
  for (size_t s : o.sizes) {
    const size_t bytes = std::max<size_t>(s / 4 * 4, 4);
    double rd = -1, ring = -1;
    if (pow2 && o.algo != "ring") rd = time_algo(k, false, bytes, o);
    if (o.algo != "rd") ring = time_algo(k, true, bytes, o);
    if (r == 0) {
      char a[32] = "-", b[32] = "-";
      if (rd >= 0) std::snprintf(a, sizeof(a), "%.1f", rd * 1e6);
      if (ring >= 0) std::snprintf(b, sizeof(b), "%.1f", ring * 1e6);
      std::printf("%12zu %12s %12s\n", bytes, a, b);
      std::fflush(stdout);
      const double best = rd < 0 ? ring : ring < 0 ? rd : std::min(rd, ring);
      char row[160];
      std::snprintf(row, sizeof(row), "%s\n {\"size\": %zu, \"rd_us\": %s, \"ring_us\": %s, \"best_us\": %.2f}",
                    js.size() > 1 ? "," : "", s, rd < 0 ? "null" : a, ring < 0 ? "null" : b, best * 1e6);
      js += row;
    }
  }
  if (r == 0 && !o.json.empty()) {
    FILE* f = std::fopen(o.json.c_str(), "w");
    if (!f || std::fprintf(f, "%s\n]\n", js.c_str()) < 0 || std::fclose(f) != 0) die(0, o.json.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int a = 1; a < argc; ++a) {
    const std::string f = argv[a];
    const char* v = a + 1 < argc ? argv[a + 1] : nullptr;
    auto need = [&] {
      if (!v) {
        std::fprintf(stderr, "dccl-tcp-floor: %s needs a value\n", f.c_str());
        std::exit(2);
      }
      ++a;
      return v;
    };
    if (f == "-n") o.n = std::atoi(need());
    else if (f == "-b") o.lo = size_arg(need());
    else if (f == "-e") o.hi = size_arg(need());
    else if (f == "-f") o.factor = size_arg(need());
    else if (f == "--algo") o.algo = need();
    else if (f == "--reps") o.reps = std::atoi(need());
    else if (f == "--iters") o.iters = std::atoi(need());
    else if (f == "--warmup") o.warmup = std::atoi(need());
    else if (f == "--no-reduce") o.reduce = false;
    else if (f == "--json") o.json = need();
    else if (f == "--sizes") {
      std::string list = need();
      for (size_t at = 0; at <= list.size();) {
        size_t comma = list.find(',', at);
        if (comma == std::string::npos) comma = list.size();
        if (comma > at) o.sizes.push_back(size_arg(list.substr(at, comma - at)));
        at = comma + 1;
      }
    }
    else {
      std::fprintf(stderr, "usage: dccl-tcp-floor [-n 2] [-b 64K] [-e 64M] [-f 4] [--sizes 8,1K,...] "
                           "[--algo rd|ring|both] [--reps 5] [--iters N [--warmup W]] [--no-reduce] [--json FILE]\n");
      return f == "-h" || f == "--help" ? 0 : 2;
    }
  }
  if (o.sizes.empty() && o.factor >= 2)
    for (size_t s = o.lo; s <= o.hi; s *= o.factor) o.sizes.push_back(s);
  if (o.n < 2 || o.n > 64 || o.sizes.empty() || o.reps < 1 || o.iters < 0 || o.warmup < 0 ||
      (o.warmup > 0 && o.iters == 0) ||
      (o.algo != "rd" && o.algo != "ring" && o.algo != "both")) {
    std::fprintf(stderr, "dccl-tcp-floor: bad arguments (2 <= n <= 64, -b <= -e, -f >= 2, "
                         "--reps >= 1, --iters >= 0, --warmup >= 0 only with --iters, --algo rd|ring|both)\n");
    return 2;
  }
  std::vector<int> lst(static_cast<size_t>(o.n));
  std::vector<uint16_t> ports(static_cast<size_t>(o.n));
  for (int i = 0; i < o.n; ++i) lst[static_cast<size_t>(i)] = listener(&ports[static_cast<size_t>(i)]);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  sched_getaffinity(0, sizeof(mine), &mine);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  std::vector<pid_t> kids;
  g_spin = o.n <= static_cast<int>(cpus.size());
  for (int r = 1; r < o.n; ++r) {
    pid_t p = ::fork();
    if (p < 0) die(0, "fork");
    if (p == 0) {
      kids.clear();
      if (o.n <= static_cast<int>(cpus.size())) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[static_cast<size_t>(r)], &one);
        sched_setaffinity(0, sizeof(one), &one);
      }
      std::_Exit(rank_main(r, o, mesh(r, o.n, lst, ports)));
    }
    kids.push_back(p);
  }
  if (o.n <= static_cast<int>(cpus.size())) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    sched_setaffinity(0, sizeof(one), &one);
  }
  int rc = rank_main(0, o, mesh(0, o.n, lst, ports));
  for (pid_t p : kids) {
    int st = 0;
    if (::waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  return rc;
}
