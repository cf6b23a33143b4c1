#include "bootstrap/secret_file.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/socket.hpp"
#include "bootstrap/unique_id.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/host.hpp"
#include "core/log.hpp"

namespace dccl::boot {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kMagic = "DCCL-SECRET 1";

std::string hex16(uint64_t v) {
  char b[17];
  snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string to_hex(const std::array<uint8_t, 16>& s) {
  std::string out;
  for (uint8_t b : s) {
    char x[3];
    snprintf(x, sizeof(x), "%02x", b);
    out += x;
  }
  return out;
}

// One line of text: the job key may come from launcher variables.
std::string printable(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

bool private_dir(const char* path) {
  struct stat st{};
  return path && path[0] == '/' && stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & 077) == 0;
}

bool usable_dir(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(path.c_str(), W_OK | X_OK) == 0;
}

// "uid 1001 (alice)", the name when the system knows it.
std::string owner_text(uid_t uid) {
  std::string out = "uid " + std::to_string(uid);
  passwd pw{}, *found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found && found->pw_name)
    out += std::string(" (") + found->pw_name + ")";
  return out;
}

std::string mode_text(mode_t m) {
  char t[8];
  snprintf(t, sizeof(t), "%04o", static_cast<unsigned>(m & 07777));
  return t;
}

// Why an existing entry must not be used as this user's directory, or "".
std::string untrusted_dir(const struct stat& st) {
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != geteuid())
    return "it belongs to " + owner_text(st.st_uid) + ", not to this user (" + owner_text(geteuid()) + ")";
  if ((st.st_mode & 022) != 0) return "its mode is " + mode_text(st.st_mode) + ": others may create files in it";
  return "";
}

// <base>/dccl-<uid>: made mode 0700 when missing. "" and *why when something
// else is in the way.
std::string user_dir(const std::string& base, std::string* why) {
  const std::string dir = base + "/dccl-" + std::to_string(geteuid());
  for (int attempt = 0; attempt < 3; ++attempt) {
    struct stat st{};
    if (lstat(dir.c_str(), &st) == 0) {
      *why = untrusted_dir(st);
      return why->empty() ? dir : "";
    }
    if (errno != ENOENT) break;
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) break;  // EEXIST: another rank made it meanwhile
  }
  *why = sock::errno_text(errno);
  return "";
}

std::vector<std::string>& bases() {
  static std::vector<std::string> b = {"/dev/shm", "/tmp"};
  return b;
}

// Why an open file must not be trusted, or "" when it is this user's and private.
std::string untrusted(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (st.st_uid != geteuid())
    return "it belongs to " + owner_text(st.st_uid) + ", not to this user (" + owner_text(geteuid()) + ")";
  if ((st.st_mode & 077) != 0) return "its mode is " + mode_text(st.st_mode) + ": others may read or write it";
  return "";
}

struct Content {
  std::string job;
  int nranks = 0;
  long pid = 0;
  std::string host;
  std::array<uint8_t, 16> secret{};
};

std::string encode(const Content& c) {
  return std::string(kMagic) + "\njob " + printable(c.job) + "\nnranks " + std::to_string(c.nranks) + "\npid " +
         std::to_string(c.pid) + "\nhost " + printable(c.host) + "\nsecret " + to_hex(c.secret) + "\n";
}

bool decode(const std::string& text, Content* c) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return false;
  bool have_secret = false;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    if (sp == std::string::npos) return false;
    const std::string k = line.substr(0, sp), v = line.substr(sp + 1);
    try {
      if (k == "job") c->job = v;
      else if (k == "nranks") c->nranks = std::stoi(v);
      else if (k == "pid") c->pid = std::stol(v);
      else if (k == "host") c->host = v;
      else if (k == "secret") {
        c->secret = secret_from_hex(v);
        have_secret = true;
      }
    } catch (...) {
      return false;
    }
  }
  return have_secret;
}

bool read_all(int fd, std::string* out) {
  char buf[1024];
  out->clear();
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof(buf), static_cast<off_t>(out->size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > 4096) return false;
  }
}

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// True when some process holds the file's lock (its publisher is alive). A
// reader's brief shared lock can make one probe fail: probe a few times.
bool lock_held(int fd, bool exclusive) {
  for (int i = 0; i < 5; ++i) {
    if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) {
      flock(fd, LOCK_UN);
      return false;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool same_file(const std::string& path, int fd) {
  struct stat a{}, b{};
  return lstat(path.c_str(), &a) == 0 && fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Files this process published and has not removed yet: removed at exit too,
// when the communicator holding the store was never destroyed. Never freed, so
// that it outlives every static destructor that might remove a file.
struct Live {
  std::mutex mu;
  std::map<std::string, std::pair<dev_t, ino_t>> files;
};
Live& live() {
  static Live* l = [] {
    auto* p = new Live;
    std::atexit([] {
      Live& me = live();
      std::lock_guard<std::mutex> lk(me.mu);
      for (const auto& [path, id] : me.files) {
        struct stat st{};
        if (lstat(path.c_str(), &st) == 0 && st.st_dev == id.first && st.st_ino == id.second) ::unlink(path.c_str());
      }
      me.files.clear();
    });
    return p;
  }();
  return *l;
}

struct Registry {
  std::mutex mu;
  std::map<std::pair<std::array<uint8_t, 16>, uint16_t>, std::unique_ptr<SecretFile>> files;
};
Registry& registry() {
  try {
    (void)core::log_level();  // constructed first, so destroyed after the registry
  } catch (...) {
  }
  static Registry r;  // files nobody adopted are removed at exit
  return r;
}

[[noreturn]] void sys_fail(int rank, const std::string& op, const std::string& what) {
  core::raise(dcclSystemError, core::describe(rank, op, what));
}

std::string path_for(int rank, const std::string& op, const std::string& job) {
  try {
    return secret_path(job);
  } catch (const core::Error& e) {
    sys_fail(rank, op, e.what());
  }
}

}  // namespace

std::string secret_dir() {
  const char* xdg = core::env_value("XDG_RUNTIME_DIR");
  if (private_dir(xdg)) return xdg;
  std::string refused;  // what stood in the way, per base
  for (const std::string& base : bases()) {
    if (!usable_dir(base)) continue;
    std::string why;
    const std::string dir = user_dir(base, &why);
    if (!dir.empty()) {
      if (!refused.empty())
        DCCL_WARN("job secret files go to %s: %s", dir.c_str(), refused.c_str());
      return dir;
    }
    refused += (refused.empty() ? "" : "; ") + base + "/dccl-" + std::to_string(geteuid()) + " is unusable: " + why;
  }
  core::raise(dcclSystemError,
              "no private directory for the job secret file: " + (refused.empty() ? "no writable /dev/shm or /tmp" : refused) +
                  ". Remove what is in the way, set XDG_RUNTIME_DIR to a directory only this user may enter, or "
                  "give every rank the same DCCL_SECRET");
}

void set_secret_bases(std::vector<std::string> b) {
  bases() = b.empty() ? std::vector<std::string>{"/dev/shm", "/tmp"} : std::move(b);
}

std::string secret_path(const std::string& job) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : job) h = (h ^ ch) * 1099511628211ULL;
  return secret_dir() + "/dccl-secret-" + std::to_string(geteuid()) + "-" + hex16(h);
}

SecretFile::SecretFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
  struct stat st{};
  fstat(fd_, &st);
  Live& l = live();
  std::lock_guard<std::mutex> lk(l.mu);
  l.files[path_] = {st.st_dev, st.st_ino};
}

SecretFile::~SecretFile() {
  {
    Live& l = live();
    std::lock_guard<std::mutex> lk(l.mu);
    l.files.erase(path_);
  }
  if (same_file(path_, fd_)) ::unlink(path_.c_str());
  ::close(fd_);  // drops the lock
}

std::array<uint8_t, 16> publish_secret(const std::string& job, int nranks, uint16_t port, int rank,
                                       std::string* path_out, const std::array<uint8_t, 16>* reuse) {
  const std::string op = "publish job secret";
  const std::string path = path_for(rank, op, job);
  if (path_out) *path_out = path;
  Content c;
  c.job = printable(job);
  c.nranks = nranks;
  c.pid = getpid();
  c.host = core::host_name();
  c.secret = reuse ? *reuse : random_secret();
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  ::unlink(tmp.c_str());  // ours, from an earlier failed attempt of this pid
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) sys_fail(rank, op, "create " + tmp + ": " + sock::errno_text(errno));
  struct Tmp {
    const std::string& name;
    int& fd;
    bool keep = false;
    ~Tmp() {
      ::unlink(name.c_str());
      if (!keep) ::close(fd);
    }
  } guard{tmp, fd};
  if (fchmod(fd, 0600) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || !write_all(fd, encode(c)))
    sys_fail(rank, op, "write " + tmp + ": " + sock::errno_text(errno));
  for (int attempt = 0;; ++attempt) {
    if (::link(tmp.c_str(), path.c_str()) == 0) break;
    if (errno != EEXIST || attempt >= 5) sys_fail(rank, op, "link " + path + ": " + sock::errno_text(errno));
    // Someone's file is there: a live job's, a dead process's, or another user's.
    int old = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (old < 0) continue;  // gone meanwhile: try again
    struct stat st{};
    fstat(old, &st);
    const std::string bad = untrusted(st);
    if (!bad.empty()) {
      ::close(old);
      sys_fail(rank, op, path + " exists and " + bad + "; remove it, or set DCCL_SECRET on every rank");
    }
    if (lock_held(old, true)) {
      Content other;
      std::string text;
      const bool known = read_all(old, &text) && decode(text, &other);
      ::close(old);
      core::raise(dcclInvalidUsage,
                  core::describe(rank, op,
                                 "another job on this host uses the same rendezvous address: " +
                                     (known ? "pid " + std::to_string(other.pid) + " (" +
                                                  std::to_string(other.nranks) + " ranks)"
                                            : std::string("a live process")) +
                                     " holds " + path + "; give this job another port (DCCL_ADDR, MASTER_PORT)"));
    }
    DCCL_INFO("rank %d: replacing %s, left by a process that is gone", rank, path.c_str());
    if (same_file(path, old)) ::unlink(path.c_str());
    ::close(old);
  }
  guard.keep = true;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lk(r.mu);
    r.files[{c.secret, port}] = std::make_unique<SecretFile>(path, fd);
  }
  DCCL_INFO("rank %d: job secret published in %s for %d ranks", rank, path.c_str(), nranks);
  return c.secret;
}

SharedSecret read_secret(const std::string& job, int rank, Clock::time_point deadline,
                         std::chrono::milliseconds timeout) {
  const std::string op = "read job secret";
  const std::string path = path_for(rank, op, job);
  auto pause = std::chrono::milliseconds(5);
  std::string last = "no such file";
  for (;;) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st{};
      fstat(fd, &st);
      const std::string bad = untrusted(st);
      if (!bad.empty()) {
        ::close(fd);
        sys_fail(rank, op, "refusing " + path + ": " + bad + " (it may have been planted); remove it, or set "
                           "DCCL_SECRET on every rank");
      }
      Content c;
      std::string text;
      const bool live = lock_held(fd, false);
      const bool ok = read_all(fd, &text) && decode(text, &c);
      ::close(fd);
      if (!live) {
        last = "a file left by a process that is gone (pid " + std::to_string(c.pid) + ")";
      } else if (!ok) {
        last = "a file that is not a DirectCCL secret file";
      } else if (c.job != printable(job)) {
        last = "a file of another job ('" + c.job + "')";
      } else {
        if (c.nranks != 0) DCCL_TRACE("rank %d: job secret read from %s", rank, path.c_str());
        return {c.secret, c.nranks, c.pid};
      }
    } else if (errno != ENOENT) {
      last = sock::errno_text(errno);
    }
    const auto now = Clock::now();
    if (now >= deadline)
      core::raise(dcclTimeout,
                  core::describe(rank, op,
                                 "rank 0 did not publish the job secret within " +
                                     std::to_string(timeout.count()) + " ms at " + path + " (" + last +
                                     "). Ranks on one host share it through that file: is rank 0 running on "
                                     "this host, as this user, with the same rendezvous address? Ranks on "
                                     "several hosts need DCCL_SECRET (the same 32 hex digits on every rank)"));
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

std::unique_ptr<SecretFile> adopt_secret_file(const std::array<uint8_t, 16>& secret, uint16_t port) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.files.find({secret, port});
  if (it == r.files.end()) return nullptr;
  std::unique_ptr<SecretFile> f = std::move(it->second);
  r.files.erase(it);
  return f;
}

}  // namespace dccl::boot
