// dccl-run's command line; see options.hpp.
#include "dccl-run/options.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace dcclrun {
namespace {

bool executable_file(const std::string& p, std::string* why) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) {
    *why = "no such file";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "not a regular file";
    return false;
  }
  if (::access(p.c_str(), X_OK) != 0) {
    *why = "not executable";
    return false;
  }
  return true;
}

}  // namespace

void print_run_usage(FILE* f) {
  std::fprintf(f,
      "usage: dccl-run -n N [--env K=V]... [--timeout SEC] [--] prog [args...]\n"
      "  Starts N local ranks of prog with DCCL_RANK, DCCL_WORLD_SIZE, DCCL_LOCAL_RANK,\n"
      "  DCCL_LOCAL_SIZE and DCCL_ID (the rendezvous store, hosted by dccl-run) set,\n"
      "  and prefixes each line they print with \"[rank] \".\n"
      "  -n, --np N        number of ranks (>= 1)\n"
      "  --env K=V         set K=V in every rank's environment (repeatable)\n"
      "  --timeout SEC     kill the job after SEC seconds and exit with 124\n"
      "Exit status: 0, the first failing rank's status (128+signal when killed),\n"
      "124 on timeout, 2 on a usage error.\n");
}

int parse_run_args(int argc, char** argv, RunOptions* opt, std::string* error) {
  int a = 1;
  // Matches "name VALUE" and "name=VALUE": 0 no match, 1 value in *out, 2 value missing.
  auto value = [&](const std::string& arg, const char* name, std::string* out) {
    const size_t len = std::strlen(name);
    if (arg.size() > len && arg.compare(0, len, name) == 0 && arg[len] == '=') {
      out->assign(arg, len + 1, std::string::npos);
      return 1;
    }
    if (arg != name) return 0;
    if (a + 1 >= argc) {
      error->assign(name).append(" needs a value");
      return 2;
    }
    out->assign(argv[++a]);
    return 1;
  };
  for (; a < argc; ++a) {
    const std::string arg = argv[a];
    std::string v;
    if (arg == "--") {
      ++a;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      print_run_usage(stdout);
      return 1;
    }
    int m = 0;
    if (arg.size() > 2 && arg.compare(0, 2, "-n") == 0 && arg[2] >= '0' && arg[2] <= '9') {
      v = arg.substr(2);  // -n4
      m = 1;
    } else if (!(m = value(arg, "-n", &v)) && !(m = value(arg, "-np", &v))) {
      m = value(arg, "--np", &v);
    }
    if (m) {
      if (m == 2) return 2;
      char* end = nullptr;
      errno = 0;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || errno || n < 1 || n > 65536) {
        *error = "-n needs a number of ranks >= 1, got '" + v + "'";
        return 2;
      }
      opt->nranks = static_cast<int>(n);
    } else if ((m = value(arg, "--env", &v)) || (m = value(arg, "-x", &v))) {
      if (m == 2) return 2;
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        *error = "--env needs K=V, got '" + v + "'";
        return 2;
      }
      opt->env.push_back(v);
    } else if ((m = value(arg, "--timeout", &v))) {
      if (m == 2) return 2;
      char* end = nullptr;
      double t = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(t) || t <= 0) {
        *error = "--timeout needs a number of seconds > 0, got '" + v + "'";
        return 2;
      }
      opt->timeout_s = t;
    } else if (arg.size() > 1 && arg[0] == '-') {
      *error = "unknown option '" + arg + "'";
      return 2;
    } else {
      break;  // the program
    }
  }
  for (; a < argc; ++a) opt->argv.emplace_back(argv[a]);
  if (opt->nranks < 1) {
    *error = "the number of ranks is missing (-n N)";
    return 2;
  }
  if (opt->argv.empty()) {
    *error = "no program to run";
    return 2;
  }
  return 0;
}

std::string resolve_program(const std::string& prog, const std::string& path, std::string* why) {
  if (prog.find('/') != std::string::npos) return executable_file(prog, why) ? prog : "";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + prog;
    std::string ignored;
    if (executable_file(cand, &ignored)) return cand;
    start = end + 1;
  }
  *why = "not found in PATH";
  return "";
}

}  // namespace dcclrun
