// Signal behaviour of a process that links DirectCCL (run under dccl-run -n 2):
//   signal_check handlers  after init, no handler of SIGSEGV, SIGBUS, SIGILL,
//                          SIGABRT, SIGTERM or SIGINT lives in a psm library
//                          (Debian's libfabric links libinfinipath, whose
//                          constructor takes them); exit 0 when none does
//   signal_check segv      after init, rank 1 dereferences a null pointer: the
//                          launcher must see SIGSEGV, not exit(1)
//   signal_check term      after init, rank 1 sends itself SIGTERM: it must die of it
#include <dlfcn.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "dccl/dccl.h"

namespace {

std::string owner(int sig) {
  struct sigaction sa {};
  sigaction(sig, nullptr, &sa);
  void* code = (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(sa.sa_sigaction)
                                          : reinterpret_cast<void*>(sa.sa_handler);
  if (code == reinterpret_cast<void*>(SIG_DFL)) return "default";
  if (code == reinterpret_cast<void*>(SIG_IGN)) return "ignored";
  Dl_info di{};
  return dladdr(code, &di) && di.dli_fname ? di.dli_fname : "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "handlers" && mode != "segv" && mode != "term") {
    std::fprintf(stderr, "usage: signal_check handlers|segv|term\n");
    return 2;
  }
  dcclComm_t comm = nullptr;
  if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
    std::fprintf(stderr, "init failed: %s\n", dcclGetLastError(nullptr));
    return 3;
  }
  int rank = -1;
  dcclCommUserRank(comm, &rank);
  if (mode == "handlers") {
    int bad = 0;
    const struct {
      int sig;
      const char* name;
    } sigs[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGILL, "SIGILL"},
                {SIGABRT, "SIGABRT"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}};
    for (const auto& s : sigs) {
      const std::string o = owner(s.sig);
      std::printf("rank %d: %s -> %s\n", rank, s.name, o.c_str());
      if (o.find("infinipath") != std::string::npos || o.find("libpsm") != std::string::npos) ++bad;
    }
    dcclCommDestroy(comm);
    return bad ? 1 : 0;
  }
  if (rank == 1) {
    std::fflush(stdout);
    if (mode == "segv") {
      volatile int* p = nullptr;
      *p = 1;
    } else {
      raise(SIGTERM);
    }
    std::fprintf(stderr, "rank 1 survived its own %s\n", mode.c_str());
    return 4;
  }
  // Rank 0 waits for rank 1 to vanish; dccl-run ends it when rank 1 dies.
  float x = 1;
  dcclAllReduce(&x, &x, 1, dcclFloat32, dcclSum, comm, nullptr);
  dcclCommDestroy(comm);
  return 0;
}
