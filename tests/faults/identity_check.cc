// Who may join a job's store (label "faults"): each scenario starts real ranks
// (fork + exec of itself with launcher variables, rendezvous on 127.0.0.1) and
// judges how, and how fast, the store lets them in or turns them away.
//   identity_check derived     no DCCL_SECRET on one host: the secret is random, shared
//                              through a private file (removed at the end); an outsider
//                              presenting the secret derived from the address is refused
//   identity_check twojobs     a second job on the same port without secrets: its ranks
//                              are refused at once; the first job's results are right
//   identity_check duprank     two processes given rank 1 while the job forms: every
//                              rank fails at once, naming both claims (a duplicate that
//                              comes once the job has formed is refused alone: twojobs)
//   identity_check worldsize   one rank given another world size: every rank fails at
//                              once, naming both sizes
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bootstrap/secret_file.hpp"
#include "bootstrap/wire.hpp"
#include "dccl/dccl.h"

namespace {

using Clock = std::chrono::steady_clock;
using Vars = std::map<std::string, std::string>;
constexpr int kTimeoutS = 4;        // DCCL_TIMEOUT_S of the ranks
constexpr double kAtOnceMs = 2000;  // "at once": well inside the timeout

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

Vars rank_vars(int port, int rank, int nranks) {
  return {{"DCCL_RANK", std::to_string(rank)},
          {"DCCL_WORLD_SIZE", std::to_string(nranks)},
          {"DCCL_ADDR", "127.0.0.1:" + std::to_string(port)},
          {"DCCL_TIMEOUT_S", std::to_string(kTimeoutS)}};
}

pid_t spawn(const char* self, const std::string& role, const Vars& vars, int ready_fd = -1) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("DCCL_SECRET");
    unsetenv("DCCL_ID");
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
    if (ready_fd >= 0) setenv("READY_FD", std::to_string(ready_fd).c_str(), 1);
    execl(self, self, "child", role.c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

struct Outcome {
  int status = -1;
  double ms = 0;
};

std::vector<Outcome> reap(const std::vector<pid_t>& pids, Clock::time_point since, double limit_ms) {
  std::vector<Outcome> out(pids.size());
  size_t left = pids.size();
  while (left > 0 && ms_since(since) < limit_ms) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int st;
      if (out[i].status == -1 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
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
      out[i] = {999, ms_since(since)};
    }
  return out;
}

bool judge(const char* what, const std::vector<Outcome>& out, double limit_ms) {
  bool ok = true;
  for (size_t i = 0; i < out.size(); ++i) {
    const bool good = out[i].status == 0 && out[i].ms <= limit_ms;
    printf("%s: process %zu exit %d after %.0f ms%s\n", what, i, out[i].status, out[i].ms,
           good ? "" : (out[i].ms > limit_ms ? " (TOO LATE)" : " (FAILED)"));
    ok = ok && good;
  }
  return ok;
}

// Secret files of this user in the directory the ranks use.
std::set<std::string> secret_files() {
  std::set<std::string> out;
  const std::string dir = dccl::boot::secret_dir();
  const std::string prefix = "dccl-secret-" + std::to_string(geteuid()) + "-";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.insert(dir + "/" + e->d_name);
    closedir(d);
  }
  return out;
}

// The secret every rank derived before it was random: a hash of the address.
std::array<uint8_t, 16> derived_secret(const std::string& seed) {
  std::array<uint8_t, 16> out{};
  uint64_t h1 = 1469598103934665603ULL, h2 = 0x9e3779b97f4a7c15ULL;
  for (unsigned char ch : seed) {
    h1 = (h1 ^ ch) * 1099511628211ULL;
    h2 = (h2 ^ ch) * 0x100000001b3ULL + 0x7f4a7c15;
  }
  memcpy(out.data(), &h1, 8);
  memcpy(out.data() + 8, &h2, 8);
  return out;
}

// Presents `secret` to the store at 127.0.0.1:port; returns the store's answer.
std::string knock(int port, const std::array<uint8_t, 16>& secret) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  namespace wire = dccl::boot::wire;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[2048];
    ssize_t n;
    bool sent = false;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
      reply.append(buf, static_cast<size_t>(n));
      for (;;) {
        auto r = wire::parse_frame(reinterpret_cast<const uint8_t*>(reply.data()), reply.size());
        if (r.status != wire::ParseStatus::Ok) break;
        reply.erase(0, r.consumed);
        if (r.frame.type != wire::FrameType::Challenge || sent) {
          close(fd);
          return std::string(wire::type_name(r.frame.type)) + " " + r.frame.value;
        }
        std::string hello;  // the answer to the store's challenge, made with `secret`
        wire::append_hello(hello, secret, r.frame.nonce, 0, 2);
        sent = send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size());
        if (!sent) break;
      }
    }
  }
  close(fd);
  return "no answer";
}

// ---- children ----

// Initialises, all-reduces (checking the sums) for `ms`, destroys; 0 on success.
int child_job(int ms) {
  dcclComm_t c;
  if (dcclCommInitFromEnv(&c) != dcclSuccess) {
    printf("init failed: %s\n", dcclGetLastError(nullptr));
    return 1;
  }
  if (const char* fd = getenv("READY_FD")) (void)!write(atoi(fd), "R", 1);
  int n = 0, rank = 0;
  dcclCommCount(c, &n);
  dcclCommUserRank(c, &rank);
  std::vector<int> v(4096);
  auto t0 = Clock::now();
  int calls = 0;
  for (bool more = true; more; ++calls) {
    std::fill(v.begin(), v.end(), 1);
    v.back() = rank == 0 && ms_since(t0) >= ms;  // rank 0 says when to stop
    if (dcclAllReduce(v.data(), v.data(), v.size(), dcclInt32, dcclSum, c, nullptr) != dcclSuccess ||
        v[0] != n || v[4094] != n) {
      printf("allreduce %d: %s (got %d, want %d)\n", calls, dcclGetLastError(c), v[0], n);
      return 1;
    }
    more = v.back() == 0;
  }
  dcclCommDestroy(c);
  printf("job: %d allreduces checked\n", calls);
  return 0;
}

// Init must fail at once with dcclInvalidUsage and a message holding every word.
int child_refused(const std::string& words) {
  auto t = Clock::now();
  dcclComm_t c;
  dcclResult_t rc = dcclCommInitFromEnv(&c);
  const std::string msg = dcclGetLastError(nullptr);
  printf("init returned %s after %.0f ms: %s\n", dcclGetErrorString(rc), ms_since(t), msg.c_str());
  if (rc == dcclSuccess) {
    dcclCommDestroy(c);
    return 1;
  }
  bool ok = rc == dcclInvalidUsage;
  for (size_t from = 0; from <= words.size();) {
    size_t bar = words.find('|', from);
    const std::string w = words.substr(from, bar == std::string::npos ? std::string::npos : bar - from);
    if (!w.empty() && msg.find(w) == std::string::npos) {
      printf("  the message lacks '%s'\n", w.c_str());
      ok = false;
    }
    from = bar == std::string::npos ? words.size() + 1 : bar + 1;
  }
  return ok ? 0 : 1;
}

// ---- scenarios ----

int run_derived(const char* self) {
  const int port = free_port();
  const auto before = secret_files();
  int p[2];
  if (pipe(p) != 0) return 1;
  auto start = Clock::now();
  std::vector<pid_t> job;
  for (int r = 0; r < 2; ++r) job.push_back(spawn(self, "job:1500", rank_vars(port, r, 2), p[1]));
  close(p[1]);
  char ch;
  int ready = 0;
  while (ready < 2 && read(p[0], &ch, 1) == 1) ++ready;
  close(p[0]);
  bool ok = ready == 2;
  // The file the ranks shared: new, this user's, readable by nobody else.
  int files = 0;
  for (const std::string& f : secret_files()) {
    if (before.count(f)) continue;
    struct stat st{};
    stat(f.c_str(), &st);
    printf("derived: secret file %s mode %04o uid %u\n", f.c_str(), st.st_mode & 07777, st.st_uid);
    ok = ok && (st.st_mode & 077) == 0 && st.st_uid == geteuid();
    ++files;
  }
  ok = ok && files == 1;
  const std::string answer = knock(port, derived_secret("dccl:127.0.0.1:" + std::to_string(port)));
  printf("derived: an outsider with the address-derived secret got: %s\n", answer.c_str());
  ok = ok && answer.rfind("REFUSED", 0) == 0 && answer.find("wrong job secret") != std::string::npos;
  ok = judge("derived: job", reap(job, start, 2000.0 * kTimeoutS + 4000), 2000.0 * kTimeoutS + 4000) && ok;
  int left = 0;
  for (const std::string& f : secret_files()) left += !before.count(f);
  printf("derived: %d secret file(s) left after the job\n", left);
  ok = ok && left == 0;
  printf("derived: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

int run_twojobs(const char* self) {
  const int port = free_port();
  int p[2];
  if (pipe(p) != 0) return 1;
  auto start = Clock::now();
  std::vector<pid_t> first;
  for (int r = 0; r < 2; ++r) first.push_back(spawn(self, "job:2500", rank_vars(port, r, 2), p[1]));
  close(p[1]);
  char ch;
  int ready = 0;
  while (ready < 2 && read(p[0], &ch, 1) == 1) ++ready;
  close(p[0]);
  // The second job: the same port and world size, and a rank of another size.
  auto second_start = Clock::now();
  std::vector<pid_t> second = {
      spawn(self, "refused:another job on this host uses the same rendezvous address", rank_vars(port, 0, 2)),
      spawn(self, "refused:rank 1 in namespace 'env0' claimed twice", rank_vars(port, 1, 2)),
      spawn(self, "refused:world size mismatch|says 3 ranks|says 2", rank_vars(port, 2, 3))};
  bool ok = judge("twojobs: second job", reap(second, second_start, 2000.0 * kTimeoutS + 2000), kAtOnceMs);
  ok = judge("twojobs: first job", reap(first, start, 2000.0 * kTimeoutS + 4000), 2000.0 * kTimeoutS + 4000) && ok;
  printf("twojobs: %s\n", ready == 2 && ok ? "ok" : "FAILED");
  return ready == 2 && ok ? 0 : 1;
}

int run_duprank(const char* self) {
  const int port = free_port();
  auto start = Clock::now();
  const std::string role = "refused:rank 1 in namespace 'env0' claimed twice|held by pid|now claimed by pid";
  // Rank 2 never comes: the job is still forming when the second rank 1 arrives.
  std::vector<pid_t> pids = {spawn(self, role, rank_vars(port, 0, 3)), spawn(self, role, rank_vars(port, 1, 3)),
                             spawn(self, role, rank_vars(port, 1, 3))};
  const bool ok = judge("duprank", reap(pids, start, 2000.0 * kTimeoutS + 2000), kAtOnceMs);
  printf("duprank: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

int run_worldsize(const char* self) {
  const int port = free_port();
  auto start = Clock::now();
  const std::string role = "refused:world size mismatch|says 4 ranks|says 3";
  std::vector<pid_t> pids = {spawn(self, role, rank_vars(port, 0, 3)), spawn(self, role, rank_vars(port, 1, 3))};
  usleep(200000);
  pids.push_back(spawn(self, role, rank_vars(port, 2, 4)));
  const bool ok = judge("worldsize", reap(pids, start, 2000.0 * kTimeoutS + 2000), kAtOnceMs + 200);
  printf("worldsize: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc >= 3 && !strcmp(argv[1], "child")) {
    const std::string role = argv[2];
    if (role.rfind("job:", 0) == 0) return child_job(atoi(role.c_str() + 4));
    if (role.rfind("refused:", 0) == 0) return child_refused(role.substr(8));
    return 2;
  }
  if (argc >= 2 && !strcmp(argv[1], "derived")) return run_derived(argv[0]);
  if (argc >= 2 && !strcmp(argv[1], "twojobs")) return run_twojobs(argv[0]);
  if (argc >= 2 && !strcmp(argv[1], "duprank")) return run_duprank(argv[0]);
  if (argc >= 2 && !strcmp(argv[1], "worldsize")) return run_worldsize(argv[0]);
  fprintf(stderr, "usage: identity_check derived | twojobs | duprank | worldsize\n");
  return 2;
}
