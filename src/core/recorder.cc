#include "core/recorder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "core/ticks.hpp"

namespace dccl::core {

namespace {

struct Current {
  RecEntry* e = nullptr;
  Recorder* r = nullptr;
};
// The default TLS model: libdccl.so may be loaded by dlopen (torch_dccl), where
// initial-exec would take from the static TLS reserve that other libraries need.
thread_local Current tls_current;

// The process's recorders, for the signal handlers (no lock: a handler may run anywhere).
constexpr int kSlots = 256;
// What a call writes of its entry: everything before the steps, and its first steps.
constexpr size_t kHotBytes = offsetof(RecEntry, steps) + 2 * sizeof(RecStep);
static_assert(offsetof(RecEntry, steps) <= 192, "the fields every call writes fit three cache lines");
std::atomic<Recorder*> g_live[kSlots];

void copy_text(char* dst, size_t cap, const char* src) {
  size_t i = 0;
  for (; src && src[i] && i + 1 < cap; ++i) dst[i] = src[i];
  dst[i] = '\0';
}

// Text built in a fixed buffer and written with write(2) when full: no allocation,
// no locale, no stdio, so that a signal handler may use it.
class Out {
 public:
  explicit Out(int fd) : fd_(fd) {}
  ~Out() { flush(); }
  bool ok() const { return ok_; }
  void flush() {
    size_t off = 0;
    while (off < n_) {
      ssize_t w = ::write(fd_, buf_ + off, n_ - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ok_ = false;
        break;
      }
      off += static_cast<size_t>(w);
    }
    n_ = 0;
  }
  Out& c(char ch) {
    if (n_ == sizeof(buf_)) flush();
    buf_[n_++] = ch;
    return *this;
  }
  Out& s(const char* p) {
    while (p && *p) c(*p++);
    return *this;
  }
  Out& q(const char* p) {  // a JSON string
    c('"');
    for (; p && *p; ++p) {
      const unsigned char ch = static_cast<unsigned char>(*p);
      if (ch == '"' || ch == '\\') c('\\').c(static_cast<char>(ch));
      else if (ch < 0x20) c('?');
      else c(static_cast<char>(ch));
    }
    return c('"');
  }
  Out& u(uint64_t v) {
    char t[24];
    int i = 0;
    do t[i++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0);
    while (i > 0) c(t[--i]);
    return *this;
  }
  Out& i(int64_t v) {
    if (v < 0) {
      c('-');
      return u(static_cast<uint64_t>(-(v + 1)) + 1);
    }
    return u(static_cast<uint64_t>(v));
  }
  Out& k(const char* key) { return c(',').q(key).c(':'); }  // ,"key":

 private:
  int fd_;
  bool ok_ = true;
  size_t n_ = 0;
  char buf_[4096];
};

// mkdir -p without allocating (async-signal-safe): false with errno set when a
// part of `dir` cannot be made (a part that exists, folder or not, is passed over:
// the open in dump() then names what is wrong with it).
bool make_dirs(const char* dir) {
  char part[Recorder::kMaxPath];
  size_t n = 0;
  for (; dir[n]; ++n) {
    if (n + 1 >= sizeof(part)) {  // longer than a path can be
      errno = ENAMETOOLONG;
      return false;
    }
    if (dir[n] == '/' && n > 0) {
      part[n] = '\0';
      if (::mkdir(part, 0755) != 0 && errno != EEXIST) return false;
    }
    part[n] = dir[n];
  }
  part[n] = '\0';
  if (n > 0 && ::mkdir(part, 0755) != 0 && errno != EEXIST) return false;
  return true;
}

void write_entry(Out& o, int rank, const RecEntry& e, const ticks::Scale& sc) {
  o.s("{\"rank\":").i(rank);
  o.k("seq").u(e.seq).k("coll").q(e.coll).k("count").u(e.count).k("type").q(e.type).k("op").q(e.op);
  o.k("root").i(e.root).k("peer").i(e.peer).k("algo").q(e.algo).k("path").q(e.path);
  o.k("start_ns").i(sc.to_ns(e.start_t)).k("end_ns").i(sc.to_ns(e.end_t)).k("result").i(e.result);
  o.k("sent").u(e.sent).k("recv").u(e.recvd).k("tag").q(e.tag).k("user_seq").u(e.user_seq);
  o.k("dropped_steps").u(e.dropped).k("steps").c('[');
  const uint32_t n = e.nsteps < RecEntry::kSteps ? e.nsteps : RecEntry::kSteps;
  for (uint32_t j = 0; j < n; ++j) {
    const RecStep& st = e.steps[j];
    if (j) o.c(',');
    o.c('[').i(st.peer).c(',').q(st.send ? "send" : "recv").c(',').u(st.bytes).c(',').i(sc.to_ns(st.posted_t)).c(',');
    o.i(sc.to_ns(st.done_t)).c(']');
  }
  o.s("]}\n");
}

// Signal handling: the previous actions, and the signals taken over.
struct Prev {
  int sig;
  struct sigaction old;
  bool taken;
};
Prev g_prev[] = {{SIGSEGV, {}, false}, {SIGBUS, {}, false}, {SIGILL, {}, false},
                 {SIGFPE, {}, false},  {SIGABRT, {}, false}, {SIGUSR2, {}, false}};

const char* sig_reason(int sig) {
  switch (sig) {
    case SIGSEGV: return "signal SIGSEGV";
    case SIGBUS: return "signal SIGBUS";
    case SIGILL: return "signal SIGILL";
    case SIGFPE: return "signal SIGFPE";
    case SIGABRT: return "signal SIGABRT";
    default: return "on demand (SIGUSR2)";
  }
}

void on_signal(int sig) {
  const int saved = errno;
  Recorder::dump_all(sig_reason(sig));
  errno = saved;
  if (sig == SIGUSR2) return;
  // A fatal signal: its previous action, as if this handler had not been there.
  for (Prev& p : g_prev)
    if (p.sig == sig) sigaction(sig, &p.old, nullptr);
  raise(sig);
}

}  // namespace

Recorder::Recorder(size_t capacity) : cap_(capacity) {
  if (cap_ == 0) return;
  ticks::init();
  // One slot more than the calls kept: the slot begin() writes next is never one a
  // dump reads, so that a dump taken while a call begins (another thread, or a
  // signal handler on the writer's) still holds the newest `capacity` calls.
  slots_ = cap_ + 1;
  ring_ = std::make_unique<RecEntry[]>(slots_);
  for (int i = 0; i < kSlots; ++i) {
    Recorder* none = nullptr;
    if (g_live[i].compare_exchange_strong(none, this)) {
      slot_ = i;
      break;
    }
  }
}

Recorder::~Recorder() {
  if (slot_ >= 0) g_live[slot_].store(nullptr);
  if (tls_current.r == this) tls_current = {};
}

void Recorder::identify(int rank, int nranks, const char* host, const char* comm, const char* dir) {
  rank_ = rank;
  nranks_ = nranks;
  copy_text(host_, sizeof(host_), host);
  copy_text(comm_, sizeof(comm_), comm);
  copy_text(dir_, sizeof(dir_), dir);
}

void Recorder::set_hosts(const std::vector<std::string>& hosts) {
  std::string j = "[";
  for (const std::string& h : hosts) {
    j += j.size() > 1 ? ",\"" : "\"";
    for (char c : h)
      if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) j.push_back(c);
    j += "\"";
  }
  hosts_json_ = j + "]";
}

int64_t Recorder::now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t Recorder::ns(uint64_t tick) { return ticks::to_ns(tick); }

RecEntry* Recorder::begin(uint64_t seq, const char* coll, uint64_t count, const char* type, const char* op, int root,
                          int peer) {
  if (cap_ == 0) return nullptr;
  const uint64_t n = head_.load(std::memory_order_relaxed);
  RecEntry* e = &ring_[slot_next_];  // n % slots_, without a division on every call
  if (++slot_next_ == slots_) slot_next_ = 0;
  // The next call's entry was last written a whole ring ago and is out of the cache
  // by now: fetched while this call runs, it costs the next call no miss (a small
  // allreduce took 0.2 us longer per call with the ring cold).
  const char* next = reinterpret_cast<const char*>(&ring_[slot_next_]);
  for (size_t off = 0; off < kHotBytes; off += 64) __builtin_prefetch(next + off, 1, 3);
  e->seq = seq;
  e->user_seq = user_seq_;
  e->coll = coll;
  e->type = type;
  e->op = op;
  e->algo = "";
  e->path = "";
  e->count = count;
  e->root = root;
  e->peer = peer;
  e->result = -1;
  e->error = 0;
  e->nsteps = e->dropped = 0;
  e->sent = e->recvd = 0;
  e->end_t = 0;
  if (tag_[0]) {
    memcpy(e->tag, tag_, sizeof(tag_));
    if (user_seq_) {  // a tag names one call
      tag_[0] = '\0';
      user_seq_ = 0;
    }
  } else {
    e->tag[0] = '\0';
  }
  e->start_t = ticks::now();
  last_t_.store(e->start_t, std::memory_order_relaxed);
  head_.store(n + 1, std::memory_order_release);
  e->prev = tls_current.e;  // a sub-communicator's call runs inside its parent's
  e->prev_rec = tls_current.r;
  tls_current = {e, this};
  return e;
}

void Recorder::end(RecEntry* e, int result) {
  if (!e) return;
  e->end_t = ticks::now();
  e->result = result;
  last_t_.store(e->end_t, std::memory_order_relaxed);
  tls_current = {e->prev, e->prev_rec};
}

void Recorder::set_tag(const char* tag, uint64_t user_seq) {
  copy_text(tag_, sizeof(tag_), tag);
  user_seq_ = user_seq;
}

void Recorder::failing(int code) {
  if (tls_current.e && !tls_current.e->error) tls_current.e->error = code;
}

RecEntry* Recorder::current() { return tls_current.e; }
void Recorder::set_current(RecEntry* e) { tls_current.e = e; }

void Recorder::posted(int peer, bool send, uint64_t bytes) {
  RecEntry* e = tls_current.e;
  if (!e) return;
  if (e->nsteps == RecEntry::kSteps) {
    ++e->dropped;
    return;
  }
  RecStep& s = e->steps[e->nsteps++];
  s.peer = peer;
  s.send = send ? 1 : 0;
  s.bytes = bytes;
  s.posted_t = ticks::now();
  s.done_t = 0;
}

void Recorder::step(int peer, bool send, uint64_t bytes) {
  RecEntry* e = tls_current.e;
  if (!e) return;
  const uint64_t t = ticks::now();
  (send ? e->sent : e->recvd) += bytes;
  for (uint32_t i = 0; i < e->nsteps; ++i) {  // the oldest of this peer's transfers in flight
    RecStep& s = e->steps[i];
    if (s.done_t == 0 && s.peer == peer && s.send == (send ? 1u : 0u)) {
      s.done_t = t;
      break;
    }
  }
  if (tls_current.r) tls_current.r->last_t_.store(t, std::memory_order_relaxed);
}

void Recorder::store_reached() { store_t_.store(ticks::now(), std::memory_order_relaxed); }

bool Recorder::latest(RecEntry* out) const {
  const uint64_t n = head_.load(std::memory_order_acquire);
  if (cap_ == 0 || n == 0) return false;
  *out = ring_[(n - 1) % slots_];
  return true;
}

std::string Recorder::prepare_dir(const std::string& dir) {
  if (dir.size() >= kMaxPath)
    return "its name is " + std::to_string(dir.size()) + " characters long (at most " + std::to_string(kMaxPath - 1) +
           ")";
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      return "cannot make the folder " + part + ": " + std::strerror(errno);
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) return std::string("cannot see it: ") + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "not a folder";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return std::string("cannot write there: ") + std::strerror(errno);
  return "";
}

bool Recorder::dump(const char* reason, const char* dir) const noexcept {
  if (cap_ == 0) return false;
  if (dir && dir[0] && !make_dirs(dir)) return false;  // errno: why
  if (!dir) dir = dir_;
  if (!dir || !dir[0]) return false;
  // <dir>/dccl-rec.<comm>.r<rank>.jsonl, built without allocating; a name that does
  // not fit is refused, never cut short (a file elsewhere, or one dccl-trace misses).
  char path[kMaxPath];
  size_t n = 0;
  bool fits = true;
  auto put = [&](const char* p) {
    while (*p && n + 1 < sizeof(path)) path[n++] = *p++;
    if (*p) fits = false;
  };
  char num[24];
  int d = 0;
  for (uint64_t v = static_cast<uint64_t>(rank_);; v /= 10) {
    num[d++] = static_cast<char>('0' + v % 10);
    if (v < 10) break;
  }
  char rk[24];
  for (int j = 0; j < d; ++j) rk[j] = num[d - 1 - j];
  rk[d] = '\0';
  put(dir);
  put("/dccl-rec.");
  put(comm_);
  put(".r");
  put(rk);
  put(".jsonl");
  path[n] = '\0';
  if (!fits) {
    errno = ENAMETOOLONG;
    return false;
  }
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok;
  {
    Out o(fd);
    const uint64_t head = head_.load(std::memory_order_acquire);
    const ticks::Scale sc = ticks::scale();
    // The newest cap_ calls; the spare slot (the next one begin() takes, which a
    // writer running meanwhile may be filling) is left out.
    const uint64_t first = head > cap_ ? head - cap_ : 0;
    o.s("{\"header\":1").k("rank").i(rank_).k("nranks").i(nranks_).k("host").q(host_).k("pid").i(getpid());
    o.k("comm").q(comm_).k("reason").q(reason).k("time_ns").i(now_ns()).k("calls").u(head);
    o.k("capacity").u(cap_).k("first").u(first).k("last_progress_ns").i(sc.to_ns(last_t_.load()));
    o.k("store_ns").i(sc.to_ns(store_t_.load()));  // 0 stays 0: never reached
    o.k("hosts").s(hosts_json_.c_str()).s("}\n");
    for (uint64_t j = first; j < head; ++j) write_entry(o, rank_, ring_[j % slots_], sc);
    o.flush();
    ok = o.ok();
  }
  ::close(fd);
  return ok;
}

void Recorder::dump_all(const char* reason) noexcept {
  for (auto& slot : g_live) {
    Recorder* r = slot.load();
    if (r && r->dir_[0]) r->dump(reason);
  }
}

void Recorder::install_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (Prev& p : g_prev) {
      if (sigaction(p.sig, nullptr, &p.old) != 0) continue;
      const bool dfl = !(p.old.sa_flags & SA_SIGINFO) && p.old.sa_handler == SIG_DFL;
      if (!dfl) continue;  // the application's (or a runtime's) own handler stays
      struct sigaction sa {};
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      p.taken = sigaction(p.sig, &sa, nullptr) == 0;
    }
  });
}

}  // namespace dccl::core
