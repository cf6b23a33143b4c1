// Fault injection: starts its own ranks (fork + exec of itself with the launcher
// variables) so that it can kill one, leave one out, or add an intruder, and then
// judge how the others fail.
//   fault_check kill [TRIALS]   kill -9 one of 4 ranks (not rank 0) during 16 MiB allreduces
//   fault_check kill-root [TRIALS]  kill -9 rank 0, which hosts the store: every
//                               survivor must fail naming rank 0 within 2 s
//   fault_check nojoin          one rank of 4 never starts
//   fault_check secret          an intruder with the wrong secret
//   fault_check mismatch        DCCL_CHECK=1 and one rank passes another count
//   fault_check count           no DCCL_CHECK: allgather / reduce-scatter counts differ (child_count)
//   fault_check abort           dcclCommAbort from another thread mid-operation
//   fault_check chunk           2 ranks, one sets DCCL_SEGMENT_CHUNK_BYTES to its default
//                               (256K), the other leaves it unset (512K for 2 ranks)
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
constexpr int kTimeoutS = 4;  // DCCL_TIMEOUT_S for the jobs

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

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

std::string hex_secret(std::mt19937_64& rng) {
  char buf[33];
  snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(rng()),
           static_cast<unsigned long long>(rng()));
  return buf;
}

struct Job {
  int port;
  std::string secret;
  int nranks;
};

pid_t spawn(const char* self, const char* role, const Job& job, int rank, const std::string& secret, int ready_fd) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("DCCL_RANK", std::to_string(rank).c_str(), 1);
    setenv("DCCL_WORLD_SIZE", std::to_string(job.nranks).c_str(), 1);
    setenv("DCCL_ADDR", ("127.0.0.1:" + std::to_string(job.port)).c_str(), 1);
    setenv("DCCL_SECRET", secret.c_str(), 1);
    setenv("DCCL_TIMEOUT_S", std::to_string(kTimeoutS).c_str(), 1);
    setenv("FAULT_READY_FD", std::to_string(ready_fd).c_str(), 1);
    execl(self, self, "child", role, nullptr);
    _exit(127);
  }
  return pid;
}

// ---- children ----

int init_or_report(dcclComm_t* c) {
  if (dcclCommInitFromEnv(c) == dcclSuccess) return 0;
  fprintf(stderr, "init failed: %s\n", dcclGetLastError(nullptr));
  return 1;
}

void say_ready() {
  const char* fd = getenv("FAULT_READY_FD");
  if (fd) (void)!write(atoi(fd), "R", 1);
}

// Loops 16 MiB allreduces until one fails; exit 0 when the error names the victim.
int child_loop(const char* victim) {
  dcclComm_t c;
  if (init_or_report(&c)) return 1;
  std::vector<float> buf(4u << 20, 1.0f);
  say_ready();
  for (;;) {
    auto t = Clock::now();
    if (dcclAllReduce(buf.data(), buf.data(), buf.size(), dcclFloat32, dcclSum, c, nullptr) != dcclSuccess) {
      const char* msg = dcclGetLastError(c);
      bool named = strstr(msg, victim) != nullptr;
      printf("detected in %.0f ms (%s): %s\n", ms_since(t), named ? "names the dead rank" : "DOES NOT NAME IT", msg);
      dcclCommDestroy(c);
      return named ? 0 : 1;
    }
  }
}

int child_ok() {  // a well-behaved rank: a few verified allreduces
  dcclComm_t c;
  if (init_or_report(&c)) return 1;
  int n;
  dcclCommCount(c, &n);
  std::vector<int> v(1000, 1);
  for (int i = 0; i < 20; ++i) {
    std::fill(v.begin(), v.end(), 1);
    if (dcclAllReduce(v.data(), v.data(), v.size(), dcclInt32, dcclSum, c, nullptr) != dcclSuccess || v[999] != n) {
      fprintf(stderr, "allreduce: %s (got %d)\n", dcclGetLastError(c), v[999]);
      return 1;
    }
  }
  dcclCommDestroy(c);
  return 0;
}

int child_mismatch() {
  dcclComm_t c;
  if (init_or_report(&c)) return 1;
  int r;
  dcclCommUserRank(c, &r);
  std::vector<float> v(1024, 1.0f);
  size_t count = r == 2 ? 1000 : 1024;
  dcclResult_t rc = dcclAllReduce(v.data(), v.data(), count, dcclFloat32, dcclSum, c, nullptr);
  const char* msg = dcclGetLastError(c);
  bool good = rc == dcclInvalidUsage && strstr(msg, "mismatch") && strstr(msg, "1000") && strstr(msg, "1024");
  printf("rank %d: %s: %s\n", r, good ? "mismatch reported" : "NOT REPORTED", msg);
  dcclCommDestroy(c);
  return good ? 0 : 1;
}

// Without DCCL_CHECK, rank 1 passes 24 elements more than rank 0 to allgather and
// reduce-scatter, small (1000) and large (1 Mi): every call must fail on both ranks
// within the timeout (before: over the shm provider the larger rank's small call
// succeeded with a short message, and at 1 Mi one rank spun in the provider
// forever). COUNT_NAMED=1: the error must name the mismatch ("count mismatch" or
// "call mismatch": the peer's message for the step waits with another length or
// call mark; the socket path and tcp;ofi_rxm can tell, libfabric 1.17's shm cannot).
int child_count() {
  dcclComm_t c;
  if (init_or_report(&c)) return 1;
  int r;
  dcclCommUserRank(c, &r);
  const bool named = getenv("COUNT_NAMED") && !strcmp(getenv("COUNT_NAMED"), "1");
  const size_t base = strtoull(getenv("COUNT_BASE"), nullptr, 10);
  const bool rs = !strcmp(getenv("COUNT_COLL"), "reduce_scatter");
  const size_t n = base + (r == 1 ? 24 : 0);
  std::vector<float> s(2 * n + 48, 1.0f), d(2 * n + 48, 0.0f);
  auto t = Clock::now();
  dcclResult_t rc = rs ? dcclReduceScatter(s.data(), d.data(), n, dcclFloat32, dcclSum, c, nullptr)
                       : dcclAllGather(s.data(), d.data(), n, dcclFloat32, c, nullptr);
  const char* msg = dcclGetLastError(c);
  const bool ok = rc != dcclSuccess && ms_since(t) <= 1000.0 * kTimeoutS + 1500 && (!named || strstr(msg, "mismatch: rank"));
  printf("rank %d %s %zu: %s after %.0f ms: %s: %s\n", r, rs ? "reduce_scatter" : "all_gather", n,
         dcclGetErrorString(rc), ms_since(t), ok ? "ok" : "FAILED", msg);
  dcclCommDestroy(c);
  return ok ? 0 : 1;
}

int child_abort() {
  dcclComm_t c;
  if (init_or_report(&c)) return 1;
  int r;
  dcclCommUserRank(c, &r);
  std::vector<float> buf(2u << 20, 1.0f);
  std::atomic<bool> stop{false};
  double abort_ms = 0;
  std::thread aborter;
  if (r == 1)
    aborter = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      auto t = Clock::now();
      dcclCommAbort(c);
      abort_ms = ms_since(t);
    });
  Clock::time_point failed_at;
  for (int i = 0; !stop; ++i) {
    if (dcclAllReduce(buf.data(), buf.data(), buf.size(), dcclFloat32, dcclSum, c, nullptr) != dcclSuccess) {
      failed_at = Clock::now();
      printf("rank %d: call failed after abort: %s\n", r, dcclGetLastError(c));
      break;
    }
  }
  if (aborter.joinable()) aborter.join();
  if (r == 1) {
    printf("rank 1: dcclCommAbort returned in %.0f ms\n", abort_ms);
    return abort_ms < 2000 ? 0 : 1;
  }
  dcclCommDestroy(c);
  return 0;
}

// ---- parent ----

struct Outcome {
  int status = -1;
  double ms = 0;
};

// Waits for pids until `limit_ms`; kills what is left.
std::vector<Outcome> reap(const std::vector<pid_t>& pids, Clock::time_point since, double limit_ms) {
  std::vector<Outcome> out(pids.size());
  size_t left = pids.size();
  while (left > 0 && ms_since(since) < limit_ms) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (out[i].status != -1) continue;
      int st;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        out[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        out[i].ms = ms_since(since);
        --left;
      }
    }
    usleep(2000);
  }
  for (size_t i = 0; i < pids.size(); ++i)
    if (out[i].status == -1) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], nullptr, 0);
      out[i].status = 999;
      out[i].ms = ms_since(since);
    }
  return out;
}

// libfabric shm regions (/dev/shm/<pid>:<n>:<m>) of the job's processes still
// there once every one of them has exited: the killed rank's must be removed by
// the survivors, theirs by themselves.
std::vector<std::string> leftover_regions(const std::vector<pid_t>& pids) {
  std::vector<std::string> left;
  DIR* d = opendir("/dev/shm");
  if (!d) return left;
  while (dirent* e = readdir(d)) {
    unsigned long pid = 0, a = 0, b = 0;
    char tail = 0;
    if (sscanf(e->d_name, "%lu:%lu:%lu%c", &pid, &a, &b, &tail) != 3) continue;
    for (pid_t p : pids)
      if (static_cast<unsigned long>(p) == pid) left.push_back(e->d_name);
  }
  closedir(d);
  return left;
}

// root: kill rank 0, whose process hosts the store; the survivors see the
// store's connection break and must name rank 0 within 2 s.
int run_kill(const char* self, int trials, bool root) {
  std::mt19937_64 rng(std::random_device{}());
  double worst = 0;
  int passed = 0;
  const double bound_ms = root ? 2000.0 : 2000.0 * kTimeoutS;
  // A trial whose ranks did not all finish init (a machine so loaded that init ran
  // past its 4 s) tests nothing about the kill: it is run again, at most
  // kSetupRetries times in all, so that an init that always fails still fails.
  constexpr int kSetupRetries = 3;
  int setup_retries = 0;
  for (int t = 0; t < trials; ++t) {
    Job job{free_port(), hex_secret(rng), 4};
    int victim = root ? 0 : 1 + static_cast<int>(rng() % 3);
    std::string role = "loop:rank " + std::to_string(victim);
    int pfd[2];
    if (pipe(pfd) != 0) return 1;
    std::vector<pid_t> pids;
    for (int r = 0; r < 4; ++r) pids.push_back(spawn(self, role.c_str(), job, r, job.secret, pfd[1]));
    close(pfd[1]);
    char ch;
    int ready = 0;
    while (ready < 4 && read(pfd[0], &ch, 1) == 1) ++ready;
    close(pfd[0]);
    if (ready < 4 && setup_retries < kSetupRetries) {
      ++setup_retries;
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      for (const std::string& f : leftover_regions(pids)) unlink(("/dev/shm/" + f).c_str());
      printf("trial %d: only %d of 4 ranks finished init; run again (%d of %d retries)\n", t + 1, ready,
             setup_retries, kSetupRetries);
      fflush(stdout);
      --t;
      continue;
    }
    usleep(static_cast<useconds_t>(50000 + rng() % 250000));
    kill(pids[static_cast<size_t>(victim)], SIGKILL);
    auto killed = Clock::now();
    std::vector<pid_t> survivors;
    for (int r = 0; r < 4; ++r)
      if (r != victim) survivors.push_back(pids[static_cast<size_t>(r)]);
    waitpid(pids[static_cast<size_t>(victim)], nullptr, 0);
    auto out = reap(survivors, killed, 2000.0 * kTimeoutS + 2000);
    bool ok = ready == 4;
    double trial_worst = 0;
    for (auto& o : out) {
      ok = ok && o.status == 0 && o.ms <= bound_ms;
      trial_worst = std::max(trial_worst, o.ms);
    }
    worst = std::max(worst, trial_worst);
    const std::vector<std::string> left = leftover_regions(pids);
    for (const std::string& f : left) printf("  left in /dev/shm: %s\n", f.c_str());
    ok = ok && left.empty();
    passed += ok;
    printf("trial %d: killed rank %d; survivors done in %.0f ms: %s\n", t + 1, victim, trial_worst, ok ? "ok" : "FAILED");
    if (!ok)
      for (size_t i = 0; i < out.size(); ++i)
        printf("  survivor %zu: exit %d after %.0f ms (999: killed at the limit)\n", i, out[i].status, out[i].ms);
    fflush(stdout);
  }
  printf("%s: %d/%d trials passed; worst detection %.0f ms (bound %.0f ms)\n", root ? "kill-root" : "kill", passed,
         trials, worst, bound_ms);
  return passed == trials ? 0 : 1;
}

int run_simple(const char* self, const char* scenario) {
  std::mt19937_64 rng(std::random_device{}());
  Job job{free_port(), hex_secret(rng), 4};
  std::vector<pid_t> pids;
  auto start = Clock::now();
  int devnull[2];
  if (pipe(devnull) != 0) return 1;
  if (!strcmp(scenario, "nojoin")) {
    for (int r = 0; r < 3; ++r) pids.push_back(spawn(self, "expect-fail", job, r, job.secret, devnull[1]));
  } else if (!strcmp(scenario, "secret")) {
    job.nranks = 2;
    for (int r = 0; r < 2; ++r) pids.push_back(spawn(self, "ok", job, r, job.secret, devnull[1]));
    usleep(100000);
    pid_t intruder = spawn(self, "expect-fail", job, 1, hex_secret(rng), devnull[1]);
    auto out = reap({intruder}, start, 2000.0 * kTimeoutS);
    printf("secret: intruder exit %d (%s)\n", out[0].status, out[0].status == 0 ? "refused" : "NOT REFUSED");
    if (out[0].status != 0) return 1;
  } else if (!strcmp(scenario, "mismatch")) {
    job.nranks = 3;
    setenv("DCCL_CHECK", "1", 1);
    for (int r = 0; r < 3; ++r) pids.push_back(spawn(self, "mismatch", job, r, job.secret, devnull[1]));
  } else if (!strcmp(scenario, "count")) {
    job.nranks = 2;
    for (int r = 0; r < 2; ++r) pids.push_back(spawn(self, "count", job, r, job.secret, devnull[1]));
  } else if (!strcmp(scenario, "chunk")) {
    job.nranks = 2;
    unsetenv("DCCL_SEGMENT_CHUNK_BYTES");
    pids.push_back(spawn(self, "chunk", job, 0, job.secret, devnull[1]));
    setenv("DCCL_SEGMENT_CHUNK_BYTES", "256K", 1);
    pids.push_back(spawn(self, "chunk", job, 1, job.secret, devnull[1]));
    unsetenv("DCCL_SEGMENT_CHUNK_BYTES");
  } else if (!strcmp(scenario, "abort")) {
    job.nranks = 2;
    for (int r = 0; r < 2; ++r) pids.push_back(spawn(self, "abort", job, r, job.secret, devnull[1]));
  } else {
    fprintf(stderr, "unknown scenario %s\n", scenario);
    return 2;
  }
  close(devnull[1]);
  auto out = reap(pids, start, 2000.0 * kTimeoutS + 3000);
  bool ok = true;
  for (size_t i = 0; i < out.size(); ++i) {
    printf("%s: rank %zu exit %d after %.0f ms\n", scenario, i, out[i].status, out[i].ms);
    ok = ok && out[i].status == 0 && out[i].ms <= 2000.0 * kTimeoutS + 2000;
  }
  close(devnull[0]);
  printf("%s: %s\n", scenario, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

int child_expect_fail() {  // init must fail, naming the cause, within the timeout
  auto t = Clock::now();
  dcclComm_t c;
  dcclResult_t rc = dcclCommInitFromEnv(&c);
  printf("init returned %s after %.0f ms: %s\n", dcclGetErrorString(rc), ms_since(t), dcclGetLastError(nullptr));
  if (rc == dcclSuccess) {
    dcclCommDestroy(c);
    return 1;
  }
  return ms_since(t) <= 2000.0 * kTimeoutS ? 0 : 1;
}

// The segment's chunk as each rank would use it differs (512 KiB unset on 2 ranks,
// 256 KiB set): init must fail on both, naming the two values, not lay the segment
// out two ways.
int child_chunk() {
  dcclComm_t c;
  const dcclResult_t rc = dcclCommInitFromEnv(&c);
  const char* msg = dcclGetLastError(nullptr);
  const bool good = rc == dcclInvalidUsage && strstr(msg, "settings differ") &&
                    strstr(msg, "DCCL_SEGMENT_CHUNK_BYTES=524288") && strstr(msg, "DCCL_SEGMENT_CHUNK_BYTES=262144");
  printf("init returned %s: %s\n", dcclGetErrorString(rc), msg);
  if (rc == dcclSuccess) dcclCommDestroy(c);
  return good ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc >= 3 && !strcmp(argv[1], "child")) {
    std::string role = argv[2];
    if (role.rfind("loop:", 0) == 0) return child_loop(role.c_str() + 5);
    if (role == "ok") return child_ok();
    if (role == "expect-fail") return child_expect_fail();
    if (role == "mismatch") return child_mismatch();
    if (role == "abort") return child_abort();
    if (role == "count") return child_count();
    if (role == "chunk") return child_chunk();
    return 2;
  }
  if (argc >= 2 && !strcmp(argv[1], "kill")) return run_kill(argv[0], argc >= 3 ? atoi(argv[2]) : 20, false);
  if (argc >= 2 && !strcmp(argv[1], "kill-root")) return run_kill(argv[0], argc >= 3 ? atoi(argv[2]) : 10, true);
  if (argc >= 2 && !strcmp(argv[1], "count")) {
    int bad = 0;
    for (const char* base : {"1000", "1048576"})
      for (const char* coll : {"all_gather", "reduce_scatter"}) {
        setenv("COUNT_BASE", base, 1);
        setenv("COUNT_COLL", coll, 1);
        bad += run_simple(argv[0], "count");
      }
    return bad ? 1 : 0;
  }
  if (argc >= 2) return run_simple(argv[0], argv[1]);
  fprintf(stderr, "usage: fault_check kill [TRIALS] | kill-root [TRIALS] | nojoin | secret | mismatch | count | abort | chunk\n");
  return 2;
}
