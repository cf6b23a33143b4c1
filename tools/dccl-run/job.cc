// Supervision of a job's ranks; see job.hpp.
#include "dccl-run/job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "dccl-run/rank_env.hpp"
#include "dccl-run/spawn.hpp"

namespace dcclrun {
namespace {

constexpr auto kGrace = std::chrono::seconds(3);          // SIGTERM -> SIGKILL
// A rank failed: the others hear of it through their failure watcher and write
// their flight-recorder dumps within milliseconds, then most exit on their own.
// They get this long before SIGTERM (which would cut a dump short).
constexpr auto kFailGrace = std::chrono::seconds(2);
constexpr auto kDrain = std::chrono::milliseconds(1000);  // output after the last exit

}  // namespace

void Job::terminate() {
  terminating_ = true;
  term_at_.reset();
  signal_all(SIGTERM, true);
  kill_at_ = Clock::now() + kGrace;
}

bool Job::start(const std::string& program, const std::string& id, const sigset_t& child_mask) {
  const pid_t parent = ::getpid();
  for (int r = 0; r < opt_.nranks; ++r) {
    Rank& rk = ranks_[static_cast<size_t>(r)];
    const Placement& pl = place_[static_cast<size_t>(r)];
    const Spawned s = spawn_rank(r, program, opt_.argv, rank_env(opt_, r, pl, id), pl, child_mask, parent);
    if (s.pid < 0) return false;
    rk.pid = s.pid;
    rk.running = true;
    ++running_;
    std::string prefix;
    if (!opt_.no_prefix) {
      prefix.push_back('[');  // (not "[" + ...: GCC 12 -Wrestrict false positive)
      prefix.append(std::to_string(r)).append("] ");
    }
    for (int w = 0; w < 2; ++w) {
      rk.fd[w] = (w == 0 ? s.out_fd : s.err_fd);
      ::fcntl(rk.fd[w], F_SETFL, ::fcntl(rk.fd[w], F_GETFL) | O_NONBLOCK);
      rk.out[w].emplace(prefix, w == 0 ? STDOUT_FILENO : STDERR_FILENO);
    }
  }
  return true;
}

void Job::signal_all(int sig, bool ours) {
  for (Rank& r : ranks_) {
    if (r.pid <= 0) continue;
    // The whole process group: the rank and whatever it started. Groups of
    // ranks that already exited are signalled too, for their leftovers.
    // A rank that has not yet made its session (spawn.cc) is signalled itself.
    const bool sent = ::kill(-r.pid, sig) == 0 || (errno == ESRCH && r.running && ::kill(r.pid, sig) == 0);
    if (sent && r.running && ours) r.signalled_by_us = true;
  }
}

void Job::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Rank& r = ranks_[i];
      if (r.pid != pid || !r.running) continue;
      r.running = false;
      --running_;
      int code = 0;
      if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        say("rank " + std::to_string(i) + " killed by signal " + std::to_string(WTERMSIG(status)) +
            (r.signalled_by_us ? " (sent by dccl-run)" : ""));
      } else if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
      }
      if (code != 0 && first_failed_ < 0 && !terminating_) {
        first_failed_ = static_cast<int>(i);
        first_code_ = code;
        if (WIFEXITED(status)) say("rank " + std::to_string(i) + " exited with code " + std::to_string(code));
        if (running_ > 0 && opt_.keep_going) {
          say("rank " + std::to_string(i) + " failed first; the others run on (--keep-going)");
        } else if (running_ > 0) {
          say("rank " + std::to_string(i) + " failed first; terminating the other ranks (SIGTERM in " +
              std::to_string(std::chrono::seconds(kFailGrace).count()) + " s unless they exit first)");
          if (!term_at_) term_at_ = Clock::now() + kFailGrace;
        }
      }
    }
  }
}

void Job::read_output(Rank& r, int which) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(r.fd[which], buf, sizeof buf);
    if (n > 0) {
      r.out[which]->feed(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) return;
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && errno == EAGAIN) return;
    r.out[which]->finish();  // EOF or error
    ::close(r.fd[which]);
    r.fd[which] = -1;
    return;
  }
}

bool Job::anything_open() const {
  for (const Rank& r : ranks_) {
    if (r.fd[0] >= 0 || r.fd[1] >= 0) return true;
  }
  return false;
}

void Job::close_all() {
  for (Rank& r : ranks_) {
    for (int w = 0; w < 2; ++w) {
      if (r.fd[w] < 0) continue;
      read_output(r, w);
      if (r.fd[w] < 0) continue;
      r.out[w]->finish();
      ::close(r.fd[w]);
      r.fd[w] = -1;
    }
  }
}

int Job::supervise(int sigfd) {
  const auto t0 = Clock::now();
  // A timeout beyond 1e9 s (31 years) is none: the clock's nanoseconds would overflow.
  const bool timed = opt_.timeout_s > 0 && opt_.timeout_s < 1e9;
  const std::optional<Clock::time_point> deadline =
      timed ? std::optional(t0 + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(opt_.timeout_s)))
            : std::nullopt;
  std::optional<Clock::time_point> drain_until;
  while (running_ > 0 || anything_open()) {
    const auto now = Clock::now();
    if (running_ == 0) {  // every rank is gone: give leftover writers a moment
      if (!drain_until) drain_until = now + kDrain;
      if (now >= *drain_until) break;
    }
    if (deadline && !timed_out_ && now >= *deadline) {
      timed_out_ = true;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", opt_.timeout_s);
      say(std::string("timeout after ") + secs + " s; terminating all ranks");
      terminate();
    }
    if (term_at_ && (now >= *term_at_ || running_ == 0)) {  // (every rank gone: their groups' leftovers)
      if (running_ > 0) say("ranks still running " + std::to_string(std::chrono::seconds(kFailGrace).count()) +
                            " s after the first failure; sending SIGTERM");
      terminate();
    }
    if (kill_at_ && now >= *kill_at_) {
      if (running_ > 0) say("ranks still running after SIGTERM; sending SIGKILL");
      signal_all(SIGKILL, true);
      kill_at_.reset();
    }
    // Sleep until the next deadline.
    int wait_ms = -1;
    for (const auto& t : {deadline && !timed_out_ ? deadline : std::nullopt, term_at_, kill_at_, drain_until}) {
      if (!t) continue;
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*t - now).count();
      const int m = static_cast<int>(std::max<long long>(0, std::min<long long>(ms, 1 << 30)));
      wait_ms = wait_ms < 0 ? m : std::min(wait_ms, m);
    }
    std::vector<pollfd> pfds{{sigfd, POLLIN, 0}};
    std::vector<std::pair<size_t, int>> who{{0, -1}};
    for (size_t i = 0; i < ranks_.size(); ++i) {
      for (int w = 0; w < 2; ++w) {
        if (ranks_[i].fd[w] < 0) continue;
        pfds.push_back({ranks_[i].fd[w], POLLIN, 0});
        who.emplace_back(i, w);
      }
    }
    if (::poll(pfds.data(), pfds.size(), wait_ms) < 0 && errno != EINTR) {
      say(std::string("poll: ") + std::strerror(errno));
      break;
    }
    for (size_t k = 1; k < pfds.size(); ++k) {
      if (pfds[k].revents) read_output(ranks_[who[k].first], who[k].second);
    }
    if (pfds[0].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        const int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD) continue;  // reaped below
        if (interrupted_) {  // a second interrupt: no more grace
          say("signal " + std::to_string(sig) + " again; killing all ranks");
          signal_all(SIGKILL, true);
          continue;
        }
        interrupted_ = sig;
        terminating_ = true;
        term_at_.reset();
        say("got signal " + std::to_string(sig) + "; forwarding it to the ranks");
        signal_all(sig, true);
        kill_at_ = Clock::now() + kGrace;
      }
    }
    reap();  // SIGCHLD may coalesce: always look
  }
  close_all();
  if (timed_out_) return 124;
  if (first_failed_ >= 0) {
    say("job failed: rank " + std::to_string(first_failed_) + " failed first (exit status " +
        std::to_string(first_code_) + ")");
    return first_code_;
  }
  if (interrupted_) return 128 + interrupted_;
  return 0;
}

}  // namespace dcclrun
