// Helpers of the transport tests: N forked processes exchange blobs through files in
// a temp dir and run the same body; each child reports through its exit code.
#pragma once
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "net/transport.hpp"

namespace dccl::net::nettest {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

#define CHILD_CHECK(cond)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "[child %d] %s:%d: check failed: %s\n", getpid(), __FILE__, __LINE__, \
              #cond);                                                                    \
      _exit(2);                                                                          \
    }                                                                                    \
  } while (0)

// Publishes `data` as <dir>/<key>.<rank> and returns every rank's value.
// While waiting it progresses `t` (if any): peers may need us to progress to finish.
inline std::vector<std::string> exchange(const std::string& dir, const std::string& key, int rank,
                                  int n, const std::string& data, Transport* t = nullptr) {
  std::string path = dir + "/" + key + "." + std::to_string(rank);
  {
    std::ofstream f(path + ".tmp", std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  fs::rename(path + ".tmp", path);
  std::vector<std::string> out(n);
  auto deadline = Clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < n; ++r) {
    std::string p = dir + "/" + key + "." + std::to_string(r);
    while (!fs::exists(p)) {
      CHILD_CHECK(Clock::now() < deadline);
      if (t) t->progress();
      usleep(t ? 20 : 500);
    }
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    out[r] = ss.str();
  }
  return out;
}

struct Ctx {
  int rank, n;
  std::string dir;
  std::unique_ptr<Transport> t;
  void barrier(const std::string& key) { exchange(dir, key, rank, n, "x", t.get()); }
};

// Forks n ranks running body(ctx); returns when all exit, asserting exit code 0.
inline void run_ranks(int n, TransportOptions base, const std::function<void(Ctx&)>& body,
               bool pin_two_cores = false,
               const std::function<std::string(int)>& host_of = nullptr) {
  char tmpl[] = "/tmp/dccl_net_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::vector<pid_t> pids;
  fflush(stdout);  // children must not inherit (and print again) buffered output
  fflush(stderr);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        if (pin_two_cores) {
          cpu_set_t all, two;
          CPU_ZERO(&two);
          sched_getaffinity(0, sizeof(all), &all);
          for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c)
            if (CPU_ISSET(c, &all)) CPU_SET(c, &two), ++k;
          sched_setaffinity(0, sizeof(two), &two);
        }
        Ctx ctx{r, n, dir, nullptr};
        TransportOptions o = base;
        o.rank = r;
        o.nranks = n;
        if (host_of) o.host = host_of(r);
        ctx.t = Transport::create(o);
        ctx.t->connect(exchange(dir, "blob", r, n, ctx.t->local_blob()));
        body(ctx);
        ctx.barrier("done");  // nobody tears down while a peer still talks to it
      } catch (const std::exception& e) {
        fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
        code = 3;
      }
      fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < n; ++r) {
    int st = 0;
    ASSERT_EQ(waitpid(pids[r], &st, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "rank " << r << " status " << st;
  }
  fs::remove_all(dir);
}

// "tcpsock": tcp with every message on DirectCCL's socket path (the default on an
// untrusted network). The others trust the network, so that they test libfabric's
// providers as they are (net/fabric/provider.hpp).
inline TransportOptions opts(const std::string& prov, int timeout_ms = 20000) {
  TransportOptions o;
  o.provider = prov == "tcpsock" ? "tcp" : prov;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  if (prov == "tcpsock") o.sock_bytes = uint64_t(1) << 40;
  o.trust_network = prov != "tcpsock";
  return o;
}

inline uint8_t pattern(int src, size_t i, int salt) {
  return static_cast<uint8_t>(src * 131 + i * 7 + (i >> 12) + salt * 13);
}
inline void fill(std::vector<uint8_t>& v, int src, int salt) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = pattern(src, i, salt);
}
inline bool verify(const std::vector<uint8_t>& v, size_t len, int src, int salt) {
  for (size_t i = 0; i < len; ++i)
    if (v[i] != pattern(src, i, salt)) {
      fprintf(stderr, "mismatch at byte %zu of %zu from rank %d\n", i, len, src);
      return false;
    }
  return true;
}

// Receives len bytes from `from` into `in` (posted first) while sending len bytes of
// `out` to `to`, and waits for both; the caller's requests keep the results.
inline void send_recv(Ctx& c, int to, const void* out, int from, void* in, size_t len, uint64_t tag,
                      const char* what, Request& rs, Request& rr, MemRegion* mo = nullptr,
                      MemRegion* mi = nullptr) {
  c.t->irecv(from, in, len, tag, &rr, mi);
  c.t->isend(to, out, len, tag, &rs, mo);
  Request* both[] = {&rr, &rs};
  c.t->wait(both, 2, what);
}

}  // namespace dccl::net::nettest
