// The measurement loop shared by the peer benchmarks (Gloo, Open MPI, MPICH).
//
// A peer benchmark is a Backend: it knows its library's calls and how to
// combine two numbers over ranks. Everything else is dccl-perf's, so that the
// numbers compare like with like:
//  - the flags (-b -e -f -i -n -w -c -d -o -r --json) are parsed by dccl-perf's
//    own parser (tools/dccl-perf/args.cc), plus --algo for the peer's algorithm;
//  - sizes, counts, buffer layout (out of place and nccl-tests' in place),
//    bus-bandwidth factors, input pattern and expected results come from
//    tools/dccl-perf/expect.cc (unit-tested there against a brute-force model);
//  - the timing is dccl-perf's: fill, warm-up calls, then `iters` calls back to
//    back timed as one interval, time per call = interval / iters, and the
//    slowest rank's time is reported; then, untimed, a fresh fill, one more call,
//    and the received data is checked element by element (#wrong, summed over
//    ranks).
// Only rank 0 prints. The table has dccl-perf's columns.
#pragma once
#include <cstddef>
#include <string>

#include "dccl-perf/args.hpp"
#include "dccl-perf/expect.hpp"

namespace peerbench {

using dcclperf::Case;
using dcclperf::Coll;

// Where one call reads and writes (dccl-perf's pointers(): in place, all_gather
// sends from its block of the receive buffer, reduce_scatter receives into its
// block of the send buffer, every other collective uses the receive buffer).
struct Ptrs {
  void* send = nullptr;
  void* recv = nullptr;
  void* base = nullptr;  // start of the buffer an in-place call works on
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // "Open MPI v4.1.4", "MPICH 4.0.2", "Gloo 0.5.0".
  virtual std::string library() const = 0;
  // What carried the bytes, as far as the library can tell (its settings).
  virtual std::string transport() const = 0;
  // The algorithm run (--algo, or "default" when the library chooses).
  virtual std::string algo() const = 0;
  // Empty when the combination is supported, else why not.
  virtual std::string unsupported(const Case& k) const = 0;
  // One call of the collective on these pointers.
  virtual void launch(const Case& k, const Ptrs& p, bool in_place) = 0;
  // Where this rank's result is after an in-place call, when the library's
  // in-place convention differs from nccl-tests' (MPI_Reduce_scatter_block
  // leaves it at the start of the buffer). Default: p.recv.
  virtual const void* in_place_result(const Case& k, const Ptrs& p) const { return p.recv; }
  // Elementwise over ranks: v[0], v[1] := max; v[2], v[3] := sum.
  virtual void combine(double v[4]) = 0;
  virtual void barrier() = 0;
};

// Parses argv (dccl-perf's flags plus `--algo NAME`). Returns 0 to run, 1 after
// --help, 2 on a usage error (printed by rank 0 only; rank unknown: printed).
int parse(int argc, char** argv, const char* prog, const char* algos, dcclperf::Options* opt,
          std::string* algo);

// parse() for a library that chooses its algorithm itself: --algo other than
// "default" is a usage error that says so (`chooses`: who chooses, and how).
int parse_fixed_algo(int argc, char** argv, const char* prog, const char* chooses, dcclperf::Options* opt);

// Runs the size sweep on `b` and prints/writes the results. Returns the exit code.
int run(Backend& b, const dcclperf::Options& opt, const char* prog);

}  // namespace peerbench
