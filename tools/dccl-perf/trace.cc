// dccl-perf --trace FILE: rank 0 clears FILE.dumps/ of an earlier run's dumps before
// the run; after it every rank dumps its flight recorder there (one file system for
// all ranks, as dccl-run gives one host), then rank 0 runs dccl-trace on them, which
// writes the timeline to FILE.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "dccl-perf/bench.hpp"
#include "dccl/dccl.h"

namespace dcclperf {

namespace {
// dccl-trace beside this program (installed), else in the source tree it was built from.
std::string find_dccl_trace() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string beside = std::string(self).substr(0, std::string(self).rfind('/')) + "/dccl-trace";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  if (access(DCCL_TRACE_SOURCE, X_OK) == 0) return DCCL_TRACE_SOURCE;
  return "dccl-trace";  // from PATH
}
}  // namespace

int prepare_trace(const std::string& file) {
  const std::string dir = file + ".dumps";
  struct stat st;
  if (mkdir(dir.c_str(), 0755) != 0 && (errno != EEXIST || stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    std::fprintf(stderr, "dccl-perf --trace: cannot make the folder %s: %s\n", dir.c_str(),
                 errno == EEXIST ? "a file of that name is in the way" : std::strerror(errno));
    return 1;
  }
  DIR* d = opendir(dir.c_str());
  if (!d) {
    std::fprintf(stderr, "dccl-perf --trace: cannot read %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  int rc = 0;
  // Only the recorder's own files (dccl-rec.<comm>.r<rank>.jsonl): whatever else the
  // folder holds is left alone.
  constexpr char kPrefix[] = "dccl-rec.", kSuffix[] = ".jsonl";
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= sizeof kPrefix + sizeof kSuffix - 2 || name.compare(0, sizeof kPrefix - 1, kPrefix) != 0 ||
        name.compare(name.size() - (sizeof kSuffix - 1), std::string::npos, kSuffix) != 0)
      continue;
    const std::string path = dir + "/" + name;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (unlink(path.c_str()) != 0) {
      std::fprintf(stderr, "dccl-perf --trace: cannot remove the earlier run's dump %s: %s\n", path.c_str(),
                   std::strerror(errno));
      rc = 1;
    }
  }
  closedir(d);
  return rc;
}

int write_trace(Ctx& c, const std::string& file) {
  const std::string dir = file + ".dumps";
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "dccl-perf --trace: cannot make %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  int rc = dcclCommDumpRecorder(c.comm, dir.c_str(), 0) == dcclSuccess ? 0 : 1;
  if (rc) std::fprintf(stderr, "dccl-perf --trace: rank %d: %s\n", c.rank, dcclGetLastError(c.comm));
  // Every rank's dump is written before rank 0 reads them.
  int one = rc;
  if (dcclAllReduce(&one, &one, 1, dcclInt32, dcclMax, c.comm, nullptr) != dcclSuccess || one != 0) return 1;
  if (c.rank != 0) return 0;
  const std::string tool = find_dccl_trace();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(2, 1);  // the report goes beside the table's messages, not into a --json stdout
    execlp(tool.c_str(), tool.c_str(), "--timeline", file.c_str(), dir.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "dccl-perf --trace: cannot run %s: %s\n", tool.c_str(), std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "dccl-perf --trace: %s did not write %s\n", tool.c_str(), file.c_str());
    return 1;
  }
  std::fprintf(stderr, "dccl-perf: timeline in %s (open it in ui.perfetto.dev); dumps in %s\n", file.c_str(),
               dir.c_str());
  return 0;
}

}  // namespace dcclperf
