// Data-path checks on sim memory, run under dccl-run:
//  - staged mode: host-staged bytes equal what the algorithm moves, computed here
//    from the algorithm's traffic (summed over ranks), and results are right;
//  - direct mode: nothing staged, no host copies, direct bytes as computed;
//  - registration cache: repeated operations register once, freeing invalidates;
//  - a failed viability layer: DCCL_PEER_DIRECT=1 fails naming it, auto falls back
//    (logged once) and still gives correct results.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dccl/dccl.h"
#include "mem/backend.hpp"

namespace {

int g_rank, g_n, g_fail = 0;

#define EXPECT(cond, ...)                                      \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "rank %d: FAILED %s: ", g_rank, #cond);  \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, "\n");                                   \
      ++g_fail;                                                \
    }                                                          \
  } while (0)

dcclComm_t make_comm(const char* peer_direct, const char* algo) {
  setenv("DCCL_PEER_DIRECT", peer_direct, 1);
  setenv("DCCL_ALGO", algo, 1);
  dcclComm_t c = nullptr;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) {
    fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr));
    exit(3);
  }
  dcclCommUserRank(c, &g_rank);
  dcclCommCount(c, &g_n);
  return c;
}

uint64_t sum_over_ranks(dcclComm_t c, uint64_t v) {
  dcclAllReduce(&v, &v, 1, dcclUint64, dcclSum, c, nullptr);  // host memory: never staged
  return v;
}

struct Sim {
  void* p = nullptr;
  size_t bytes;
  explicit Sim(size_t b) : bytes(b) { dcclMemAlloc(&p, b, dcclMemSim); }
  ~Sim() { dcclMemFree(p); }
  void fill(float v) {
    std::vector<float> h(bytes / 4, v);
    dcclMemcpy(p, h.data(), bytes);
  }
  std::vector<float> read() const {
    std::vector<float> h(bytes / 4);
    dcclMemcpy(h.data(), p, bytes);
    return h;
  }
};

// Bytes all ranks together send for one call with these algorithms (each hop counted once).
struct Traffic {
  const char* name;
  uint64_t sent_total;
};

void traffic_checks(const char* mode) {
  const bool staged = !strcmp(mode, "0");
  dcclComm_t c = make_comm(mode, "allreduce:ring,broadcast:chain,allgather:ring");
  const size_t count = 3 * 1024 * 1024 / 4 + 7;  // odd, several staging slots per block
  const uint64_t n = static_cast<uint64_t>(g_n), es = 4;
  Sim a(count * 4 * n), b(count * 4 * n);
  a.fill(1.0f + g_rank);
  struct Case {
    const char* name;
    uint64_t sent_total;
    dcclResult_t (*run)(Sim&, Sim&, size_t, dcclComm_t);
  };
  const Case cases[] = {
      {"all_reduce ring", 2 * (n - 1) * count * es,
       [](Sim& s, Sim& r, size_t k, dcclComm_t cm) { return dcclAllReduce(s.p, r.p, k, dcclFloat32, dcclSum, cm, nullptr); }},
      {"broadcast chain", (n - 1) * count * es,
       [](Sim& s, Sim& r, size_t k, dcclComm_t cm) { return dcclBroadcast(s.p, r.p, k, dcclFloat32, 0, cm, nullptr); }},
      {"all_gather ring", n * (n - 1) * count * es,
       [](Sim& s, Sim& r, size_t k, dcclComm_t cm) { return dcclAllGather(s.p, r.p, k, dcclFloat32, cm, nullptr); }},
      {"reduce_scatter ring", n * (n - 1) * count * es,
       [](Sim& s, Sim& r, size_t k, dcclComm_t cm) { return dcclReduceScatter(s.p, r.p, k, dcclFloat32, dcclSum, cm, nullptr); }},
      {"alltoall pairwise", n * (n - 1) * count * es,
       [](Sim& s, Sim& r, size_t k, dcclComm_t cm) { return dcclAlltoAll(s.p, r.p, k, dcclFloat32, cm, nullptr); }},
  };
  for (const Case& cs : cases) {
    dcclStats_t before, after;
    dcclCommGetStats(c, &before);
    dcclResult_t rc = cs.run(a, b, count, c);
    EXPECT(rc == dcclSuccess, "%s: %s", cs.name, dcclGetLastError(c));
    dcclCommGetStats(c, &after);
    uint64_t staged_bytes = sum_over_ranks(c, after.bytesRelayedHost - before.bytesRelayedHost);
    uint64_t direct = sum_over_ranks(c, after.bytesSentDirect - before.bytesSentDirect);
    uint64_t copies = sum_over_ranks(c, after.hostCopies - before.hostCopies);
    if (staged) {
      // Every byte sent crossed a staging slot on the sender and on the receiver.
      EXPECT(staged_bytes == 2 * cs.sent_total, "%s staged: staged %lu, expected %lu", cs.name,
             (unsigned long)staged_bytes, (unsigned long)(2 * cs.sent_total));
      EXPECT(direct == 0, "%s staged: direct %lu", cs.name, (unsigned long)direct);
      EXPECT(copies > 0, "%s staged: no host copies counted", cs.name);
    } else {
      EXPECT(staged_bytes == 0 && copies == 0, "%s direct: staged %lu copies %lu", cs.name, (unsigned long)staged_bytes,
             (unsigned long)copies);
      EXPECT(direct == cs.sent_total, "%s direct: sent %lu, expected %lu", cs.name, (unsigned long)direct,
             (unsigned long)cs.sent_total);
    }
  }
  // The allreduce result itself: sum of 1+r over ranks.
  dcclAllReduce(a.p, b.p, count, dcclFloat32, dcclSum, c, nullptr);
  std::vector<float> h = b.read();
  const float want = static_cast<float>(n * (n + 1) / 2);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += h[i] != want;
  EXPECT(wrong == 0, "allreduce on sim memory (mode %s): %zu wrong of %zu", mode, wrong, count);
  dcclCommDestroy(c);
  if (g_rank == 0) printf("path_check traffic (DCCL_PEER_DIRECT=%s): %s\n", mode, g_fail ? "FAILED" : "ok");
}

void cache_checks() {
  dcclComm_t c = make_comm("1", "allreduce:ring");
  dcclStats_t s0, s1, s2, s3;
  {
    Sim a(1 << 20), b(1 << 20);
    a.fill(1.0f);
    dcclAllReduce(a.p, b.p, (1 << 20) / 4, dcclFloat32, dcclSum, c, nullptr);
    dcclCommGetStats(c, &s0);
    for (int i = 0; i < 10; ++i) dcclAllReduce(a.p, b.p, (1 << 20) / 4, dcclFloat32, dcclSum, c, nullptr);
    dcclCommGetStats(c, &s1);
    EXPECT(s1.registrations == s0.registrations, "repeated allreduce registered again: %lu -> %lu",
           (unsigned long)s0.registrations, (unsigned long)s1.registrations);
    EXPECT(s1.regCacheHits > s0.regCacheHits, "no cache hits counted");
    EXPECT(s1.allocations == s0.allocations, "steady state allocated: %lu -> %lu", (unsigned long)s0.allocations,
           (unsigned long)s1.allocations);
  }
  // Freed through DirectCCL: new buffers (possibly at the same addresses) register anew.
  Sim a(1 << 20), b(1 << 20);
  a.fill(2.0f);
  dcclAllReduce(a.p, b.p, (1 << 20) / 4, dcclFloat32, dcclSum, c, nullptr);
  dcclCommGetStats(c, &s2);
  EXPECT(s2.registrations > s1.registrations, "freed buffers were not invalidated (registrations %lu)",
         (unsigned long)s2.registrations);
  std::vector<float> h = b.read();
  EXPECT(h[0] == 2.0f * g_n && h.back() == 2.0f * g_n, "result after re-registration: %g", h[0]);
  dcclAllReduce(a.p, b.p, (1 << 20) / 4, dcclFloat32, dcclSum, c, nullptr);
  dcclCommGetStats(c, &s3);
  EXPECT(s3.registrations == s2.registrations, "re-registered buffers registered again");
  dcclCommDestroy(c);
  if (g_rank == 0) printf("path_check cache: %s\n", g_fail ? "FAILED" : "ok");
}

void viability_checks() {
  dccl::mem::sim_set_dmabuf_enabled(false);  // as a driver without dma-buf export
  Sim a(4096), b(4096);
  a.fill(1.0f);
  {
    dcclComm_t c = make_comm("1", "");
    dcclResult_t rc = dcclAllReduce(a.p, b.p, 1024, dcclFloat32, dcclSum, c, nullptr);
    const char* msg = dcclGetLastError(c);
    EXPECT(rc == dcclUnavailable, "DCCL_PEER_DIRECT=1 without export: rc %d", rc);
    EXPECT(strstr(msg, "backend export") && strstr(msg, "DCCL_PEER_DIRECT=1"), "message does not name the layer: %s", msg);
    dcclCommDestroy(c);
  }
  // auto: falls back to staging, says why once at INFO (at init), stays correct.
  char path[] = "/tmp/dccl-path-check-XXXXXX";
  int fd = mkstemp(path);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("DCCL_DEBUG", "INFO", 1);
  dcclComm_t c = make_comm("auto", "");
  dcclStats_t before, after;
  dcclCommGetStats(c, &before);
  dcclResult_t rc = dcclSuccess;
  for (int i = 0; i < 3 && rc == dcclSuccess; ++i) rc = dcclAllReduce(a.p, b.p, 1024, dcclFloat32, dcclSum, c, nullptr);
  dcclCommGetStats(c, &after);
  fflush(stderr);
  dup2(saved, 2);
  std::vector<char> log(1 << 16);
  ssize_t len = pread(fd, log.data(), log.size() - 1, 0);
  log[len > 0 ? static_cast<size_t>(len) : 0] = 0;
  close(fd);
  unlink(path);
  int said = 0;
  for (const char* p = log.data(); (p = strstr(p, "sim memory: host-staged: layer")); ++p) ++said;
  EXPECT(rc == dcclSuccess, "auto fallback failed: %s", dcclGetLastError(c));
  EXPECT(said == 1, "fallback reason logged %d times (want once): %s", said, log.data());
  EXPECT(strstr(log.data(), "backend export") != nullptr, "fallback reason does not name the layer");
  EXPECT(after.bytesRelayedHost > before.bytesRelayedHost, "auto fallback staged nothing");
  std::vector<float> h = b.read();
  EXPECT(h[0] == static_cast<float>(g_n) && h[1023] == static_cast<float>(g_n), "fallback result %g", h[0]);
  dcclCommDestroy(c);
  if (g_rank == 0) printf("path_check viability: %s\n", g_fail ? "FAILED" : "ok");
}

}  // namespace

int main() {
  setenv("DCCL_STAGING_SLOT_BYTES", "256K", 1);
  traffic_checks("0");
  traffic_checks("1");
  cache_checks();
  viability_checks();
  return g_fail ? 1 : 0;
}
