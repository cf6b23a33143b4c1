// A rank for the connection-flood test (flood.sh): it limits its open files to
// kMaxFiles (a flood must not reach the limit), records its open files and resident
// memory after init, publishes its pid and waits for DIR/go (the flood is on); then
// ITERS times: allreduce on the communicator; dcclCommSplit by rank parity, an
// allreduce on the child, destroy it; a new communicator of every rank from a
// unique id (rank 0 joins a second late), an allreduce on it, destroy it; each
// result compared with the float64 reference. Writes DIR/result.<rank>:
// "ok FD_GROWTH_LIVE FD_GROWTH_AFTER RSS_GROWTH_KIB" (most open files above the
// baseline while a child lives, and after it is destroyed; resident memory above the
// baseline at the end) or "error <text>" / "WRONG <text>".
//   flood_rank DIR ITERS
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"

namespace {
constexpr rlim_t kMaxFiles = 384;
void put(const std::string& path, const std::string& text) {
  FILE* f = fopen((path + ".tmp").c_str(), "w");
  if (!f) return;
  fputs(text.c_str(), f);
  fclose(f);
  rename((path + ".tmp").c_str(), path.c_str());
}
long open_files() {
  long n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}
long rss_kib() {
  long pages = 0, resident = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}
// Allreduce of 256 floats, rank r's element i = (r + 1) * (i % 5 + 1); "" or what was wrong.
std::string checked_allreduce(dcclComm_t c, const char* what) {
  int rank = 0, n = 0;
  dcclCommUserRank(c, &rank);
  dcclCommCount(c, &n);
  std::vector<float> b(256);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 5 + 1));
  if (dcclAllReduce(b.data(), b.data(), b.size(), dcclFloat32, dcclSum, c, nullptr) != dcclSuccess)
    return std::string("error ") + what + ": " + dcclGetLastError(nullptr);
  for (size_t i = 0; i < b.size(); ++i) {
    const double want = static_cast<double>(n * (n + 1) / 2) * static_cast<double>(i % 5 + 1);
    if (static_cast<double>(b[i]) != want)
      return std::string("WRONG ") + what + " element " + std::to_string(i) + ": " + std::to_string(b[i]) +
             " instead of " + std::to_string(want);
  }
  return "";
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: flood_rank DIR ITERS\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int iters = atoi(argv[2]);
  const std::string env_rank = getenv("DCCL_RANK") ? getenv("DCCL_RANK") : "x";
  rlimit rl{kMaxFiles, kMaxFiles};
  setrlimit(RLIMIT_NOFILE, &rl);
  dcclComm_t comm;
  if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
    put(dir + "/result." + env_rank, std::string("error init: ") + dcclGetLastError(nullptr) + "\n");
    return 1;
  }
  int rank = 0, n = 0;
  dcclCommUserRank(comm, &rank);
  dcclCommCount(comm, &n);
  const std::string me = std::to_string(rank);
  const long fd0 = open_files(), rss0 = rss_kib();
  put(dir + "/pid." + me, std::to_string(getpid()) + "\n");
  for (int i = 0; i < 600 && access((dir + "/go").c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  long live = 0, after = 0;
  for (int it = 0; it < iters; ++it) {
    std::string bad = checked_allreduce(comm, "allreduce");
    // A split (each child spans both hosts) ...
    dcclComm_t child = nullptr;
    if (bad.empty() && dcclCommSplit(comm, rank % 2, rank, &child, nullptr) != dcclSuccess)
      bad = std::string("error split: ") + dcclGetLastError(nullptr);
    if (bad.empty()) bad = checked_allreduce(child, "split allreduce");
    live = std::max(live, open_files() - fd0);
    if (child) dcclCommDestroy(child);
    // ... and a new communicator of all ranks from a unique id, which rank 0 joins a
    // second late: the others' new communicators wait for it while the flood goes on.
    dcclComm_t fresh = nullptr;
    dcclUniqueId id{};
    if (bad.empty() && rank == 0 && dcclGetUniqueId(&id) != dcclSuccess)
      bad = std::string("error unique id: ") + dcclGetLastError(nullptr);
    if (bad.empty() && dcclBroadcast(&id, &id, sizeof(id), dcclUint8, 0, comm, nullptr) != dcclSuccess)
      bad = std::string("error broadcast: ") + dcclGetLastError(nullptr);
    if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (bad.empty() && dcclCommInitRank(&fresh, n, id, rank) != dcclSuccess)
      bad = std::string("error init: ") + dcclGetLastError(nullptr);
    if (bad.empty()) bad = checked_allreduce(fresh, "new communicator's allreduce");
    live = std::max(live, open_files() - fd0);
    if (fresh) dcclCommDestroy(fresh);
    after = std::max(after, open_files() - fd0);
    if (!bad.empty()) {
      put(dir + "/result." + me, bad + " (iteration " + std::to_string(it) + ")\n");
      dcclCommAbort(comm);
      return 1;
    }
  }
  put(dir + "/result." + me, "ok " + std::to_string(live) + " " + std::to_string(after) + " " +
                                 std::to_string(rss_kib() - rss0) + "\n");
  dcclCommDestroy(comm);
  return 0;
}
