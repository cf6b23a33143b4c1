// dccl-run's command line.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace dcclrun {

struct RunOptions {
  int nranks = 0;
  std::vector<std::string> env;  // K=V, applied after the DCCL_* variables
  double timeout_s = 0;          // 0: none
  std::vector<std::string> argv;  // program and its arguments
};

// 0: run; 1: help printed; 2: usage error (message in *error).
int parse_run_args(int argc, char** argv, RunOptions* opt, std::string* error);
void print_run_usage(FILE* f);
// The executable `prog` names: itself when it contains '/', else the first
// match in `path` (a PATH value). Empty when there is none; *why says why.
std::string resolve_program(const std::string& prog, const std::string& path, std::string* why);

}  // namespace dcclrun
