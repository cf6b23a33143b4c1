// Destroy and abort with work still queued or running: starts its own 2 ranks
// (fork + exec of itself with the launcher variables) and judges how both end.
//   destroy_check queued [TRIALS]   rank 0 queues 4 allreduces on a stream (and one of a
//                       second communicator behind them) and destroys the first at once
//                       (every other trial 200 ms later, the first allreduce running);
//                       its peer sleeps 2 s before each of its allreduces
//   destroy_check idle [TRIALS]     destroy after synchronized work: how long it takes
//   destroy_check abort [TRIALS]    as queued, with dcclCommAbort instead of destroy
//   destroy_check blocking [TRIALS] destroy from a thread while a group of two
//                       allreduces runs on a stream (the peer comes to the second after
//                       the group's DCCL_TIMEOUT_S: it ends by its own deadline, and
//                       destroy with it) and the thread that queued it waits in a
//                       blocking allreduce for its turn behind it
// A rank passes when its process exits normally (no signal) with every check met.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTimeoutS = 3;  // DCCL_TIMEOUT_S for the jobs
constexpr int kPeerDelayMs = 2000;
constexpr size_t kCount = 1024;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int free_port() {
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

pid_t spawn(const char* self, const char* role, int port, const std::string& secret, int rank) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("DCCL_RANK", std::to_string(rank).c_str(), 1);
    setenv("DCCL_WORLD_SIZE", "2", 1);
    setenv("DCCL_ADDR", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    setenv("DCCL_SECRET", secret.c_str(), 1);
    setenv("DCCL_TIMEOUT_S", std::to_string(kTimeoutS).c_str(), 1);
    execl(self, self, "child", role, nullptr);
    _exit(127);
  }
  return pid;
}

// ---- children ----

bool has(const char* text, const char* a, const char* b = nullptr) {  // ignoring case
  return strcasestr(text, a) != nullptr && (b == nullptr || strcasestr(text, b) != nullptr);
}

// The peer: before each allreduce it sleeps 2 s (cut short once the communicator
// failed). Every call must succeed or fail naming rank 0 and `cause`; after the
// failure of rank 0's communicator, optionally one allreduce of the second one.
int peer(int calls, const char* cause, bool second) {
  dcclComm_t c;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) return fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr)), 1;
  dcclComm_t sub = nullptr;
  if (second && dcclCommSplit(c, 0, 0, &sub, nullptr) != dcclSuccess) return 1;
  std::vector<float> v(kCount);
  bool ok = true;
  int good = 0;
  for (int i = 0; i < calls; ++i) {
    for (int slept = 0; slept < kPeerDelayMs; slept += 20) {
      dcclResult_t err = dcclSuccess;
      dcclCommGetAsyncError(c, &err);
      if (err != dcclSuccess) break;
      usleep(20000);
    }
    std::fill(v.begin(), v.end(), 1.0f);
    auto t = Clock::now();
    dcclResult_t rc = dcclAllReduce(v.data(), v.data(), kCount, dcclFloat32, dcclSum, c, nullptr);
    if (rc == dcclSuccess) {
      ok = ok && v[kCount - 1] == 2.0f;
      ++good;
      continue;
    }
    const char* msg = dcclGetLastError(c);
    bool named = has(msg, "rank 0", cause);
    printf("rank 1: allreduce %d failed after %.0f ms (%s): %s\n", i, ms_since(t), named ? "names the cause" : "UNCLEAR", msg);
    ok = ok && named;
  }
  printf("rank 1: %d of %d allreduces succeeded\n", good, calls);
  dcclCommDestroy(c);
  if (sub) {  // the second communicator is untouched by the first one's end
    std::fill(v.begin(), v.end(), 1.0f);
    dcclResult_t rc = dcclAllReduce(v.data(), v.data(), kCount, dcclFloat32, dcclSum, sub, nullptr);
    printf("rank 1: second communicator's allreduce: %s (%g)\n", rc == dcclSuccess ? "ok" : dcclGetLastError(sub),
           static_cast<double>(v[kCount - 1]));
    ok = ok && rc == dcclSuccess && v[kCount - 1] == 2.0f;
    dcclCommDestroy(sub);
  }
  return ok ? 0 : 1;
}

// Rank 0 of queued/abort: 4 allreduces on a stream and one of a second
// communicator (split from the first) behind them; then destroy or abort the first.
int rank0_queued(bool abort) {
  dcclComm_t c, sub = nullptr;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) return fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr)), 1;
  if (dcclCommSplit(c, 0, 0, &sub, nullptr) != dcclSuccess || !sub) return 1;
  dcclStream_t s;
  if (dcclStreamCreate(&s) != dcclSuccess) return 1;
  std::vector<std::vector<float>> bufs(5, std::vector<float>(kCount, 1.0f));
  for (int i = 0; i < 4; ++i)
    if (dcclAllReduce(bufs[i].data(), bufs[i].data(), kCount, dcclFloat32, dcclSum, c, s) != dcclSuccess) return 1;
  if (dcclAllReduce(bufs[4].data(), bufs[4].data(), kCount, dcclFloat32, dcclSum, sub, s) != dcclSuccess) return 1;
  // Every other trial lets the first allreduce start (it then waits for the peer).
  if (const char* d = getenv("DESTROY_DELAY_MS")) usleep(static_cast<useconds_t>(atoi(d)) * 1000);
  auto t = Clock::now();
  dcclResult_t rc = abort ? dcclCommAbort(c) : dcclCommDestroy(c);
  double end_ms = ms_since(t);
  const double bound = abort ? 1000.0 : 2000.0 * kTimeoutS;
  bool ok = rc == dcclSuccess && end_ms <= bound;
  printf("rank 0: %s returned %s in %.0f ms (bound %.0f ms)\n", abort ? "dcclCommAbort" : "dcclCommDestroy",
         dcclGetErrorString(rc), end_ms, bound);
  // The stream goes on: the cancelled work fails, the second communicator's runs.
  rc = dcclStreamSynchronize(s);
  const char* msg = dcclGetLastError(nullptr);
  const char* want = abort ? "aborted" : "destroyed";
  bool clear = rc != dcclSuccess && has(msg, "rank 0", want) && (abort || has(msg, "still queued", "all_reduce #"));
  printf("rank 0: stream error %s (%s): %s\n", dcclGetErrorString(rc), clear ? "clear" : "UNCLEAR", msg);
  ok = ok && clear;
  if (strstr(msg, "with 3 operations") != nullptr) ok = ok && bufs[0][kCount - 1] == 2.0f;  // the first one ran
  rc = dcclStreamSynchronize(s);  // the error was reported once; the second communicator's allreduce ran
  printf("rank 0: second communicator's allreduce on the same stream: %s (%g)\n",
         rc == dcclSuccess ? "ok" : dcclGetLastError(nullptr), static_cast<double>(bufs[4][kCount - 1]));
  ok = ok && rc == dcclSuccess && bufs[4][kCount - 1] == 2.0f;
  dcclCommDestroy(sub);
  dcclStreamDestroy(s);
  return ok ? 0 : 1;
}

int child_idle(int rank) {
  dcclComm_t c;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) return fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr)), 1;
  dcclStream_t s;
  dcclStreamCreate(&s);
  std::vector<float> v(kCount, 1.0f);
  for (int i = 0; i < 20; ++i) dcclAllReduce(v.data(), v.data(), kCount, dcclFloat32, dcclSum, c, s);
  if (dcclStreamSynchronize(s) != dcclSuccess) return fprintf(stderr, "sync: %s\n", dcclGetLastError(nullptr)), 1;
  auto t = Clock::now();
  dcclResult_t rc = dcclCommDestroy(c);
  double ms = ms_since(t);
  printf("rank %d: destroy with an empty queue: %.1f ms\n", rank, ms);
  dcclStreamDestroy(s);
  return rc == dcclSuccess && ms < 1000 ? 0 : 1;
}

// Rank 0 of blocking: a group of two allreduces queued on a stream (the peer joins
// the first after 2 s and the second 2 s later: past the group's deadline,
// DCCL_TIMEOUT_S after it began, so the group times out naming the peer), then, on
// the same thread, a blocking allreduce waiting for its turn behind it; destroy
// from another thread. (Two threads calling into one communicator at once are
// refused as misuse: faults.misuse.threads.)
int rank0_blocking() {
  dcclComm_t c;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) return fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr)), 1;
  dcclStream_t s = nullptr;
  if (dcclStreamCreate(&s) != dcclSuccess) return fprintf(stderr, "stream: %s\n", dcclGetLastError(nullptr)), 1;
  std::vector<float> a(kCount, 1.0f), b(kCount, 1.0f), d(kCount, 1.0f);
  dcclResult_t rc2 = dcclSuccess;
  std::string msg2;
  std::thread t1([&] {
    dcclGroupStart();
    dcclAllReduce(a.data(), a.data(), kCount, dcclFloat32, dcclSum, c, s);
    dcclAllReduce(b.data(), b.data(), kCount, dcclFloat32, dcclSum, c, s);
    dcclGroupEnd();
    rc2 = dcclAllReduce(d.data(), d.data(), kCount, dcclFloat32, dcclSum, c, nullptr);
    msg2 = dcclGetLastError(nullptr);
  });
  usleep(300000);
  auto t = Clock::now();
  dcclResult_t rc = dcclCommDestroy(c);
  double end_ms = ms_since(t);
  t1.join();
  const dcclResult_t rc1 = dcclStreamSynchronize(s);
  const std::string msg1 = dcclGetLastError(nullptr);
  dcclStreamDestroy(s);
  printf("rank 0: destroy returned %s in %.0f ms (bound %d ms)\n", dcclGetErrorString(rc), end_ms, 2000 * kTimeoutS);
  printf("rank 0: running group: %s: %s\n", dcclGetErrorString(rc1), msg1.c_str());
  printf("rank 0: waiting call: %s: %s\n", dcclGetErrorString(rc2), msg2.c_str());
  bool ok = rc == dcclSuccess && end_ms <= 2000.0 * kTimeoutS;
  ok = ok && rc1 != dcclSuccess && has(msg1.c_str(), "rank 0", "timed out") && a[kCount - 1] == 2.0f;
  ok = ok && rc2 != dcclSuccess && has(msg2.c_str(), "rank 0: all_reduce #2", "destroy");
  return ok ? 0 : 1;
}

// ---- parent ----

int run(const char* self, const char* scenario, int trials) {
  std::mt19937_64 rng(std::random_device{}());
  int passed = 0;
  for (int t = 0; t < trials; ++t) {
    char secret[33];
    snprintf(secret, sizeof(secret), "%016llx%016llx", static_cast<unsigned long long>(rng()),
             static_cast<unsigned long long>(rng()));
    const int port = free_port();
    const std::string s = scenario;
    std::string r0 = s == "idle" ? "idle0" : s + "0", r1 = s == "idle" ? "idle1" : s + "1";
    setenv("DESTROY_DELAY_MS", t % 2 ? "200" : "0", 1);
    auto start = Clock::now();
    pid_t pids[2] = {spawn(self, r0.c_str(), port, secret, 0), spawn(self, r1.c_str(), port, secret, 1)};
    bool ok = true;
    for (int r = 0; r < 2; ++r) {
      int st = 0;
      // Bounded: a rank still alive after 30 s is killed and counts as failed.
      while (waitpid(pids[r], &st, WNOHANG) == 0) {
        if (ms_since(start) > 30000) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &st, 0);
          break;
        }
        usleep(5000);
      }
      const bool exited = WIFEXITED(st);
      const int code = exited ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (!exited || code != 0)
        printf("trial %d: rank %d %s %d\n", t + 1, r, exited ? "exited with" : "KILLED BY SIGNAL", exited ? code : WTERMSIG(st));
      ok = ok && exited && code == 0;
    }
    passed += ok;
    printf("trial %d: %s in %.0f ms: %s\n", t + 1, scenario, ms_since(start), ok ? "ok" : "FAILED");
  }
  printf("%s: %d/%d trials passed\n", scenario, passed, trials);
  return passed == trials ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc >= 3 && !strcmp(argv[1], "child")) {
    const std::string role = argv[2];
    if (role == "queued0") return rank0_queued(false);
    if (role == "abort0") return rank0_queued(true);
    if (role == "queued1") return peer(4, "destroyed", true);
    if (role == "abort1") return peer(4, "aborted", true);
    if (role == "idle0") return child_idle(0);
    if (role == "idle1") return child_idle(1);
    if (role == "blocking0") return rank0_blocking();
    if (role == "blocking1") return peer(3, "timed out", false);
    return 2;
  }
  if (argc >= 2) return run(argv[0], argv[1], argc >= 3 ? atoi(argv[2]) : 1);
  fprintf(stderr, "usage: destroy_check queued|idle|abort|blocking [TRIALS]\n");
  return 2;
}
