// dccl-perf's command line: nccl-tests' flags plus --json, --mem, --peer-direct.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

#include "dccl-perf/expect.hpp"

namespace dcclperf {

struct Options {
  Coll coll = Coll::AllReduce;
  size_t min_bytes = 8;
  size_t max_bytes = size_t{64} << 20;
  size_t step_bytes = size_t{1} << 20;  // used when step_factor <= 1
  size_t step_factor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  dcclDataType_t type = dcclFloat32;
  dcclRedOp_t op = dcclSum;
  int root = 0;
  bool blocking = false;    // -z: NULL stream, every call completes before it returns
  bool json = false;
  std::string json_file;    // empty: JSON array on stdout, the table on stderr
  dcclMemType_t mem = dcclMemHost;
  std::string peer_direct;  // "", "0", "1" or "auto"
  std::string trace_file;   // --trace: the timeline's file ("": none)
  int average = 3;          // -a: the time reported: 0 rank 0's, 1 the mean, 2 the fastest, 3 the slowest rank's
  int agg = 1;              // -m: operations launched back to back per timed iteration
};

// Parses argv. Returns 0 to run, 1 when help was printed, 2 on a usage error
// (with the message in *error).
int parse_args(int argc, char** argv, Options* opt, std::string* error);
void print_usage(FILE* f);
// The size after *size in the sweep from min_bytes to max_bytes, as nccl-tests
// steps: multiply by step_factor when it is > 1 (0 goes to 1), else add
// step_bytes. False when *size was the last one.
bool next_size(const Options& o, size_t* size);

// "8", "64K", "32M", "1G" (powers of 1024; a trailing B is allowed).
bool parse_size(const std::string& s, size_t* out);
const char* mem_label(dcclMemType_t m);

}  // namespace dcclperf
