// A running job: starts the ranks, forwards their output line by line with a
// rank prefix, reaps them, forwards signals, enforces --timeout and ends the
// job when one rank fails (the others get 2 s to write their failure dumps and
// exit, then SIGTERM to every rank's process group, SIGKILL after a grace period).
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dccl-run/lines.hpp"
#include "dccl-run/options.hpp"
#include "dccl-run/placement.hpp"

namespace dcclrun {

class Job {
 public:
  using Clock = std::chrono::steady_clock;
  Job(const RunOptions& o, std::vector<Placement> place)
      : opt_(o), place_(std::move(place)), ranks_(static_cast<size_t>(o.nranks)) {}
  // Starts every rank; false (after saying why) when one cannot be started.
  bool start(const std::string& program, const std::string& id, const sigset_t& child_mask);
  // Runs until every rank has exited and its output is drained; `sigfd` is a
  // signalfd for SIGCHLD, SIGINT, SIGTERM and SIGHUP. Returns the job's exit code:
  // 124 on timeout, the first failed rank's code, 128+signal when interrupted, else 0.
  int supervise(int sigfd);
  // Ends the ranks already started (SIGTERM, then SIGKILL after the grace period).
  void terminate();

 private:
  struct Rank {
    pid_t pid = -1;
    int fd[2] = {-1, -1};  // read ends of the child's stdout and stderr pipes
    std::optional<LinePrefixer> out[2];
    bool running = false;
    bool signalled_by_us = false;
  };
  void reap();
  void read_output(Rank& r, int which);
  void signal_all(int sig, bool ours);
  bool anything_open() const;
  void close_all();

  const RunOptions& opt_;
  const std::vector<Placement> place_;
  std::vector<Rank> ranks_;
  int running_ = 0;
  int first_failed_ = -1, first_code_ = 0;
  int interrupted_ = 0;  // the signal we forwarded, if any
  bool timed_out_ = false, terminating_ = false;
  std::optional<Clock::time_point> term_at_;  // a rank failed: SIGTERM to the others then
  std::optional<Clock::time_point> kill_at_;
};

}  // namespace dcclrun
