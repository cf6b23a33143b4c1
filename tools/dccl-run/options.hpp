// dccl-run's command line.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dcclrun {

struct RunOptions {
  int nranks = 0;
  std::vector<std::string> env;  // K=V, applied after the DCCL_* variables
  double timeout_s = 0;          // 0: none
  std::vector<std::string> argv;  // program and its arguments
  // Emulated hosts (--hosts): ranks per host, in rank order; empty = no emulation,
  // every rank on this host as it is.
  std::vector<int> ranks_per_host;
  int rails = 1;           // --rails: interfaces per emulated host
  uint64_t rate_bps = 0;   // --rate in bits per second; 0 = links not shaped
  int mtu = 0;             // --mtu of every emulated interface; 0 = the kernel's (1500)
  bool keep_net = false;   // --keep-net: leave the namespaces for inspection
  bool fabric = false;     // --fabric: a leaf-spine network instead of one bridge per rail
  int leaves = 0;          // --leaves: 0 = one per host
  int spines = 2;          // --spines
  bool interleave = false; // --interleave: host h under leaf h % leaves (else block-wise)
  uint64_t flow_bps = 0;   // --flow-rate: per-TCP-flow cap; 0 = none
  bool no_default_route = false;  // --no-default-route: hosts reach only their subnets
  bool keep_going = false; // --keep-going: a failed rank does not end the others
  bool no_prefix = false;  // --no-prefix: ranks' lines as they wrote them (still whole lines)
  // --bind-to: "core" (or "", the default) binds rank r to the r-th CPU dccl-run may
  // use, consecutive ranks sharing one when they outnumber the CPUs; "none" leaves
  // placement to the scheduler.
  std::string bind_to;
};

// 0: run; 1: help printed; 2: usage error (message in *error).
int parse_run_args(int argc, char** argv, RunOptions* opt, std::string* error);
void print_run_usage(FILE* f);
// --hosts: "H" (N ranks block-wise over H hosts, the first N % H hosts one more)
// or "A+B+..." (ranks per host). nranks 0 = not given. Empty on error, *why says why.
std::vector<int> place_ranks(const std::string& spec, int nranks, std::string* why);
// --rate: a number with a unit, bit/kbit/mbit/gbit/tbit (bits per second) or
// bps/kbps/mbps/gbps/tbps (bytes per second, as tc reads them). 0 on error.
uint64_t parse_rate(const std::string& text, std::string* why);
// The executable `prog` names: itself when it contains '/', else the first
// match in `path` (a PATH value). Empty when there is none; *why says why.
std::string resolve_program(const std::string& prog, const std::string& path, std::string* why);

}  // namespace dcclrun
