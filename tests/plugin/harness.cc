#include "harness.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <cstdarg>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace harness {

namespace {

std::vector<std::string> g_warnings;

void logger(int level, unsigned long, const char* file, int line, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (level == kNcclLogWarn) g_warnings.push_back(buf);
  if (level == kNcclLogWarn || getenv("PLUGIN_LOG"))
    fprintf(stderr, "rank %d: plugin %s: %s\n", rank(), level == kNcclLogWarn ? "WARN" : "INFO", buf);
}

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string oob_dir() {
  static std::string dir = [] {
    // One folder per job: dccl-run gives every rank the job's DCCL_ID.
    const char* d = getenv("PLUGIN_OOB_DIR");
    const char* id = getenv("DCCL_ID");
    char job[32];
    snprintf(job, sizeof(job), "%zx", id ? std::hash<std::string>{}(id) : static_cast<size_t>(getppid()));
    std::string s = d ? d : "/tmp/dccl-plugin-oob-" + std::string(job);
    mkdir(s.c_str(), 0700);
    return s;
  }();
  return dir;
}

int env_int(const char* name, int def) {
  const char* v = getenv(name);
  return v ? atoi(v) : def;
}

}  // namespace

void die(const std::string& what) {
  fprintf(stderr, "rank %d: FAIL: %s\n", rank(), what.c_str());
  fflush(stderr);
  _exit(1);
}

NcclLogFn log_fn() { return logger; }
std::string last_warning() { return g_warnings.empty() ? "" : g_warnings.back(); }
const std::vector<std::string>& warnings() { return g_warnings; }

int rank() { return env_int("DCCL_RANK", 0); }
int world() { return env_int("DCCL_WORLD_SIZE", 1); }

Plugin load(const std::string& path) {
  Plugin p;
  p.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  CHECK(p.lib, "dlopen %s: %s", path.c_str(), dlerror());
  p.v11 = static_cast<NcclNetV11*>(dlsym(p.lib, "ncclNetPlugin_v11"));
  p.v10 = static_cast<NcclNetV10*>(dlsym(p.lib, "ncclNetPlugin_v10"));
  p.v9 = static_cast<NcclNetV9*>(dlsym(p.lib, "ncclNetPlugin_v9"));
  p.v8 = static_cast<NcclNetV8*>(dlsym(p.lib, "ncclNetPlugin_v8"));
  p.v7 = static_cast<NcclNetV7*>(dlsym(p.lib, "ncclNetPlugin_v7"));
  CHECK(p.v11 && p.v10 && p.v9 && p.v8 && p.v7, "a table is missing (v11 %p v10 %p v9 %p v8 %p v7 %p)", (void*)p.v11,
        (void*)p.v10, (void*)p.v9, (void*)p.v8, (void*)p.v7);
  CHECK(!dlsym(p.lib, "dcclCommInitRank"), "the plugin exports DirectCCL's API");
  return p;
}

int find_device(NcclNetV10* net, const std::string& kind) {
  int n = 0;
  OK(net->devices(&n));
  for (int d = 0; d < n; ++d) {
    NcclPropsV9 props{};
    OK(net->get_properties(d, &props));
    if (std::string(props.name).rfind("dccl-" + kind, 0) == 0) return d;
  }
  return -1;
}

void publish(const std::string& name, const void* bytes, size_t n) {
  const std::string path = oob_dir() + "/" + name, tmp = path + ".tmp";
  std::ofstream f(tmp, std::ios::binary);
  f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
  f.close();
  CHECK(rename(tmp.c_str(), path.c_str()) == 0, "publishing %s", path.c_str());
}

void fetch(const std::string& name, void* bytes, size_t n) {
  const std::string path = oob_dir() + "/" + name;
  const double until = now_s() + 60;
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f && f.read(static_cast<char*>(bytes), static_cast<std::streamsize>(n))) return;
    CHECK(now_s() < until, "no %s from the other rank within 60 s", path.c_str());
    usleep(2000);
  }
}

void cleanup(bool wait_for_all) {
  if (wait_for_all) barrier("cleanup");
  if (rank() != 0) return;
  usleep(200000);  // the others have read the last barrier's files
  const std::string cmd = "rm -rf '" + oob_dir() + "'";
  if (system(cmd.c_str()) != 0) fprintf(stderr, "harness: could not remove %s\n", oob_dir().c_str());
}

void barrier(const std::string& name) {
  const char one = 1;
  publish(name + "." + std::to_string(rank()), &one, 1);
  char got = 0;
  for (int r = 0; r < world(); ++r) fetch(name + "." + std::to_string(r), &got, 1);
}

namespace {
// Publishes this rank's listen handle, fetches `to`'s, and polls connect/accept as
// NCCL's proxy does until both comms exist.
using ListenFn = std::function<NcclResult(void* handle, void** listen_comm)>;
using ConnectFn = std::function<NcclResult(void* handle, void** send_comm, NcclNetDeviceHandle** dh)>;
using AcceptFn = std::function<NcclResult(void* listen_comm, void** recv_comm, NcclNetDeviceHandle** dh)>;
Pair connect_with(const ListenFn& listen, const ConnectFn& connect, const AcceptFn& accept, int to,
                  const std::string& tag) {
  Pair p;
  char handle[kNcclHandleBytes] = {};
  OK(listen(handle, &p.listen));
  publish(tag + ".handle." + std::to_string(rank()), handle, sizeof(handle));
  char peer[kNcclHandleBytes] = {};
  fetch(tag + ".handle." + std::to_string(to), peer, sizeof(peer));
  NcclNetDeviceHandle* dh = nullptr;
  const double until = now_s() + 60;
  int polls = 0;
  while (!p.send || !p.recv) {
    if (!p.send) OK(connect(peer, &p.send, &dh));
    if (!p.recv) OK(accept(p.listen, &p.recv, &dh));
    CHECK(now_s() < until, "connect/accept not done within 60 s (%d polls; send %p recv %p)", polls, p.send, p.recv);
    ++polls;
    usleep(100);
  }
  return p;
}
}  // namespace

Pair connect_pair(NcclNetV10* net, int dev, int to, int from, const std::string& tag) {
  (void)from;
  return connect_with([&](void* h, void** lc) { return net->listen(dev, h, lc); },
                      [&](void* h, void** sc, NcclNetDeviceHandle** dh) { return net->connect(dev, nullptr, h, sc, dh); },
                      net->accept, to, tag);
}

Pair connect_pair(NcclNetV11* net, void* ctx, int dev, int to, const std::string& tag) {
  return connect_with([&](void* h, void** lc) { return net->listen(ctx, dev, h, lc); },
                      [&](void* h, void** sc, NcclNetDeviceHandle** dh) { return net->connect(ctx, dev, h, sc, dh); },
                      net->accept, to, tag);
}

void close_pair(NcclNetV10* net, Pair& p) {
  OK(net->close_send(p.send));
  OK(net->close_recv(p.recv));
  OK(net->close_listen(p.listen));
  p = Pair{};
}

void wait_req(NcclNetV10* net, void* req, int* sizes) {
  CHECK(req, "null request");
  const double until = now_s() + 60;
  int done = 0;
  while (!done) {
    OK(net->test(req, &done, sizes));
    CHECK(now_s() < until, "request not complete within 60 s");
  }
}

void fill(void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<unsigned char>(x >> 24);
  }
}

bool check(const void* p, size_t n, uint32_t seed) {
  if (n == 0) return true;  // (memcmp must not see the empty vector's null data)
  std::vector<unsigned char> want(n);
  fill(want.data(), n, seed);
  return memcmp(p, want.data(), n) == 0;
}

}  // namespace harness
