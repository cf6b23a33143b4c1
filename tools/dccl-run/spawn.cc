// Signal-safe spawning of one rank; see spawn.hpp.
#include "dccl-run/spawn.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "dccl-run/lines.hpp"
#include "dccl-run/rank_env.hpp"

namespace dcclrun {
namespace {

// Async-signal-safe decimal for the child's error path.
void put_num(char* buf, size_t* len, long v) {
  char tmp[24];
  int n = 0;
  do tmp[n++] = static_cast<char>('0' + v % 10);
  while ((v /= 10) > 0 && n < 23);
  while (n > 0) buf[(*len)++] = tmp[--n];
}

// The child's error path: "dccl-run: rank R: <what> (errno E)\n", built without allocating.
struct ChildError {
  char buf[512];
  size_t head = 0;
  void fail(const char* what, size_t what_len) {
    size_t len = head;
    what_len = std::min(what_len, sizeof buf - 40 - len);
    std::memcpy(buf + len, what, what_len);
    len += what_len;
    const int e = errno;
    std::memcpy(buf + len, " (errno ", 8);
    len += 8;
    put_num(buf, &len, e);
    buf[len++] = ')';
    buf[len++] = '\n';
    ssize_t ignored = ::write(STDERR_FILENO, buf, len);
    (void)ignored;
    ::_exit(127);
  }
  template <size_t N>
  void fail(const char (&what)[N]) {
    fail(what, N - 1);
  }
};

}  // namespace

Spawned spawn_rank(int r, const std::string& program, std::vector<std::string> args,
                   std::vector<std::string> env, const Placement& pl, const sigset_t& child_mask, pid_t parent) {
  std::vector<char*> envp = c_array(env), argv = c_array(args);
  ChildError err;
  const std::string head = "dccl-run: rank " + std::to_string(r) + ": ";
  err.head = std::min(head.size(), sizeof err.buf / 2);
  std::memcpy(err.buf, head.data(), err.head);
  const std::string exec_fail = "cannot execute " + program;
  const std::string setns_fail = "cannot enter the network namespace of emulated host " + pl.hostname;
  int p[2][2];
  if (::pipe2(p[0], O_CLOEXEC) != 0 || ::pipe2(p[1], O_CLOEXEC) != 0) {
    say(std::string("pipe: ") + std::strerror(errno));
    return {};
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    say(std::string("fork: ") + std::strerror(errno));
    return {};
  }
  cpu_set_t cpu;
  CPU_ZERO(&cpu);
  if (pl.cpu >= 0) CPU_SET(pl.cpu, &cpu);
  if (pid == 0) {  // child: async-signal-safe calls only
    // A session (and process group) of its own: the group is what signals reach, and
    // with the kernel's autogroup scheduling a session shares a CPU as one, so busy
    // processes of the session that launched the job do not shrink a rank's share
    // (MPICH's hydra starts its ranks so too; docs/transport.md, "Busy CPUs").
    ::setsid();
    if (pl.cpu >= 0 && ::sched_setaffinity(0, sizeof(cpu), &cpu) != 0) err.fail("cannot bind to its CPU");
    // Signals we forward must reach the program even when our caller
    // ignored them (e.g. a shell's background job ignores SIGINT).
    for (int s : {SIGPIPE, SIGINT, SIGTERM}) ::signal(s, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
    ::dup2(p[0][1], STDOUT_FILENO);
    ::dup2(p[1][1], STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (pl.netns_fd >= 0) {
      // The emulated host: its network, its hostname (which decides "same host"
      // for the shm provider and the shared segment). The rank dies with
      // dccl-run, whose end removes the network under it anyway.
      if (::setns(pl.netns_fd, CLONE_NEWNET) != 0) err.fail(setns_fail.data(), setns_fail.size());
      if (::unshare(CLONE_NEWUTS) != 0) err.fail("cannot create a UTS namespace");
      if (::sethostname(pl.hostname.data(), pl.hostname.size()) != 0) err.fail("cannot set the hostname");
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) err.fail("cannot set PR_SET_PDEATHSIG");
      if (::getppid() != parent) ::_exit(127);  // dccl-run died before the line above
    }
    ::close_range(3, ~0U, 0);
    ::execve(program.c_str(), argv.data(), envp.data());
    err.fail(exec_fail.data(), exec_fail.size());
  }
  // (Not setpgid here too: setsid fails in a process that already leads a group.
  // Until the child's setsid, Job::signal_all signals the child itself.)
  ::close(p[0][1]);
  ::close(p[1][1]);
  return {pid, p[0][0], p[1][0]};
}

}  // namespace dcclrun
