// Emulated hosts; see netns.hpp.
#include "dccl-run/netns.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <utility>

#include "dccl-run/lines.hpp"
#include "dccl-run/options.hpp"

namespace dcclrun {
namespace {

constexpr const char* kNetnsDir = "/run/netns";

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// The tool `name` in PATH, then in the sbin directories a non-root PATH may lack.
std::string find_tool(const std::string& name, const std::string& path) {
  std::string why;
  return resolve_program(name, path + ":/usr/sbin:/sbin:/usr/bin:/bin", &why);
}

// Output of a tool, on one line: lines joined with "; ", at most 400 characters.
std::string one_line(const std::string& out) {
  std::string s;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) s += (s.empty() ? "" : "; ") + line;
    start = end + 1;
  }
  if (s.size() > 400) s = s.substr(0, 397) + "...";
  return s.empty() ? "no output" : s;
}

// "dccl-<pid>-<rest>" -> pid; 0 when the name is not one of ours.
long job_pid(const std::string& name) {
  if (name.compare(0, 5, "dccl-") != 0) return 0;
  size_t i = 5;
  long pid = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && pid < (1L << 31)) pid = pid * 10 + (name[i++] - '0');
  return i > 5 && i < name.size() && name[i] == '-' ? pid : 0;
}

// Whether pid is a running dccl-run (not some other process that reuses its pid).
bool dccl_run_alive(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  // A killed dccl-run that nobody reaped yet (a zombie) holds no namespace any more.
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(st, stat);
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(f, comm);
  return !f || comm == "dccl-run";
}

std::vector<std::string> list_netns() {
  std::vector<std::string> out;
  DIR* d = ::opendir(kNetnsDir);
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool netns_exists(const std::string& name) {
  struct stat st;
  return ::stat((std::string(kNetnsDir) + "/" + name).c_str(), &st) == 0;
}

int run_tool(const std::vector<std::string>& cmd, const std::string& input, const sigset_t& mask,
             std::string* out) {
  const int in = ::memfd_create("dccl-run-batch", MFD_CLOEXEC);
  if (in < 0) {
    *out = errno_text("memfd_create");
    return -1;
  }
  if (!write_all(in, input.data(), input.size()) || ::lseek(in, 0, SEEK_SET) != 0) {
    *out = errno_text("write the batch file");
    ::close(in);
    return -1;
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    *out = errno_text("pipe");
    ::close(in);
    return -1;
  }
  std::vector<std::string> args = cmd;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // child: async-signal-safe calls only
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in, STDIN_FILENO);
    ::dup2(p[1], STDOUT_FILENO);
    ::dup2(p[1], STDERR_FILENO);
    ::close_range(3, ~0U, 0);
    ::execv(argv[0], argv.data());
    static const char msg[] = "cannot execute it\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(in);
  ::close(p[1]);
  if (pid < 0) {
    ::close(p[0]);
    errno = fork_errno;
    *out = errno_text("fork");
    return -1;
  }
  out->clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n > 0) {
      if (out->size() < 65536) out->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(p[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *out = errno_text("waitpid");
      return -1;
    }
  }
  if (WIFSIGNALED(status)) {
    *out += "\nkilled by signal " + std::to_string(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

// prefix + n (not "x" + std::to_string(n): GCC 12 -Wrestrict false positive).
std::string named(const char* prefix, long n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

// The switch's port for host h on rail r.
std::string port(int h, int r) { return named("h", h) + named("r", r); }

std::string join_cmd(const std::vector<std::string>& cmd) {
  std::string s;
  for (const auto& a : cmd) s += (s.empty() ? "" : " ") + a;
  return s;
}

// `ip -force -b -` deleting `names`; "" or what failed.
std::string delete_netns(const std::string& ip, const std::vector<std::string>& names, const sigset_t& mask) {
  std::string batch;
  for (const auto& n : names) batch += "netns del " + n + "\n";
  if (batch.empty()) return "";
  std::string out;
  const std::vector<std::string> cmd = {ip, "-force", "-b", "-"};
  if (run_tool(cmd, batch, mask, &out) == 0) return "";
  return "cannot remove network namespace(s) with '" + join_cmd(cmd) + "': " + one_line(out);
}

}  // namespace

TbfParams tbf_for(uint64_t rate_bps, int mtu) {
  TbfParams p;
  p.burst_bytes = std::max<uint64_t>({rate_bps / 8 / 1000, 16384, 2 * static_cast<uint64_t>(mtu)});
  p.latency_ms = 50;
  return p;
}

std::string rate_text(uint64_t rate_bps) {
  const char* units[] = {"bit", "kbit", "mbit", "gbit", "tbit"};
  double v = static_cast<double>(rate_bps);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%s", v, units[u]);
  return buf;
}

std::string emulation_unavailable(bool shaping, const std::string& path) {
  if (::geteuid() != 0)
    return "needs root to create network namespaces (running as uid " + std::to_string(::geteuid()) + ")";
  if (find_tool("ip", path).empty())
    return "needs ip (iproute2), which is not installed (not found in PATH, /usr/sbin or /sbin)";
  if (shaping && find_tool("tc", path).empty())
    return "needs tc (iproute2) for --rate, which is not installed (not found in PATH, /usr/sbin or /sbin)";
  return "";
}

std::vector<std::string> EmuNet::remove_stale(const std::string& path, const sigset_t& child_mask) {
  std::vector<std::string> stale;
  for (const auto& name : list_netns()) {
    const long pid = job_pid(name);
    if (pid > 0 && (pid == ::getpid() || !dccl_run_alive(pid))) stale.push_back(name);
  }
  const std::string failed = delete_netns(find_tool("ip", path), stale, child_mask);
  // Another dccl-run starting at the same time may have removed some first.
  bool left = false;
  for (const auto& n : stale) left = left || netns_exists(n);
  if (failed.empty() || !left) return {};
  return {failed};
}

EmuNet::EmuNet(const NetSpec& spec, std::string ip, std::string tc, const sigset_t& mask)
    : spec_(spec), tag_(named("dccl-", ::getpid())), ip_(std::move(ip)), tc_(std::move(tc)),
      mask_(mask), host_fds_(static_cast<size_t>(spec.hosts), -1) {
  if (spec_.fabric && spec_.leaves <= 0) spec_.leaves = spec_.hosts;
}

std::unique_ptr<EmuNet> EmuNet::create(const NetSpec& spec, const std::string& path, const sigset_t& child_mask,
                                       std::string* why) {
  std::unique_ptr<EmuNet> net(new EmuNet(spec, find_tool("ip", path), find_tool("tc", path), child_mask));
  if (net->build(why)) return net;
  const std::string failed = net->remove();
  if (!failed.empty()) *why += "; " + failed;
  return nullptr;
}

EmuNet::~EmuNet() {
  if (keep_) {
    for (int fd : host_fds_)
      if (fd >= 0) ::close(fd);
    if (switch_fd_ >= 0) ::close(switch_fd_);
    return;
  }
  remove();
}

std::string EmuNet::ns_name(int host) const { return tag_ + named("-h", host); }
std::string EmuNet::switch_ns() const { return spec_.fabric ? tag_ + "-l0" : tag_ + "-sw"; }

std::vector<std::string> EmuNet::router_ns() const {
  if (!spec_.fabric) return {switch_ns()};
  std::vector<std::string> out;
  for (int l = 0; l < spec_.leaves; ++l) out.push_back(tag_ + named("-l", l));
  for (int s = 0; s < spec_.spines; ++s) out.push_back(tag_ + named("-s", s));
  return out;
}

std::vector<std::string> EmuNet::all_ns() const {
  std::vector<std::string> out;
  for (int h = 0; h < spec_.hosts; ++h) out.push_back(ns_name(h));
  for (auto& n : router_ns()) out.push_back(std::move(n));
  return out;
}
std::string EmuNet::hostname(int host) { return named("dccl-h", host); }
std::string EmuNet::address(int host, int rail) {
  return named("198.18.", rail) + named(".", host + 1);
}

bool EmuNet::run(const std::vector<std::string>& cmd, const std::string& input, std::string* why) const {
  std::string out;
  const int rc = run_tool(cmd, input, mask_, &out);
  if (rc == 0) return true;
  *why = "'" + join_cmd(cmd) + "' failed" + (rc > 0 ? " (exit status " + std::to_string(rc) + ")" : "") + ": " +
         one_line(out);
  return false;
}

bool EmuNet::build(std::string* why) {
  if (spec_.fabric) return build_fabric(why);
  const std::string sw = switch_ns();
  std::string add = "netns add " + sw + "\n";
  for (int h = 0; h < spec_.hosts; ++h) add += "netns add " + ns_name(h) + "\n";
  if (!run({ip_, "-b", "-"}, add, why)) {
    *why = "cannot create the network namespaces: " + *why;
    return false;
  }
  // The switch: a bridge per rail, a veth pair per host and rail whose host end
  // goes straight into the host's namespace as eth<rail>.
  std::string b = "link set lo up\n";
  for (int r = 0; r < spec_.rails; ++r) {
    b += "link add " + named("br", r) + " type bridge stp_state 0 forward_delay 0\n";
    b += "link set " + named("br", r) + " up\n";
  }
  b += "addr add " + store_address() + "/24 dev br0\n";
  for (int h = 0; h < spec_.hosts; ++h) {
    for (int r = 0; r < spec_.rails; ++r) {
      const std::string dev = port(h, r);
      b += "link add " + dev + " type veth peer name " + named("eth", r) + " netns " + ns_name(h) + "\n";
      if (spec_.mtu > 0) b += "link set " + dev + " mtu " + std::to_string(spec_.mtu) + "\n";
      b += "link set " + dev + " master " + named("br", r) + " up\n";
    }
  }
  if (!run({ip_, "-n", sw, "-b", "-"}, b, why)) {
    *why = "cannot build the switch in namespace " + sw + ": " + *why;
    return false;
  }
  for (int h = 0; h < spec_.hosts; ++h) {
    std::string hb = "link set lo up\n";
    for (int r = 0; r < spec_.rails; ++r) {
      const std::string dev = named("eth", r);
      hb += "addr add " + address(h, r) + "/24 dev " + dev + "\n";
      if (spec_.mtu > 0) hb += "link set " + dev + " mtu " + std::to_string(spec_.mtu) + "\n";
      hb += "link set " + dev + " up\n";
    }
    // A default route, as every cloud host has: programs that pick "the
    // default-route interface" (the store of dcclGetUniqueId) then pick eth0.
    if (spec_.default_route) hb += "route add default via " + store_address() + " dev eth0\n";
    if (!run({ip_, "-n", ns_name(h), "-b", "-"}, hb, why)) {
      *why = "cannot configure emulated host " + std::to_string(h) + " (namespace " + ns_name(h) + "): " + *why;
      return false;
    }
  }
  if (spec_.rate_bps > 0) {
    const TbfParams t = tbf_for(spec_.rate_bps, spec_.mtu);
    auto tbf = [&](const std::string& dev) {
      return "qdisc replace dev " + dev + " root tbf rate " + std::to_string(spec_.rate_bps) + "bit burst " +
             std::to_string(t.burst_bytes) + " latency " + std::to_string(t.latency_ms) + "ms\n";
    };
    std::string sb;
    for (int h = 0; h < spec_.hosts; ++h)
      for (int r = 0; r < spec_.rails; ++r) sb += tbf(port(h, r));
    if (!run({tc_, "-n", sw, "-b", "-"}, sb, why)) {
      *why = "cannot shape the switch ports: " + *why;
      return false;
    }
    for (int h = 0; h < spec_.hosts; ++h) {
      std::string hb;
      for (int r = 0; r < spec_.rails; ++r) hb += tbf(named("eth", r));
      if (!run({tc_, "-n", ns_name(h), "-b", "-"}, hb, why)) {
        *why = "cannot shape the links of emulated host " + std::to_string(h) + ": " + *why;
        return false;
      }
    }
  }
  return open_namespaces(why);
}

bool EmuNet::open_namespaces(std::string* why) {
  auto open_ns = [&](const std::string& name, int* fd) {
    const std::string p = std::string(kNetnsDir) + "/" + name;
    *fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (*fd < 0) *why = errno_text("cannot open " + p);
    return *fd >= 0;
  };
  if (!open_ns(switch_ns(), &switch_fd_)) return false;
  for (int h = 0; h < spec_.hosts; ++h)
    if (!open_ns(ns_name(h), &host_fds_[static_cast<size_t>(h)])) return false;
  return true;
}

bool EmuNet::in_netns(int fd, const std::string& name, const std::function<void()>& f, std::string* why) {
  const int self = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) {
    *why = errno_text("cannot open /proc/thread-self/ns/net");
    return false;
  }
  if (::setns(fd, CLONE_NEWNET) != 0) {
    *why = errno_text("cannot enter network namespace " + name);
    ::close(self);
    return false;
  }
  std::exception_ptr err;
  try {
    f();
  } catch (...) {
    err = std::current_exception();
  }
  const bool back = ::setns(self, CLONE_NEWNET) == 0;
  if (!back) *why = errno_text("cannot return to dccl-run's own network namespace");
  ::close(self);
  if (back && err) std::rethrow_exception(err);
  return back;
}

std::string EmuNet::remove() {
  if (removed_) return "";
  removed_ = true;
  // An open namespace file keeps the namespace (and its links) alive.
  for (int& fd : host_fds_)
    if (fd >= 0) ::close(std::exchange(fd, -1));
  if (switch_fd_ >= 0) ::close(std::exchange(switch_fd_, -1));
  std::vector<std::string> names;
  for (const auto& n : all_ns())
    if (netns_exists(n)) names.push_back(n);
  return delete_netns(ip_, names, mask_);
}

std::string EmuNet::summary() const {
  if (spec_.fabric) return fabric_summary();
  std::string s = std::to_string(spec_.hosts) + " emulated hosts (namespaces " + ns_name(0) + "..h" +
                  std::to_string(spec_.hosts - 1) + ", switch " + switch_ns() + "), " + std::to_string(spec_.rails) +
                  (spec_.rails == 1 ? " rail" : " rails") + " (198.18.<rail>.<host+1>/24), store on " +
                  store_address();
  if (spec_.mtu > 0) s += ", MTU " + std::to_string(spec_.mtu);
  if (spec_.rate_bps > 0) {
    const TbfParams t = tbf_for(spec_.rate_bps, spec_.mtu);
    s += ", links shaped to " + rate_text(spec_.rate_bps) + " both ways (tbf burst " +
         std::to_string(t.burst_bytes) + " B, latency " + std::to_string(t.latency_ms) + " ms)";
  }
  return s;
}

}  // namespace dcclrun
