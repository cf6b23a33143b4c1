// Misuse that used to return wrong data as success, or an unnamed failure (run
// under dccl-run; each scenario exits 0 when every rank saw what it must):
//   misuse_check seg-count COLL   ranks on one host pass counts that differ (rank
//                                 1: 1024 elements more) to all_reduce, all_gather
//                                 or reduce_scatter on the shared segment's chunked
//                                 path: every rank fails naming both counts
//   misuse_check seg-type [small] all_reduce of 1 Mi float32 on rank 0, int32 on the
//                                 others (same bytes; small: 1 Ki, the one-shot
//                                 slots): every rank fails naming both
//   misuse_check seg-op [small]   all_reduce sum on rank 1, max on the others:
//                                 every rank fails naming both ops
//   misuse_check fork             a forked child calls the parent's communicator:
//                                 refused (all_reduce and destroy), naming the fork;
//                                 the parents then reduce correctly
//   misuse_check threads          two threads of rank 0 inside one communicator at
//                                 once: both calls fail naming the misuse, and so
//                                 does rank 1's call (the communicator is stopped)
//   misuse_check contract         dcclCommRegister of a wrapping or unmapped range,
//                                 then Split, Register, PreMulSum and a send in a
//                                 group after dcclCommFinalize: refused with the
//                                 right codes
//   misuse_check group-stream     a stream destroyed inside an open group that has a
//                                 call on it: dcclGroupEnd refuses that call naming
//                                 the stream, runs the others; no hang, no crash
//   misuse_check split-destroy    rank 1 splits while rank 0 destroys: the split
//                                 fails naming the mismatch (dcclInvalidUsage)
//   misuse_check check-one        DCCL_CHECK=1 on rank 1 only: init fails on every
//                                 rank naming DCCL_CHECK
//   misuse_check ifname           DCCL_SOCKET_IFNAME names no interface: init fails
//                                 naming it
//   misuse_check p2p-crossed      both ranks send 1 MiB to each other outside a group
//                                 before receiving: the sends time out naming the
//                                 receive the peer did not post
//   misuse_check p2p-size         rank 0 sends, rank 1 receives another count (one
//                                 message part and several, longer and shorter, and
//                                 the first part alike): the receive fails at once
//                                 (dcclInvalidUsage, "count mismatch"), neither rank
//                                 waits for its timeout; matched pairs then arrive
//                                 intact
//   misuse_check init-one CASE     3 ranks; rank 1's init fails or its process ends
//                                 inside init; rank 2 comes 2 s late: ranks 0 and 2
//                                 fail their init within 10 s (DCCL_TIMEOUT_S is 60)
//                                 naming rank 1 and the cause. CASE: bad
//                                 (DCCL_NET_IFNAME names no interface: the transport
//                                 fails), exit (the process ends), and settings refused
//                                 before rank 1 joined the store: algo (DCCL_ALGO),
//                                 ifname (DCCL_SOCKET_IFNAME), setting (DCCL_TIMEOUT_S)
//   misuse_check type-collide     2 ranks, calls of the same bytes whose datatypes
//                                 (or counts and datatypes) differ, at counts whose
//                                 8-bit call hash collided: all_reduce, reduce_scatter
//                                 and reduce over the transports' tags; no rank that
//                                 receives may return dcclSuccess (they paired and
//                                 returned wrong data with the 8-bit hash)
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"

namespace {

int g_rank = -1;

bool has(const char* text, const char* part) { return text && std::strstr(text, part) != nullptr; }

// Prints the verdict of one expectation; returns 1 when it failed.
int expect(bool ok, const std::string& what, const char* detail = "") {
  std::printf("rank %d: %s: %s%s%s\n", g_rank, ok ? "ok" : "FAILED", what.c_str(), *detail ? ": " : "", detail);
  std::fflush(stdout);
  return ok ? 0 : 1;
}

dcclComm_t init() {
  dcclComm_t c = nullptr;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", g_rank, dcclGetLastError(nullptr));
    std::exit(3);
  }
  return c;
}

// Rank 1 passes 1024 elements more; every rank must fail naming both counts.
int seg_count(const std::string& coll) {
  dcclComm_t c = init();
  int n = 0;
  dcclCommCount(c, &n);
  const size_t base = size_t{1} << 20, count = base + (g_rank == 1 ? 1024 : 0);
  std::vector<float> s(count * static_cast<size_t>(n), 1.0f), d(count * static_cast<size_t>(n), 0.0f);
  dcclResult_t rc = dcclInternalError;
  if (coll == "all_reduce") rc = dcclAllReduce(s.data(), d.data(), count, dcclFloat32, dcclSum, c, nullptr);
  if (coll == "all_gather") rc = dcclAllGather(s.data(), d.data(), count, dcclFloat32, c, nullptr);
  if (coll == "reduce_scatter") rc = dcclReduceScatter(s.data(), d.data(), count, dcclFloat32, dcclSum, c, nullptr);
  const char* msg = dcclGetLastError(c);
  const bool ok = rc == dcclInvalidUsage && has(msg, "the calls differ between ranks") &&
                  has(msg, std::to_string(base).c_str()) && has(msg, std::to_string(base + 1024).c_str());
  int bad = expect(ok, coll + " of " + std::to_string(count) + " elements refused naming both counts",
                   rc == dcclSuccess ? "returned dcclSuccess" : msg);
  dcclCommDestroy(c);
  return bad;
}

// Rank 0 (seg-type) or rank 1 (seg-op) calls all_reduce with another datatype or op
// than the others, the same bytes: 1 Mi elements (the chunked path) or, with
// `small`, 1 Ki (the one-shot slots). Every rank must fail naming both calls.
int seg_other_call(bool type, bool small) {
  dcclComm_t c = init();
  const size_t count = small ? size_t{1} << 10 : size_t{1} << 20;
  std::vector<uint32_t> s(count, 0x3f800000u), d(count, 0);  // 1.0f as float32, 1065353216 as int32
  const bool odd = g_rank == (type ? 0 : 1);
  const dcclDataType_t t = type && odd ? dcclInt32 : dcclFloat32;
  const dcclRedOp_t op = !type && odd ? dcclSum : dcclMax;
  const dcclResult_t rc = dcclAllReduce(s.data(), d.data(), count, t, type ? dcclSum : op, c, nullptr);
  const char* msg = dcclGetLastError(c);
  const bool named = type ? has(msg, "float32") && has(msg, "int32") : has(msg, "(sum)") && has(msg, "(max)");
  const bool ok = rc == dcclInvalidUsage && named && has(msg, "the calls differ between ranks");
  int bad = expect(ok, std::string("all_reduce of ") + std::to_string(count) + (type ? " float32 against int32" : " sum against max") +
                           " refused naming both",
                   rc == dcclSuccess ? "returned dcclSuccess" : msg);
  dcclCommDestroy(c);
  return bad;
}

// All-reduce of rank-dependent values, checked against the sum computed here.
int checked_allreduce(dcclComm_t c, int n, const char* what) {
  const size_t count = 4096;
  std::vector<float> s(count), d(count, -1.0f);
  for (size_t i = 0; i < count; ++i) s[i] = static_cast<float>(g_rank + 1) * static_cast<float>(i % 7);
  const dcclResult_t rc = dcclAllReduce(s.data(), d.data(), count, dcclFloat32, dcclSum, c, nullptr);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = static_cast<double>(n) * (n + 1) / 2.0 * static_cast<double>(i % 7);
    if (static_cast<double>(d[i]) != want) ++wrong;
  }
  return expect(rc == dcclSuccess && wrong == 0, what, rc != dcclSuccess ? dcclGetLastError(c) : wrong ? "wrong data" : "");
}

int fork_case() {
  dcclComm_t c = init();
  int n = 0;
  dcclCommCount(c, &n);
  dcclStream_t st = nullptr;
  dcclStreamCreate(&st);
  int bad = checked_allreduce(c, n, "all_reduce before the fork");
  const pid_t child = fork();
  if (child == 0) {
    std::vector<float> s(4096, 100.0f), d(4096, 0.0f);
    const dcclResult_t rc = dcclAllReduce(s.data(), d.data(), s.size(), dcclFloat32, dcclSum, c, nullptr);
    int cbad = expect(rc == dcclInvalidUsage && has(dcclGetLastError(c), "is a fork of pid"),
                      "the child's all_reduce on its parent's communicator is refused", dcclGetLastError(c));
    const dcclResult_t rs = dcclStreamSynchronize(st);
    cbad += expect(rs == dcclInvalidUsage && has(dcclGetLastError(nullptr), "is a fork of pid"),
                   "the child's synchronize of its parent's stream is refused", dcclGetLastError(nullptr));
    const dcclResult_t rd = dcclCommDestroy(c);
    cbad += expect(rd == dcclInvalidUsage && has(dcclGetLastError(nullptr), "left as it is"),
                   "the child's destroy leaves the parent's communicator alone", dcclGetLastError(nullptr));
    std::fflush(stdout);
    _exit(cbad ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  bad += expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child saw every refusal");
  bad += checked_allreduce(c, n, "all_reduce after the child's calls");
  dcclStreamDestroy(st);
  bad += expect(dcclCommDestroy(c) == dcclSuccess, "destroy in the parent", dcclGetLastError(nullptr));
  return bad;
}

// Rank 0: thread A calls all_reduce and waits inside for rank 1 (500 ms late);
// thread B calls while A is inside. Both must fail naming the misuse, and rank 1's
// call must fail too (the communicator was stopped on every rank).
int threads_case() {
  dcclComm_t c = init();
  std::vector<float> a(1024, 1.0f), b(1024, 2.0f), ra(1024), rb(1024);
  const char* misuse = "two threads must not use one communicator at once";
  int bad = 0;
  if (g_rank == 0) {
    dcclResult_t rca = dcclSuccess;
    std::string msga;
    std::thread ta([&] {
      rca = dcclAllReduce(a.data(), ra.data(), a.size(), dcclFloat32, dcclSum, c, nullptr);
      msga = dcclGetLastError(c);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const dcclResult_t rcb = dcclAllReduce(b.data(), rb.data(), b.size(), dcclFloat32, dcclSum, c, nullptr);
    bad += expect(rcb == dcclInvalidUsage && has(dcclGetLastError(c), misuse), "the second thread's call is refused",
                  dcclGetLastError(c));
    ta.join();
    bad += expect(rca != dcclSuccess && has(msga.c_str(), misuse), "the first thread's call fails too", msga.c_str());
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const dcclResult_t rc = dcclAllReduce(a.data(), ra.data(), a.size(), dcclFloat32, dcclSum, c, nullptr);
    bad += expect(rc != dcclSuccess && has(dcclGetLastError(c), misuse), "the peer's call fails naming the misuse",
                  rc == dcclSuccess ? "returned dcclSuccess" : dcclGetLastError(c));
  }
  dcclCommDestroy(c);
  return bad;
}

int contract_case() {
  dcclComm_t c = init();
  int bad = 0;
  std::vector<char> buf(1 << 16);
  void* h = nullptr;
  dcclResult_t rc = dcclCommRegister(c, buf.data(), SIZE_MAX, &h);
  bad += expect(rc == dcclInvalidArgument && has(dcclGetLastError(nullptr), "wraps"), "register of SIZE_MAX bytes",
                dcclGetLastError(nullptr));
  void* gone = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(gone, 1 << 16);
  rc = dcclCommRegister(c, gone, 1 << 16, &h);
  bad += expect(rc == dcclInvalidArgument && has(dcclGetLastError(nullptr), "not mapped"), "register of unmapped memory",
                dcclGetLastError(nullptr));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* two = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  munmap(two + page, page);
  rc = dcclCommRegister(c, two, 2 * page, &h);
  bad += expect(rc == dcclInvalidArgument && has(dcclGetLastError(nullptr), "not mapped"),
                "register past the end of a mapping", dcclGetLastError(nullptr));
  munmap(two, page);
  rc = dcclCommRegister(c, buf.data(), buf.size(), &h);
  bad += expect(rc == dcclSuccess && h != nullptr, "register of a live buffer", dcclGetLastError(nullptr));
  if (rc == dcclSuccess) bad += expect(dcclCommDeregister(c, h) == dcclSuccess, "deregister");

  bad += expect(dcclCommFinalize(c) == dcclSuccess, "finalize", dcclGetLastError(nullptr));
  dcclComm_t sub = nullptr;
  rc = dcclCommSplit(c, 0, g_rank, &sub, nullptr);
  bad += expect(rc == dcclInvalidUsage && has(dcclGetLastError(nullptr), "finalized"), "split after finalize",
                dcclGetLastError(nullptr));
  rc = dcclCommRegister(c, buf.data(), buf.size(), &h);
  bad += expect(rc == dcclInvalidUsage && has(dcclGetLastError(nullptr), "finalized"), "register after finalize",
                dcclGetLastError(nullptr));
  float scalar = 2.0f;
  dcclRedOp_t op;
  rc = dcclRedOpCreatePreMulSum(&op, &scalar, dcclFloat32, dcclScalarHostImmediate, c);
  bad += expect(rc == dcclInvalidUsage && has(dcclGetLastError(nullptr), "finalized"), "PreMulSum after finalize",
                dcclGetLastError(nullptr));
  int one = 1;
  dcclGroupStart();
  rc = dcclSend(&one, 1, dcclInt32, 0, c, nullptr);
  bad += expect(rc == dcclInvalidUsage && has(dcclGetLastError(nullptr), "finalized"), "send in a group after finalize",
                rc == dcclSuccess ? "returned dcclSuccess" : dcclGetLastError(nullptr));
  rc = dcclGroupEnd();
  bad += expect(rc == dcclInvalidUsage, "group end after finalize", dcclGetLastError(nullptr));
  bad += expect(dcclCommDestroy(c) == dcclSuccess, "destroy after finalize", dcclGetLastError(nullptr));
  return bad;
}

// A stream destroyed between a group's call on it and dcclGroupEnd: the end refuses
// that call, naming the stream, instead of queueing it on the freed stream (it hung
// or crashed there); the group's call on a live stream runs, the communicator goes on.
int group_stream_case() {
  dcclComm_t c = init();
  int n = 0, bad = 0;
  dcclCommCount(c, &n);
  dcclStream_t gone = nullptr, kept = nullptr;
  if (dcclStreamCreate(&gone) != dcclSuccess || dcclStreamCreate(&kept) != dcclSuccess) return expect(false, "streams");
  int x = g_rank + 1, y = -1, z = -1;
  dcclGroupStart();
  dcclAllReduce(&x, &y, 1, dcclInt32, dcclSum, c, gone);
  dcclAllReduce(&x, &z, 1, dcclInt32, dcclSum, c, kept);
  dcclStreamDestroy(gone);
  const dcclResult_t rc = dcclGroupEnd();
  const std::string msg = dcclGetLastError(nullptr);
  bad += expect(rc == dcclInvalidUsage && has(msg.c_str(), "not a live stream") && has(msg.c_str(), "dcclGroupEnd") &&
                    has(msg.c_str(), ("rank " + std::to_string(g_rank)).c_str()),
                "group end refuses the call on the destroyed stream", msg.c_str());
  bad += expect(dcclStreamSynchronize(kept) == dcclSuccess && z == n * (n + 1) / 2, "the call on the live stream ran",
                dcclGetLastError(nullptr));
  bad += expect(y == -1, "nothing ran for the destroyed stream");
  bad += checked_allreduce(c, n, "all_reduce after the group");
  dcclStreamDestroy(kept);
  bad += expect(dcclCommDestroy(c) == dcclSuccess, "destroy", dcclGetLastError(nullptr));
  return bad;
}

int split_destroy_case() {
  dcclComm_t c = init();
  if (g_rank == 0) return expect(dcclCommDestroy(c) == dcclSuccess, "destroy", dcclGetLastError(nullptr));
  dcclComm_t sub = nullptr;
  const dcclResult_t rc = dcclCommSplit(c, 0, 0, &sub, nullptr);
  const char* msg = dcclGetLastError(nullptr);
  const int bad = expect(rc == dcclInvalidUsage && has(msg, "rank 0 did not call dcclCommSplit"),
                         "split against a destroy names the mismatch", msg);
  dcclCommAbort(c);  // rank 0 is gone: a destroy would wait for it
  return bad;
}

// Init must fail on this rank with dcclInvalidUsage/Argument naming `part`.
int init_fails(const char* part, const char* what) {
  dcclComm_t c = nullptr;
  const dcclResult_t rc = dcclCommInitFromEnv(&c);
  const char* msg = dcclGetLastError(nullptr);
  if (rc == dcclSuccess) dcclCommDestroy(c);
  return expect((rc == dcclInvalidUsage || rc == dcclInvalidArgument) && has(msg, part), what,
                rc == dcclSuccess ? "init succeeded" : msg);
}

}  // namespace

// rank 1: init fails (bad) or the process ends 0.5 s into init (exit, status 0, so
// that dccl-run's status is the others'); ranks 0 and 2 check how theirs failed.
// One case of init-one: the variable rank 1 sets (none: its process ends in init)
// and the text its own error and the others' must carry.
struct InitOneCase {
  const char* name;
  const char* var;
  const char* value;
  const char* cause;
};
constexpr InitOneCase kInitOne[] = {
    {"bad", "DCCL_NET_IFNAME", "nosuchif0", "nosuchif0"},
    {"exit", nullptr, nullptr, "exited during init"},
    {"algo", "DCCL_ALGO", "allreduce:bogus", "'bogus' is not an algorithm"},
    {"ifname", "DCCL_SOCKET_IFNAME", "nosuchif1", "nosuchif1"},
    {"setting", "DCCL_TIMEOUT_S", "abc", "DCCL_TIMEOUT_S"},
};

int init_one_case(const std::string& name) {
  const InitOneCase* k = nullptr;
  for (const InitOneCase& c : kInitOne)
    if (name == c.name) k = &c;
  if (!k) return expect(false, "init-one case '" + name + "' is known");
  if (g_rank == 1) {
    if (k->var) setenv(k->var, k->value, 1);
    else std::thread([] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); _exit(0); }).detach();
    dcclComm_t c = nullptr;
    const dcclResult_t rc = dcclCommInitFromEnv(&c);
    return expect(k->var && rc != dcclSuccess && has(dcclGetLastError(nullptr), k->cause),
                  "rank 1's own init fails naming its setting", dcclGetLastError(nullptr));
  }
  if (g_rank == 2) std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto t0 = std::chrono::steady_clock::now();
  dcclComm_t c = nullptr;
  const dcclResult_t rc = dcclCommInitFromEnv(&c);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const char* msg = dcclGetLastError(nullptr);
  if (rc == dcclSuccess) dcclCommDestroy(c);
  return expect(rc == dcclRemoteError && took < 10 && has(msg, "rank 1 (pid ") && has(msg, k->cause),
                std::string("init fails within 10 s naming rank 1 and the cause (took ") + std::to_string(took) + " s)",
                rc == dcclSuccess ? "init succeeded" : msg);
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// One send/recv pair on a new communicator: rank 0 sends `sent` float32, rank 1
// receives `expected`. Returns the failures.
int p2p_pair(size_t sent, size_t expected) {
  dcclComm_t c = init();
  const size_t n = g_rank == 0 ? sent : expected;
  std::vector<float> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = g_rank == 0 ? static_cast<float>(i % 1000) + 0.5f : -1.0f;
  const auto t = std::chrono::steady_clock::now();
  const dcclResult_t rc = g_rank == 0 ? dcclSend(buf.data(), n, dcclFloat32, 1, c, nullptr)
                                      : dcclRecv(buf.data(), n, dcclFloat32, 0, c, nullptr);
  const double ms = ms_since(t);
  const char* msg = rc == dcclSuccess ? "" : dcclGetLastError(c);
  const std::string what = std::string(g_rank == 0 ? "send" : "recv") + " of " + std::to_string(n) + " (" +
                           std::to_string(sent) + " sent, " + std::to_string(expected) + " expected) in " +
                           std::to_string(static_cast<int>(ms)) + " ms";
  int bad = 0;
  if (sent == expected) {
    bool intact = rc == dcclSuccess;
    for (size_t i = 0; intact && g_rank == 1 && i < n; ++i) intact = buf[i] == static_cast<float>(i % 1000) + 0.5f;
    bad += expect(intact, what + ": arrives intact", msg);
  } else if (g_rank == 1) {
    // Well inside DCCL_TIMEOUT_S (20 s): the mismatch is seen when the message comes.
    bad += expect(rc == dcclInvalidUsage && has(msg, "count mismatch: rank 0") && ms < 5000, what + ": fails at once",
                  msg);
  } else {
    bad += expect(ms < 10000, what + ": returns without waiting for the timeout", msg);
  }
  dcclCommDestroy(c);
  return bad;
}

int p2p_size_case() {
  // shm cuts messages at 1 MiB (262144 float32), tcp;ofi_rxm further up: pairs with one
  // part, several, and a receive of exactly one part against a longer message.
  const size_t part = 262144;
  static const size_t all_cases[][2] = {{4, 6},        {4, 2},         {part + 1000, part}, {part, part + 1000},
                             {3 * part, 2 * part + 7}, {1000, 3 * part}, {3 * part + 5, 3 * part + 5},
                             {4, 4}};
  int bad = 0;
  const char* only = std::getenv("P2P_ONLY");
  int i = 0;
  for (const auto& k : all_cases) { if (!only || std::atoi(only) == i) bad += p2p_pair(k[0], k[1]); ++i; }
  return bad;
}

// Both ranks send 1 MiB to each other before receiving, outside a group: neither
// send can complete; each times out naming the receive its peer did not post.
int p2p_crossed_case() {
  dcclComm_t c = init();
  const int peer = 1 - g_rank;
  std::vector<float> out(1 << 18, 1.0f), in(1 << 18);
  const dcclResult_t rc = dcclSend(out.data(), out.size(), dcclFloat32, peer, c, nullptr);
  const char* msg = rc == dcclSuccess ? "" : dcclGetLastError(c);
  int bad = expect(rc == dcclTimeout && has(msg, "did not post the matching receive") && has(msg, "one group"),
                   "crossed sends time out naming the missing receive", msg);
  if (rc == dcclSuccess) dcclRecv(in.data(), in.size(), dcclFloat32, peer, c, nullptr);
  dcclCommDestroy(c);
  return bad;
}

// One mismatched call per case on a fresh communicator; rank 1 takes the second
// signature. A rank that only sends (reduce's non-root) may complete.
int type_collide_case() {
  struct Case {
    const char* name;
    int coll;  // 0 all_reduce, 1 reduce_scatter, 2 reduce (root 0)
    size_t count[2];
    dcclDataType_t dt[2];
  };
  const Case cases[] = {
      {"all_reduce 206 float32 against int32", 0, {206, 206}, {dcclFloat32, dcclInt32}},
      {"reduce_scatter 202 float32 against int32", 1, {202, 202}, {dcclFloat32, dcclInt32}},
      {"reduce 87 float32 against int32", 2, {87, 87}, {dcclFloat32, dcclInt32}},
      {"all_reduce 1174 float32 against 587 float64", 0, {1174, 587}, {dcclFloat32, dcclFloat64}},
      {"all_reduce 283 float16 against bfloat16", 0, {283, 283}, {dcclFloat16, dcclBfloat16}},
  };
  int bad = 0;
  for (const Case& k : cases) {
    dcclComm_t c = init();
    const int me = g_rank == 1 ? 1 : 0;
    const size_t count = k.count[me];
    std::vector<unsigned char> s(count * 8 * 2, 0x11), d(count * 8 * 2, 0);
    dcclResult_t rc = dcclInternalError;
    if (k.coll == 0) rc = dcclAllReduce(s.data(), d.data(), count, k.dt[me], dcclSum, c, nullptr);
    if (k.coll == 1) rc = dcclReduceScatter(s.data(), d.data(), count, k.dt[me], dcclSum, c, nullptr);
    if (k.coll == 2) rc = dcclReduce(s.data(), d.data(), count, k.dt[me], dcclSum, 0, c, nullptr);
    const bool only_sends = k.coll == 2 && g_rank != 0;
    bad += expect(rc != dcclSuccess || only_sends, std::string(k.name) + ": no success",
                  rc == dcclSuccess ? (only_sends ? "sent (not the root)" : "returned dcclSuccess") : dcclGetLastError(c));
    dcclCommDestroy(c);
  }
  return bad;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* r = std::getenv("DCCL_RANK");
  g_rank = r ? std::atoi(r) : -1;
  if (mode == "seg-count" && argc > 2) return seg_count(argv[2]);
  if (mode == "seg-type" || mode == "seg-op")
    return seg_other_call(mode == "seg-type", argc > 2 && std::string(argv[2]) == "small");
  if (mode == "fork") return fork_case();
  if (mode == "threads") return threads_case();
  if (mode == "contract") return contract_case();
  if (mode == "split-destroy") return split_destroy_case();
  if (mode == "group-stream") return group_stream_case();
  if (mode == "p2p-size") return p2p_size_case();
  if (mode == "p2p-crossed") return p2p_crossed_case();
  if (mode == "type-collide") return type_collide_case();
  if (mode == "init-one" && argc > 2) return init_one_case(argv[2]);
  if (mode == "check-one") {
    if (g_rank == 1) setenv("DCCL_CHECK", "1", 1);
    return init_fails("DCCL_CHECK", "init with DCCL_CHECK on rank 1 only");
  }
  if (mode == "ifname") {
    setenv("DCCL_SOCKET_IFNAME", "nosuchif0", 1);
    return init_fails("nosuchif0", "init with DCCL_SOCKET_IFNAME naming no interface");
  }
  std::fprintf(stderr,
               "usage: misuse_check seg-count all_reduce|all_gather|reduce_scatter | seg-type [small] | seg-op [small] | fork | threads | "
               "contract | split-destroy | group-stream | check-one | ifname | p2p-size | p2p-crossed | type-collide | init-one bad|exit\n");
  return 2;
}
