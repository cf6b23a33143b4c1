// dccl-perf: collective benchmark with nccl-tests' flags and columns.
//   dccl-run -n 4 dccl-perf all_reduce -b 8 -e 64M -f 2
// One process per rank; the communicator comes from the environment
// (dcclCommInitFromEnv). Only rank 0 prints the table; a usage error is printed by
// every rank (dccl-run prefixes each line with its rank), since a launcher may stop
// rank 0 as soon as another rank exits with it.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dccl-perf/args.hpp"
#include "dccl-perf/bench.hpp"
#include "dccl-perf/expect.hpp"
#include "dccl-perf/report.hpp"
#include "dccl/dccl.h"
#include "out_path.hpp"

using namespace dcclperf;

namespace {

// Rank 0 checks the --json file and readies --trace's folder before the sweep, so that
// a path that cannot work fails now, not after it; every rank learns the verdict.
int check_outputs(Ctx& c) {
  int bad = 0;
  const Options& o = c.opt;
  if (c.rank == 0 && o.json && !o.json_file.empty()) {
    if (const std::string why = unwritable(o.json_file); !why.empty()) {
      std::fprintf(stderr, "dccl-perf: cannot write --json %s: %s\n", o.json_file.c_str(), why.c_str());
      bad = 1;
    }
  }
  if (c.rank == 0 && !bad && !o.trace_file.empty()) bad = prepare_trace(o.trace_file);
  PERF_CHECK(c, dcclAllReduce(&bad, &bad, 1, dcclInt32, dcclMax, c.comm, nullptr));
  if (!bad && !o.trace_file.empty()) {
    // Every rank's recorder must be on and able to write there (a trial dump, which
    // the one after the sweep replaces): DCCL_RECORDER=0 fails now, not after it.
    const std::string dir = o.trace_file + ".dumps";
    if (dcclCommDumpRecorder(c.comm, dir.c_str(), 0) != dcclSuccess) {
      std::fprintf(stderr, "dccl-perf --trace: rank %d: %s\n", c.rank, dcclGetLastError(c.comm));
      bad = 1;
    }
    PERF_CHECK(c, dcclAllReduce(&bad, &bad, 1, dcclInt32, dcclMax, c.comm, nullptr));
  }
  return bad;
}

// "Pid 1234 on host" for every rank, gathered over the communicator.
std::vector<std::string> gather_ranks(Ctx& c) {
  constexpr size_t kRec = 64;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string me = "Pid " + std::to_string(getpid()) + " on " + host;
  char mine[kRec] = {};
  std::memcpy(mine, me.data(), std::min(me.size(), kRec - 1));
  std::vector<char> all(kRec * static_cast<size_t>(c.nranks));
  PERF_CHECK(c, dcclAllGather(mine, all.data(), kRec, dcclUint8, c.comm, nullptr));
  std::vector<std::string> lines;
  for (int r = 0; r < c.nranks; ++r) {
    const char* rec = all.data() + kRec * static_cast<size_t>(r);
    lines.emplace_back(rec, strnlen(rec, kRec));
  }
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  Ctx c;
  std::string error;
  switch (parse_args(argc, argv, &c.opt, &error)) {
    case 0: break;
    case 1: return 0;  // --help
    default:
      std::fprintf(stderr, "dccl-perf: %s (see dccl-perf --help)\n", error.c_str());
      return 2;
  }
  const Options& o = c.opt;
  if (!o.peer_direct.empty() && setenv("DCCL_PEER_DIRECT", o.peer_direct.c_str(), 1) != 0) {
    std::fprintf(stderr, "dccl-perf: setenv DCCL_PEER_DIRECT: %s\n", std::strerror(errno));
    return 1;
  }
  c.elem = dtype_bytes(o.type);

  PERF_CHECK(c, dcclCommInitFromEnv(&c.comm));
  PERF_CHECK(c, dcclCommCount(c.comm, &c.nranks));
  PERF_CHECK(c, dcclCommUserRank(c.comm, &c.rank));
  const bool rank0 = c.rank == 0;
  if (coll_has_root(o.coll) && o.root >= c.nranks) {
    if (rank0) std::fprintf(stderr, "dccl-perf: root %d is not a rank (nranks %d)\n", o.root, c.nranks);
    dcclCommDestroy(c.comm);
    return 2;
  }
  if (check_outputs(c) != 0) {
    dcclCommDestroy(c.comm);
    return 1;
  }
  if (!o.blocking) PERF_CHECK(c, dcclStreamCreate(&c.stream));
  alloc_buffers(c);

  // With --json and no file the JSON owns stdout; the table goes to stderr.
  FILE* out = (o.json && o.json_file.empty()) ? stderr : stdout;
  const std::vector<std::string> ranks = gather_ranks(c);
  if (rank0) print_header(out, c, ranks);

  std::vector<Row> rows;
  double wrong_total = 0;
  for (size_t size = o.min_bytes;;) {
    // Sizes that round down to the previous row's elements (-b 0 or 1 with 4-byte
    // floats) are that row again: skipped.
    if (!rows.empty() && layout(o.coll, size, c.elem, c.nranks).bytes == rows.back().bytes) {
      if (!dcclperf::next_size(o, &size)) break;
      continue;
    }
    Row r = run_size(c, size);
    if (rank0) print_row(out, c, r);
    wrong_total += std::max(r.out_of_place.wrong, 0.0) + std::max(r.in_place.wrong, 0.0);
    rows.push_back(r);
    if (!dcclperf::next_size(o, &size)) break;
  }
  if (rank0) print_footer(out, rows, wrong_total);

  // Rank 0 carries the verdict: had every rank exited non-zero, a launcher
  // could stop rank 0 before it printed. Failed calls exit non-zero on the
  // rank that saw them (fail()).
  int rc = rank0 && wrong_total > 0 ? 1 : 0;
  if (rank0 && o.json) {
    FILE* jf = o.json_file.empty() ? stdout : std::fopen(o.json_file.c_str(), "w");
    if (!jf || !write_json(jf, c, rows)) {
      std::fprintf(stderr, "dccl-perf: cannot write %s: %s\n",
                   o.json_file.empty() ? "stdout" : o.json_file.c_str(), std::strerror(errno));
      rc = 1;
    }
    if (jf && jf != stdout) std::fclose(jf);
  }
  if (!o.trace_file.empty() && write_trace(c, o.trace_file) != 0) rc = 1;
  free_buffers(c);
  if (c.stream) PERF_CHECK(c, dcclStreamDestroy(c.stream));
  PERF_CHECK(c, dcclCommDestroy(c.comm));
  return rc;
}
