// dccl-run: local launcher.  dccl-run -n N [--env K=V | -x K=V | -x NAME]... [--timeout SEC] prog args...
// Hosts the job's rendezvous store, starts N ranks (each in its own process
// group, so a rank's helpers die with it), prefixes their output with
// "[rank] ", and ends the job as soon as one rank fails.
// With --hosts the ranks run on emulated hosts (dccl-run/netns.hpp): each rank
// enters its host's network namespace and a UTS namespace named after the host,
// and the store listens in the job's switch namespace.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "dccl-run/lines.hpp"
#include "dccl-run/netns.hpp"
#include "dccl-run/options.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using dcclrun::LinePrefixer;
constexpr auto kGrace = std::chrono::seconds(3);        // SIGTERM -> SIGKILL
constexpr auto kDrain = std::chrono::milliseconds(1000);  // output after the last exit

void say(const std::string& msg) {
  const std::string line = "dccl-run: " + msg + "\n";
  dcclrun::write_all(STDERR_FILENO, line.data(), line.size());
}

struct Rank {
  pid_t pid = -1;
  int fd[2] = {-1, -1};  // read ends of the child's stdout and stderr pipes
  std::optional<LinePrefixer> out[2];
  bool running = false;
  bool signalled_by_us = false;
};

// Where a rank runs: its (emulated) host and its place there.
struct Placement {
  int local_rank = 0, local_size = 1;
  int netns_fd = -1;     // emulated host's network namespace; -1: dccl-run's own
  std::string hostname;  // its UTS name
  int cpu = -1;          // --bind-to core: the CPU it runs on; -1: not bound
};

// --bind-to core (the default): rank r on the r-th CPU dccl-run may use while the
// ranks fit them; with more ranks than CPUs, consecutive ranks share one (rank r on
// CPU r * cpus / n, every CPU used). Neighbours in rank order are the ring's
// neighbours, recursive doubling's first partners and an emulated host's ranks: on a
// shared core they hand it to each other when they wait, and the placement is the
// same in every launch. Measured with 4 ranks on 2 cores over TCP (docs/performance.md):
// medians at 8 B to 4 MiB level with leaving the ranks unbound, within the noise,
// with fewer and shorter slow launches; emulated hosts 3-4x faster at 8 B (unbound,
// each host's ranks busy-polled on CPUs shared with the other's). Every emulated
// host shares this machine's CPUs, so
// the ranks of the whole job are counted against them.
void bind_ranks(const dcclrun::RunOptions& o, std::vector<Placement>* place) {
  if (o.bind_to == "none") return;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) return;
  const size_t n = place->size(), k = cpus.size();
  for (size_t r = 0; r < n; ++r) (*place)[r].cpu = cpus[n <= k ? r : r * k / n];
}

std::vector<Placement> place_ranks(const dcclrun::RunOptions& o, const dcclrun::EmuNet* net) {
  std::vector<Placement> out;
  if (!net) {
    for (int r = 0; r < o.nranks; ++r) out.push_back({r, o.nranks, -1, ""});
    return out;
  }
  for (size_t h = 0; h < o.ranks_per_host.size(); ++h)
    for (int k = 0; k < o.ranks_per_host[h]; ++k)
      out.push_back({k, o.ranks_per_host[h], net->host_ns_fd(static_cast<int>(h)),
                     dcclrun::EmuNet::hostname(static_cast<int>(h))});
  return out;
}

// Every rank's environment: ours minus the keys we set, then DCCL_*, then --env.
std::vector<std::string> rank_env(const dcclrun::RunOptions& o, int r, const Placement& p, const std::string& id) {
  std::vector<std::string> set = {
      "DCCL_RANK=" + std::to_string(r), "DCCL_WORLD_SIZE=" + std::to_string(o.nranks),
      "DCCL_LOCAL_RANK=" + std::to_string(p.local_rank), "DCCL_LOCAL_SIZE=" + std::to_string(p.local_size),
      "DCCL_ID=" + id};
  set.insert(set.end(), o.env.begin(), o.env.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& s : set) overridden |= s.compare(0, key.size() + 1, key + "=") == 0;
    if (!overridden) env.push_back(kv);
  }
  // Later --env entries win over earlier ones with the same key.
  for (size_t i = 0; i < set.size(); ++i) {
    const std::string key = set[i].substr(0, set[i].find('=') + 1);
    bool later = false;
    for (size_t j = i + 1; j < set.size(); ++j) later |= set[j].compare(0, key.size(), key) == 0;
    if (!later) env.push_back(set[i]);
  }
  return env;
}

std::vector<char*> c_array(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Async-signal-safe decimal for the child's error path.
void put_num(char* buf, size_t* len, long v) {
  char tmp[24];
  int n = 0;
  do tmp[n++] = static_cast<char>('0' + v % 10);
  while ((v /= 10) > 0 && n < 23);
  while (n > 0) buf[(*len)++] = tmp[--n];
}

class Job {
 public:
  Job(const dcclrun::RunOptions& o, std::vector<Placement> place)
      : opt_(o), place_(std::move(place)), ranks_(static_cast<size_t>(o.nranks)) {}
  // Starts every rank; false (after saying why) when one cannot be started.
  bool start(const std::string& program, const std::string& id, const sigset_t& child_mask);
  int supervise(int sigfd);  // returns the job's exit code
  // Ends the ranks already started (SIGTERM, then SIGKILL after the grace period).
  void terminate() {
    terminating_ = true;
    signal_all(SIGTERM, true);
    kill_at_ = Clock::now() + kGrace;
  }

 private:
  void reap();
  void read_output(Rank& r, int which);
  void signal_all(int sig, bool ours);
  bool anything_open() const;
  void close_all();

  const dcclrun::RunOptions& opt_;
  const std::vector<Placement> place_;
  std::vector<Rank> ranks_;
  int running_ = 0;
  int first_failed_ = -1, first_code_ = 0;
  int interrupted_ = 0;  // the signal we forwarded, if any
  bool timed_out_ = false, terminating_ = false;
  std::optional<Clock::time_point> kill_at_;
};

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

bool Job::start(const std::string& program, const std::string& id, const sigset_t& child_mask) {
  const pid_t parent = ::getpid();
  for (int r = 0; r < opt_.nranks; ++r) {
    Rank& rk = ranks_[static_cast<size_t>(r)];
    const Placement& pl = place_[static_cast<size_t>(r)];
    std::vector<std::string> env = rank_env(opt_, r, pl, id);
    std::vector<std::string> args = opt_.argv;
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
      return false;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      say(std::string("fork: ") + std::strerror(errno));
      return false;
    }
    cpu_set_t cpu;
    CPU_ZERO(&cpu);
    if (pl.cpu >= 0) CPU_SET(pl.cpu, &cpu);
    if (pid == 0) {  // child: async-signal-safe calls only
      ::setpgid(0, 0);
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
    ::setpgid(pid, pid);  // also here, so signals never race the child's own setpgid
    ::close(p[0][1]);
    ::close(p[1][1]);
    rk.pid = pid;
    rk.running = true;
    ++running_;
    std::string prefix;
    if (!opt_.no_prefix) {
      prefix.push_back('[');  // (not "[" + ...: GCC 12 -Wrestrict false positive)
      prefix.append(std::to_string(r)).append("] ");
    }
    for (int w = 0; w < 2; ++w) {
      rk.fd[w] = p[w][0];
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
    if (::kill(-r.pid, sig) == 0 && r.running && ours) r.signalled_by_us = true;
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
          say("rank " + std::to_string(i) + " failed first; terminating the other ranks");
          terminate();
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
  const std::optional<Clock::time_point> deadline =
      opt_.timeout_s > 0 ? std::optional(t0 + std::chrono::duration_cast<Clock::duration>(
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
    if (kill_at_ && now >= *kill_at_) {
      if (running_ > 0) say("ranks still running after SIGTERM; sending SIGKILL");
      signal_all(SIGKILL, true);
      kill_at_.reset();
    }
    // Sleep until the next deadline.
    int wait_ms = -1;
    for (const auto& t : {deadline && !timed_out_ ? deadline : std::nullopt, kill_at_, drain_until}) {
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

// Whether the ranks log at INFO or TRACE (then dccl-run describes the emulated network).
bool debug_info(const dcclrun::RunOptions& o) {
  std::string level = std::getenv("DCCL_DEBUG") ? std::getenv("DCCL_DEBUG") : "";
  for (const auto& kv : o.env)
    if (kv.compare(0, 11, "DCCL_DEBUG=") == 0) level = kv.substr(11);
  for (auto& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return level == "INFO" || level == "TRACE";
}

}  // namespace

int main(int argc, char** argv) {
  dcclrun::RunOptions opt;
  std::string error;
  switch (dcclrun::parse_run_args(argc, argv, &opt, &error)) {
    case 0: break;
    case 1: return 0;
    default:
      say(error);
      dcclrun::print_run_usage(stderr);
      return 2;
  }
  // The program is looked up in the PATH the ranks will have.
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : opt.env) {
    if (kv.compare(0, 5, "PATH=") == 0) path = kv.substr(5);
  }
  std::string why;
  const std::string program = dcclrun::resolve_program(opt.argv[0], path, &why);
  if (program.empty()) {
    say("cannot run '" + opt.argv[0] + "': " + why);
    return 2;
  }

  // Signals arrive through a signalfd; block them before any thread starts.
  sigset_t old_mask, mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, &old_mask);
  ::signal(SIGPIPE, SIG_IGN);
  const int sigfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    say(std::string("signalfd: ") + std::strerror(errno));
    return 1;
  }

  // Emulated hosts: built before the store, which listens in their switch.
  std::unique_ptr<dcclrun::EmuNet> net;
  if (!opt.ranks_per_host.empty()) {
    const std::string own_path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/sbin:/usr/bin:/sbin:/bin";
    const std::string missing = dcclrun::emulation_unavailable(opt.rate_bps > 0, own_path);
    if (!missing.empty()) {
      say("--hosts " + missing);
      return 1;
    }
    for (const auto& line : dcclrun::EmuNet::remove_stale(own_path, old_mask)) say("stale namespaces: " + line);
    dcclrun::NetSpec spec;
    spec.hosts = static_cast<int>(opt.ranks_per_host.size());
    spec.rails = opt.rails;
    spec.rate_bps = opt.rate_bps;
    spec.mtu = opt.mtu;
    spec.default_route = !opt.no_default_route;
    net = dcclrun::EmuNet::create(spec, own_path, old_mask, &why);
    if (!net) {
      say("--hosts: " + why);
      return 1;
    }
    if (opt.keep_net) net->keep();
    if (debug_info(opt)) say(net->summary());
  }

  std::unique_ptr<dccl::boot::StoreServer> store;
  std::string id_hex;
  auto start_store = [&] {
    store = dccl::boot::StoreServer::start(net ? net->store_address() : "127.0.0.1", 0,
                                           dccl::boot::random_secret());
  };
  try {
    if (net && !net->in_switch(start_store, &why)) {
      say("cannot start the rendezvous store: " + why);
      return 1;
    }
    if (!net) start_store();
    dcclUniqueId uid;
    dccl::boot::encode_id(store->id(), &uid);
    id_hex = dccl::boot::id_to_hex(uid);
  } catch (const std::exception& e) {
    say(std::string("cannot start the rendezvous store: ") + e.what());
    return 1;
  }

  std::vector<Placement> place = place_ranks(opt, net.get());
  bind_ranks(opt, &place);
  Job job(opt, std::move(place));
  int rc;
  if (job.start(program, id_hex, old_mask)) {
    rc = job.supervise(sigfd);
  } else {
    job.terminate();  // the ranks that did start cannot complete the job
    job.supervise(sigfd);
    rc = 1;
  }
  store.reset();
  if (net && opt.keep_net) {
    std::string names = net->switch_ns();
    for (size_t h = 0; h < opt.ranks_per_host.size(); ++h) names += " " + net->ns_name(static_cast<int>(h));
    say("kept the emulated network (--keep-net): namespaces " + names +
        "; the next dccl-run --hosts removes them, or run: for n in " + names + "; do ip netns del $n; done");
  } else if (net) {
    const std::string failed = net->remove();
    if (!failed.empty()) say(failed);
  }
  ::close(sigfd);
  return rc;
}
