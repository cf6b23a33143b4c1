// libnccl-net-dccl.so at its edges, one process connected to itself:
//   plugin_edges PLUGIN.so settings
//     each case in a child process of its own (the settings are read once per
//     process): a bad DCCL_* value fails init naming the setting, in the v10 and
//     v11 tables; a misspelled name is warned and the good values hold
//     (DCCL_TIMEOUT_S bounds accept); a bootstrap interface that does not exist
//     fails listen naming the call and device.
//   plugin_edges PLUGIN.so stray sock|shm|tcp
//     connections that are not the handle's holder (connect and close, an HTTP
//     probe, garbage, a dialer with the wrong secret, one that stays silent)
//     before the real dialer: accept keeps waiting, then connects, and data flow.
//   plugin_edges PLUGIN.so truncate sock|shm|tcp
//     a 100-byte send into a 10-byte receive fails the receive at once with the
//     right lengths (and again when tested again); the comm then fails every
//     later call at once, never hangs.
//   plugin_edges PLUGIN.so args sock|shm|tcp
//     getProperties with null props in every table, makeVDevice of 0 devices,
//     deregMr, isend and irecv with a foreign or freed handle, isend and irecv
//     of a null buffer, a lower layer's error naming the call and device.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "mem/backend.hpp"
#include "plugin/nccl/handshake.hpp"

using namespace harness;
using Clock = std::chrono::steady_clock;

namespace {

NcclNetV10* net = nullptr;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool warned(const std::string& text) {
  for (const auto& w : warnings())
    if (w.find(text) != std::string::npos) return true;
  return false;
}

// The handle's address (handshake.hpp's layout: magic, dev, port, ip).
struct HandleHead {
  char magic[8];
  int32_t dev;
  uint16_t port;
  char ip[46];
};

int raw_connect(const char* handle) {
  HandleHead h;
  memcpy(&h, handle, sizeof(h));
  const int fd = socket(strchr(h.ip, ':') ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket");
  int rc = -1;
  if (strchr(h.ip, ':')) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(h.port);
    inet_pton(AF_INET6, h.ip, &a.sin6_addr);
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(h.port);
    inet_pton(AF_INET, h.ip, &a.sin_addr);
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  CHECK(rc == 0, "raw connect to %s:%u", h.ip, h.port);
  return fd;
}

// Polls connect and accept to this process itself until both comms exist (every
// call must succeed), within `secs`.
void self_pair(int dev, char* handle, void* lc, void** sc, void** rc, double secs) {
  const auto t0 = Clock::now();
  while (!*sc || !*rc) {
    if (!*sc) OK(net->connect(dev, nullptr, handle, sc, nullptr));
    if (!*rc) OK(net->accept(lc, rc, nullptr));
    CHECK(since(t0) < secs, "connect/accept to itself not done within %.0f s", secs);
    usleep(100);
  }
}

// Tests a request until done or failed, within `secs`: its result.
NcclResult settle(void* req, int* size, double secs) {
  const auto t0 = Clock::now();
  int done = 0;
  for (;;) {
    const NcclResult r = net->test(req, &done, size);
    if (r != kNcclSuccess || done) return r;
    CHECK(since(t0) < secs, "request neither done nor failed within %.0f s", secs);
  }
}

void* post_send(void* comm, void* p, size_t n, int tag) {
  void* req = nullptr;
  while (!req) OK(net->isend(comm, p, n, tag, nullptr, nullptr, &req));
  return req;
}

// --- settings: one child process per case ---------------------------------------

struct EnvCase {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;
  void (*check)();
};

void init_fails(const char* setting) {
  const NcclResult r = net->init(log_fn(), nullptr);
  CHECK(r == kNcclInvalidArgument, "init with a bad %s: result %d", setting, r);
  CHECK(last_warning().find(setting) != std::string::npos && last_warning().find("NET/dccl init") != std::string::npos,
        "init's message does not name %s: '%s'", setting, last_warning().c_str());
  // The v11 table's init (one per communicator) fails alike, and so does every later init.
  void* ctx = nullptr;
  NcclCommConfig cfg{-1};
  Plugin pl = load(getenv("PLUGIN_SO"));
  const NcclResult r11 = pl.v11->init(&ctx, 1, &cfg, log_fn(), nullptr);
  CHECK(r11 == kNcclInvalidArgument && !ctx, "v11 init with a bad %s: result %d", setting, r11);
}

void typo_warned_values_hold() {
  OK(net->init(log_fn(), nullptr));
  CHECK(warned("DCCL_TIMEOUT_SS") && warned("did you mean DCCL_TIMEOUT_S"), "no warning for DCCL_TIMEOUT_SS (last: '%s')",
        last_warning().c_str());
  // DCCL_TIMEOUT_S=2 holds: an accept nobody dials fails after 2 s.
  const int dev = find_device(net, "sock");
  char handle[kNcclHandleBytes] = {};
  void *lc = nullptr, *rc = nullptr;
  OK(net->listen(dev, handle, &lc));
  const auto t0 = Clock::now();
  NcclResult r = kNcclSuccess;
  while (r == kNcclSuccess) {
    r = net->accept(lc, &rc, nullptr);
    CHECK(since(t0) < 15, "an accept nobody dials did not fail within 15 s (DCCL_TIMEOUT_S=2)");
    usleep(1000);
  }
  CHECK(r == kNcclRemoteError && since(t0) >= 1.9 && last_warning().find("2 s (DCCL_TIMEOUT_S)") != std::string::npos,
        "accept nobody dials: result %d after %.1f s: '%s'", r, since(t0), last_warning().c_str());
  OK(net->close_listen(lc));
}

void no_such_interface() {
  OK(net->init(log_fn(), nullptr));
  char handle[kNcclHandleBytes] = {};
  void* lc = nullptr;
  const int dev = find_device(net, "sock");
  CHECK(net->listen(dev, handle, &lc) != kNcclSuccess && !lc, "listen on a missing bootstrap interface succeeded");
  CHECK(last_warning().rfind("NET/dccl listen on dccl-sock", 0) == 0 && last_warning().find("nosuchif0") != std::string::npos,
        "listen's message does not name the call and device: '%s'", last_warning().c_str());
}

void settings(const char* so) {
  const std::vector<EnvCase> cases = {
      {"timeout-text", {{"DCCL_TIMEOUT_S", "abc"}}, [] { init_fails("DCCL_TIMEOUT_S"); }},
      {"timeout-zero", {{"DCCL_TIMEOUT_S", "0"}}, [] { init_fails("DCCL_TIMEOUT_S"); }},
      {"debug", {{"DCCL_DEBUG", "bogus"}, {"DCCL_TIMEOUT_S", "3"}}, [] { init_fails("DCCL_DEBUG"); }},
      {"peer-direct", {{"DCCL_PEER_DIRECT", "maybe"}}, [] { init_fails("DCCL_PEER_DIRECT"); }},
      {"typo", {{"DCCL_TIMEOUT_S", "2"}, {"DCCL_TIMEOUT_SS", "9"}}, typo_warned_values_hold},
      {"ifname", {{"DCCL_SOCKET_IFNAME", "nosuchif0"}}, no_such_interface},
  };
  setenv("PLUGIN_SO", so, 1);
  int failed = 0;
  for (const EnvCase& c : cases) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
      alarm(60);  // a hang fails the case
      for (const auto& [k, v] : c.env) setenv(k, v, 1);
      net = load(so).v10;
      c.check();
      fflush(stdout);
      _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("settings case %s: %s\n", c.name, ok ? "passed" : "FAILED");
    failed += !ok;
  }
  CHECK(failed == 0, "%d settings cases failed", failed);
}

// --- stray connections ----------------------------------------------------------

void stray(int dev) {
  char handle[kNcclHandleBytes] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr, *bad = nullptr;
  OK(net->listen(dev, handle, &lc));
  // A connection that stays open and silent all along (its handshake must not hold up the real one).
  const int silent = raw_connect(handle);
  close(raw_connect(handle));  // connect and close
  int fd = raw_connect(handle);
  CHECK(write(fd, "GET / HTTP/1.0\r\n\r\n", 18) == 18, "write");  // an HTTP probe (a huge "blob length")
  close(fd);
  fd = raw_connect(handle);
  CHECK(write(fd, "\x08\x00\x00\x00garbage!0123456789abcdef0123456789abcdef", 44) == 44, "write");  // a bad seal
  close(fd);
  // A dialer of this plugin with the wrong secret: its connect fails, the accept must not.
  char wrong[kNcclHandleBytes];
  memcpy(wrong, handle, sizeof(wrong));
  wrong[sizeof(HandleHead) + 3] ^= 0x5a;  // inside the secret
  const auto t0 = Clock::now();
  NcclResult r = kNcclSuccess;
  while (r == kNcclSuccess && !bad) {
    r = net->connect(dev, nullptr, wrong, &bad, nullptr);
    OK(net->accept(lc, &rc, nullptr));
    CHECK(!rc, "accept returned a comm for a dialer without the secret");
    CHECK(since(t0) < 20, "the wrong secret's connect neither failed nor finished within 20 s");
  }
  CHECK(r != kNcclSuccess && !bad, "a dialer with the wrong secret connected");
  // Let the listener see and drop every stray, then the real dialer.
  for (int i = 0; i < 200; ++i) {
    OK(net->accept(lc, &rc, nullptr));
    CHECK(!rc, "accept returned a comm before the holder dialed");
    usleep(1000);
  }
  self_pair(dev, handle, lc, &sc, &rc, 30);
  CHECK(warned("dropped that connection"), "no warning for the dropped connections");
  std::vector<char> s(1 << 16), d(1 << 16, 0);
  fill(s.data(), s.size(), 5);
  void* p = d.data();
  size_t cap = d.size();
  int tag = 4, got = -1;
  void* rq = nullptr;
  while (!rq) OK(net->irecv(rc, 1, &p, &cap, &tag, nullptr, nullptr, &rq));
  void* sq = post_send(sc, s.data(), s.size(), 4);
  CHECK(settle(rq, &got, 30) == kNcclSuccess && settle(sq, nullptr, 30) == kNcclSuccess, "transfer after strays: %s",
        last_warning().c_str());
  CHECK(got == static_cast<int>(s.size()) && check(d.data(), d.size(), 5), "after strays: %d bytes, data checked", got);
  const auto c0 = Clock::now();
  OK(net->close_send(sc));
  OK(net->close_recv(rc));
  OK(net->close_listen(lc));
  CHECK(since(c0) < 5, "closing took %.1f s (the silent connection's handshake held it)", since(c0));
  close(silent);
  printf("stray connections dropped; the holder connected and %zu bytes checked\n", s.size());
}

// --- truncation -----------------------------------------------------------------

void truncate(int dev) {
  char handle[kNcclHandleBytes] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  OK(net->listen(dev, handle, &lc));
  self_pair(dev, handle, lc, &sc, &rc, 30);
  std::vector<char> s(100), d(100, 0);
  fill(s.data(), s.size(), 3);
  // A receive larger than the send is fine: its size is the bytes received.
  void* p = d.data();
  size_t cap = 100;
  int tag = 7, got = -1;
  void* rq = nullptr;
  while (!rq) OK(net->irecv(rc, 1, &p, &cap, &tag, nullptr, nullptr, &rq));
  void* sq = post_send(sc, s.data(), 60, 7);
  CHECK(settle(rq, &got, 30) == kNcclSuccess && got == 60, "a 100-byte receive of 60 bytes: %d", got);
  CHECK(settle(sq, nullptr, 30) == kNcclSuccess, "send of 60 bytes: %s", last_warning().c_str());
  // A send larger than the receive fails the receive at once (DCCL_TIMEOUT_S is 30 here).
  cap = 10;
  rq = nullptr;
  while (!rq) OK(net->irecv(rc, 1, &p, &cap, &tag, nullptr, nullptr, &rq));
  sq = post_send(sc, s.data(), 100, 7);
  const auto t0 = Clock::now();
  const NcclResult r = settle(rq, &got, 30);
  const double secs = since(t0);
  const std::string w = last_warning();
  printf("truncated receive: result %d after %.3f s: %s\n", r, secs, w.c_str());
  CHECK(r == kNcclRemoteError && secs < 5, "a 100-byte send into a 10-byte receive: result %d after %.1f s", r, secs);
  CHECK(w.find("irecv on dccl-") != std::string::npos && w.find("10-byte receive") != std::string::npos &&
            w.find("0 bytes longer") == std::string::npos && w.find("in progress") == std::string::npos,
        "the message: '%s'", w.c_str());
  (void)sq;  // left outstanding: closeSend cancels it
  // Testing the failed receive again fails again: it never turns into a completed one.
  int done = -1;
  got = -1;
  const NcclResult again = net->test(rq, &done, &got);
  CHECK(again != kNcclSuccess && done == 0, "the failed receive tested again: result %d, done %d, size %d", again,
        done, got);
  // Later calls on the comm fail at once, naming the truncation.
  const auto t1 = Clock::now();
  void* later = nullptr;
  NcclResult lr = net->irecv(rc, 1, &p, &cap, &tag, nullptr, nullptr, &later);
  if (lr == kNcclSuccess && later) lr = settle(later, &got, 30);
  CHECK(lr == kNcclRemoteError && since(t1) < 5 && last_warning().find("truncated") != std::string::npos,
        "a receive after the truncation: result %d after %.1f s: '%s'", lr, since(t1), last_warning().c_str());
  OK(net->close_send(sc));
  OK(net->close_recv(rc));
  OK(net->close_listen(lc));
}

// --- arguments ------------------------------------------------------------------

void args(const Plugin& pl, int dev, const std::string& kind) {
  CHECK(pl.v7->get_properties(dev, nullptr) == kNcclInvalidArgument, "v7 getProperties(null)");
  CHECK(pl.v8->get_properties(dev, nullptr) == kNcclInvalidArgument, "v8 getProperties(null)");
  CHECK(pl.v9->get_properties(dev, nullptr) == kNcclInvalidArgument, "v9 getProperties(null)");
  CHECK(pl.v10->get_properties(dev, nullptr) == kNcclInvalidArgument, "v10 getProperties(null)");
  CHECK(pl.v11->get_properties(dev, nullptr) == kNcclInvalidArgument, "v11 getProperties(null)");
  CHECK(last_warning().find("getProperties") != std::string::npos && last_warning().find("null") != std::string::npos,
        "getProperties(null): '%s'", last_warning().c_str());
  NcclVDeviceProps vp{0, {dev, 0, 0, 0}};
  int vd = -1;
  CHECK(net->make_vdevice(&vd, &vp) == kNcclInvalidArgument, "makeVDevice of 0 devices");
  vp.ndevs = -3;
  CHECK(net->make_vdevice(&vd, &vp) == kNcclInvalidArgument, "makeVDevice of -3 devices");
  vp.ndevs = 1;
  OK(net->make_vdevice(&vd, &vp));
  CHECK(vd == dev, "makeVDevice of one device: %d", vd);

  char handle[kNcclHandleBytes] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  OK(net->listen(dev, handle, &lc));
  // A handle whose connection state is not one this process made (copied, changed)
  // is refused, never followed as a pointer.
  char forged[kNcclHandleBytes];
  memcpy(forged, handle, sizeof(forged));
  const uint64_t bogus = 0x0000dead0000beefull;
  memcpy(forged + offsetof(dccl::plugin::Handle, pending), &bogus, sizeof(bogus));
  void* fc = nullptr;
  CHECK(net->connect(dev, nullptr, forged, &fc, nullptr) == kNcclInvalidArgument && !fc, "connect with a forged handle");
  CHECK(last_warning().find("connect") != std::string::npos &&
            last_warning().find("copied or changed") != std::string::npos,
        "connect with a forged handle: '%s'", last_warning().c_str());
  self_pair(dev, handle, lc, &sc, &rc, 30);
  std::vector<char> buf(1 << 16);
  void* mh = nullptr;
  OK(net->reg_mr(sc, buf.data(), buf.size(), kNcclPtrHost, &mh));
  char garbage[64] = {};
  CHECK(net->dereg_mr(sc, garbage) == kNcclInvalidArgument, "deregMr of a garbage handle");
  CHECK(last_warning().find("deregMr on dccl-") != std::string::npos, "deregMr's message: '%s'", last_warning().c_str());
  CHECK(net->dereg_mr(rc, mh) == kNcclInvalidArgument, "deregMr on another comm than the registration's");
  // A transfer with another comm's registration, or a freed one, is refused (never read).
  void* rmh = nullptr;
  OK(net->reg_mr(rc, buf.data(), buf.size(), kNcclPtrHost, &rmh));
  void* req = nullptr;
  CHECK(net->isend(sc, buf.data(), 64, 1, rmh, nullptr, &req) == kNcclInvalidArgument && !req,
        "isend with the receive comm's registration");
  CHECK(last_warning().find("isend on dccl-") != std::string::npos &&
            last_warning().find("not a live registration of this comm") != std::string::npos,
        "isend's message: '%s'", last_warning().c_str());
  void* p = buf.data();
  size_t cap = 64;
  int tag = 1;
  CHECK(net->irecv(rc, 1, &p, &cap, &tag, &mh, nullptr, &req) == kNcclInvalidArgument && !req,
        "irecv with the send comm's registration");
  void* null_buf = nullptr;
  CHECK(net->irecv(rc, 1, &null_buf, &cap, &tag, nullptr, nullptr, &req) == kNcclInvalidArgument && !req,
        "irecv of 64 bytes into a null buffer");
  CHECK(net->isend(sc, nullptr, 64, 1, nullptr, nullptr, &req) == kNcclInvalidArgument && !req,
        "isend of 64 bytes from a null buffer");
  OK(net->dereg_mr(rc, rmh));
  OK(net->dereg_mr(sc, mh));
  CHECK(net->dereg_mr(sc, mh) == kNcclInvalidArgument, "deregMr of a freed handle");
  CHECK(net->isend(sc, buf.data(), 64, 1, mh, nullptr, &req) == kNcclInvalidArgument && !req,
        "isend with a freed registration");
  if (kind != "sock") {
    // A dma-buf whose offset does not match the buffer's place in its page: the
    // memory layer refuses it; the message names the plugin's call and device.
    dccl::mem::Backend& sim = dccl::mem::sim_backend();
    const size_t n = 1 << 16;
    char* dm = static_cast<char*>(sim.alloc(n));
    dccl::mem::DmaBuf x = sim.export_dmabuf(dm, n);
    void* dmh = nullptr;
    const NcclResult r = net->reg_mr_dmabuf(sc, dm + 100, 1000, kNcclPtrCuda, 0, x.fd, &dmh);
    CHECK(r != kNcclSuccess && last_warning().rfind("NET/dccl regMrDmaBuf on dccl-" + kind, 0) == 0 &&
              last_warning().find("rank ") == std::string::npos,
          "regMrDmaBuf at an inconsistent offset: result %d: '%s'", r, last_warning().c_str());
    sim.free(dm);
  }
  // regMrDmaBuf of an unknown memory type; iflush on a send comm or of 0 or 9 buffers.
  void* tmh = nullptr;
  CHECK(net->reg_mr_dmabuf(sc, buf.data(), 4096, 7, 0, -1, &tmh) == kNcclInvalidArgument && !tmh,
        "regMrDmaBuf of memory type 7");
  CHECK(last_warning().find("unknown memory type 7") != std::string::npos, "regMrDmaBuf's message: '%s'",
        last_warning().c_str());
  void* fq = &tmh;
  int fsize = 64;
  CHECK(net->iflush(sc, 1, &p, &fsize, nullptr, &fq) == kNcclInvalidArgument, "iflush on a send comm");
  CHECK(net->iflush(rc, 0, &p, &fsize, nullptr, &fq) == kNcclInvalidArgument, "iflush of 0 buffers");
  CHECK(net->iflush(rc, 9, &p, &fsize, nullptr, &fq) == kNcclInvalidArgument, "iflush of 9 buffers");
  OK(net->iflush(rc, 1, &p, &fsize, nullptr, &fq));
  CHECK(fq == nullptr, "iflush of host memory: a null (complete) request");
  // Calls after close are refused and never read the closed objects (ASan checks the
  // "never read" part: plugin.* runs under it in CI): a request outstanding at close,
  // the closed comms, the closed listen comm.
  void* pending = nullptr;
  cap = 64;
  OK(net->irecv(rc, 1, &p, &cap, &tag, nullptr, nullptr, &pending));
  OK(net->close_send(sc));
  OK(net->close_recv(rc));
  OK(net->close_listen(lc));
  int done = 0;
  int got = 0;
  CHECK(net->test(pending, &done, &got) == kNcclInvalidArgument, "test of a request whose comm was closed");
  CHECK(net->isend(sc, buf.data(), 64, 1, nullptr, nullptr, &req) == kNcclInvalidArgument, "isend after closeSend");
  CHECK(last_warning().find("isend") != std::string::npos && last_warning().find("closed") != std::string::npos,
        "isend after closeSend's message: '%s'", last_warning().c_str());
  CHECK(net->irecv(rc, 1, &p, &cap, &tag, nullptr, nullptr, &req) == kNcclInvalidArgument, "irecv after closeRecv");
  CHECK(net->reg_mr(sc, buf.data(), buf.size(), kNcclPtrHost, &mh) == kNcclInvalidArgument, "regMr after closeSend");
  CHECK(net->close_send(sc) == kNcclInvalidArgument, "closeSend twice");
  CHECK(net->close_recv(rc) == kNcclInvalidArgument, "closeRecv twice");
  void* rc2 = nullptr;
  CHECK(net->accept(lc, &rc2, nullptr) == kNcclInvalidArgument && !rc2, "accept after closeListen");
  CHECK(net->close_listen(lc) == kNcclInvalidArgument, "closeListen twice");
  // A new pair works after all that (the closed objects may be handed out again).
  sc = rc = nullptr;
  OK(net->listen(dev, handle, &lc));
  self_pair(dev, handle, lc, &sc, &rc, 30);
  OK(net->close_send(sc));
  OK(net->close_recv(rc));
  OK(net->close_listen(lc));
  printf("argument checks passed on %s\n", kind.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc >= 3, "usage: plugin_edges PLUGIN.so settings | stray|truncate|args sock|shm|tcp");
  const std::string scenario = argv[2];
  if (scenario == "settings") {
    settings(argv[1]);
    return 0;
  }
  CHECK(argc == 4, "usage: plugin_edges PLUGIN.so stray|truncate|args sock|shm|tcp");
  const std::string kind = argv[3];
  Plugin pl = load(argv[1]);
  net = pl.v10;
  OK(net->init(log_fn(), nullptr));
  const int dev = find_device(net, kind);
  if (dev < 0) {
    printf("SKIPPED: no %s device here\n", kind.c_str());
    return 77;
  }
  if (scenario == "stray") stray(dev);
  else if (scenario == "truncate") truncate(dev);
  else if (scenario == "args") args(pl, dev, kind);
  else die("unknown scenario " + scenario);
  printf("%s on %s passed\n", scenario.c_str(), kind.c_str());
  return 0;
}
