// dccl-run's command line; see options.hpp.
#include "dccl-run/options.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "dccl-run/fabric.hpp"

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

// Addresses are 198.18.<rail>.<host + 1>: both fit in one octet of 198.18.0.0/15.
constexpr int kMaxHosts = 250;
constexpr int kMaxRails = 16;
constexpr int kMaxRanks = 65536;  // -n, and --hosts A+B+... in all

bool parse_count(const std::string& s, long lo, long hi, long* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 6) return false;
  *out = std::strtol(s.c_str(), nullptr, 10);
  return *out >= lo && *out <= hi;
}

// --fabric's knobs, after --hosts and --rails.
bool parse_fabric(const std::string& spines, const std::string& leaves, const std::string& flow_rate,
                  RunOptions* opt, std::string* error) {
  const long hosts = static_cast<long>(opt->ranks_per_host.size());
  long n = 0;
  if (opt->rails != 1) {
    *error = "--fabric has one rail per host (--rails " + std::to_string(opt->rails) + " given)";
    return false;
  }
  if (!spines.empty()) {
    if (!parse_count(spines, 1, kMaxSpines, &n)) {
      *error = "--spines needs a number from 1 to " + std::to_string(kMaxSpines) + ", got '" + spines + "'";
      return false;
    }
    opt->spines = static_cast<int>(n);
  }
  if (!leaves.empty()) {
    const long most = std::min<long>(hosts, kMaxLeaves);
    if (!parse_count(leaves, 1, most, &n)) {
      *error = "--leaves needs a number from 1 to " + std::to_string(most) + " (each leaf holds a host; at most " +
               std::to_string(kMaxLeaves) + "), got '" + leaves + "'";
      return false;
    }
    opt->leaves = static_cast<int>(n);
  } else if (hosts > kMaxLeaves) {
    *error = "--fabric puts each host under a leaf of its own, at most " + std::to_string(kMaxLeaves) +
             " leaves: give --leaves for " + std::to_string(hosts) + " hosts";
    return false;
  }
  std::string why;
  if (!flow_rate.empty() && (opt->flow_bps = parse_rate(flow_rate, &why)) == 0) {
    *error = "--flow-rate " + flow_rate + ": " + why;
    return false;
  }
  return true;
}

}  // namespace

std::vector<int> place_ranks(const std::string& spec, int nranks, std::string* why) {
  std::vector<int> per;
  if (spec.find('+') == std::string::npos) {
    long h = 0;
    if (!parse_count(spec, 1, kMaxHosts, &h)) {
      *why = "needs a number of hosts from 1 to " + std::to_string(kMaxHosts) + " or ranks per host (3+1)";
      return {};
    }
    if (nranks == 0) {
      *why = "needs -n N (or ranks per host, e.g. 2+2)";
      return {};
    }
    if (nranks < h) {
      *why = "every host runs at least one rank, but -n is " + std::to_string(nranks);
      return {};
    }
    for (long i = 0; i < h; ++i) per.push_back(nranks / static_cast<int>(h) + (i < nranks % h ? 1 : 0));
    return per;
  }
  long total = 0;
  size_t start = 0;
  for (;;) {
    const size_t plus = spec.find('+', start);
    const std::string part = spec.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    long k = 0;
    if (!parse_count(part, 1, kMaxRanks, &k)) {
      *why = "'" + part + "' is not a number of ranks >= 1";
      return {};
    }
    per.push_back(static_cast<int>(k));
    total += k;
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  if (per.size() > static_cast<size_t>(kMaxHosts)) {
    *why = "more than " + std::to_string(kMaxHosts) + " hosts";
    return {};
  }
  if (total > kMaxRanks) {
    *why = "more than " + std::to_string(kMaxRanks) + " ranks";
    return {};
  }
  if (nranks != 0 && nranks != total) {
    *why = "places " + std::to_string(total) + " ranks but -n is " + std::to_string(nranks);
    return {};
  }
  return per;
}

uint64_t parse_rate(const std::string& text, std::string* why) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mult = 0;
  const char* units[] = {"bit", "kbit", "mbit", "gbit", "tbit", "bps", "kbps", "mbps", "gbps", "tbps"};
  for (int i = 0; i < 10; ++i)
    if (unit == units[i]) mult = std::pow(1000.0, i % 5) * (i < 5 ? 1 : 8);
  if (end == text.c_str() || !std::isfinite(v) || v <= 0 || mult == 0) {
    *why = "needs a number with a unit: bit, kbit, mbit, gbit, tbit (bits/s) or bps, kbps, mbps, gbps, "
           "tbps (bytes/s), e.g. 1gbit";
    return 0;
  }
  const double bps = v * mult;
  if (bps < 1e5 || bps > 1e13) {
    *why = "must be between 100kbit and 10tbit";
    return 0;
  }
  return static_cast<uint64_t>(bps);
}

void print_run_usage(FILE* f) {
  std::fprintf(f,
      "usage: dccl-run -n N [--env K=V | -x K=V | -x NAME]... [--timeout SEC] [--keep-going] [--no-prefix]\n"
      "                [--bind-to core|none] [--] prog [args...]\n"
      "       dccl-run --hosts H|A+B+... [-n N] [--rails R] [--rate RATE] [--mtu BYTES] [--no-default-route]\n"
      "                [--keep-net] [--fabric [--spines S] [--leaves L] [--interleave] [--flow-rate RATE]] ...\n"
      "  Starts N local ranks of prog with DCCL_RANK, DCCL_WORLD_SIZE, DCCL_LOCAL_RANK,\n"
      "  DCCL_LOCAL_SIZE and DCCL_ID (the rendezvous store, hosted by dccl-run) set,\n"
      "  and prefixes each line they print with \"[rank] \". The store takes DCCL_ADDR\n"
      "  (with --hosts: 198.18.0.254:PORT) and DCCL_SECRET when the job is given them\n"
      "  (for dccl-info --job); else a free port and a random secret.\n"
      "  -n, -np, --np N   number of ranks (1 to %d)\n"
      "  --env K=V, -x K=V set K=V in every rank's environment (repeatable; later wins;\n"
      "                    not DCCL_RANK or DCCL_WORLD_SIZE: -n sets them)\n"
      "  -x NAME           pass NAME with its value in dccl-run's environment (as mpirun -x)\n"
      "  --timeout SEC     kill the job after SEC seconds and exit with 124\n"
      "  --hosts H         emulate H hosts (root, iproute2): one network and UTS namespace\n"
      "                    each, N ranks block-wise (the first N %% H hosts one more)\n"
      "  --hosts A+B+...   A ranks on host 0, B on host 1, ...; -n defaults to the sum\n"
      "  --rails R         R interfaces per emulated host, one bridge per rail (default 1)\n"
      "  --rate RATE       shape every emulated link with tbf, both ways (e.g. 1gbit, 100mbit)\n"
      "  --mtu BYTES       MTU of every emulated interface, 576..65535 (default 1500;\n"
      "                    cloud instance networks use jumbo frames, e.g. 9001)\n"
      "  --no-default-route  give the emulated hosts no default route (a data network\n"
      "                    apart from the management one): only their subnets are reachable\n"
      "  --fabric          a leaf-spine fabric instead of one bridge per rail: hosts block-wise\n"
      "                    under the leaves, equal-cost multipath over the spines between\n"
      "                    leaves, hashed on addresses and ports (one rail only; --rate\n"
      "                    shapes every link, host-leaf and leaf-spine)\n"
      "  --spines S        spines of the fabric, 1..16 (default 2)\n"
      "  --leaves L        leaves of the fabric, 1..min(hosts, 64) (default: one per host)\n"
      "  --interleave      hosts round-robin over the leaves (host h under leaf h %% L), not\n"
      "                    block-wise: ring neighbours sit under different leaves, so a\n"
      "                    ring's flows leave every leaf at once and may share a spine\n"
      "  --flow-rate RATE  cap every TCP flow a host sends at RATE (htb class per port hash\n"
      "                    bucket on the host's NIC), as cloud networks cap one flow\n"
      "  --keep-net        leave the emulated network in place after the job (debugging)\n"
      "  --no-prefix       print the ranks' lines as they wrote them (whole lines, no \"[rank] \";\n"
      "                    e.g. for dccl-perf --json on stdout)\n"
      "  --bind-to core|none  core (default): rank r runs on the r-th CPU dccl-run may use\n"
      "                    (its threads and children too); with more ranks than CPUs,\n"
      "                    consecutive ranks share one (rank r on CPU r*CPUs/N); none:\n"
      "                    wherever the scheduler puts it (ranks that start workers)\n"
      "  --keep-going      when a rank fails, let the others run to their own end (or\n"
      "                    --timeout) instead of ending them (fault tests)\n"
      "Exit status: 0, the first failing rank's status (128+signal when killed),\n"
      "124 on timeout, 2 on a usage error.\n",
      kMaxRanks);
}

int parse_run_args(int argc, char** argv, RunOptions* opt, std::string* error) {
  int a = 1;
  // Matches "name VALUE" and "name=VALUE": 0 no match, 1 value in *out, 2 value missing.
  auto value = [&](const std::string& arg, const char* name, std::string* out) {
    const size_t len = std::strlen(name);
    if (arg.size() > len && arg.compare(0, len, name) == 0 && arg[len] == '=') {
      out->assign(arg, len + 1, std::string::npos);
    } else if (arg != name) {
      return 0;
    } else if (a + 1 < argc) {
      out->assign(argv[++a]);
    }
    if (out->empty()) {  // missing, "--hosts=" or "--hosts ''": never a value (not ignored)
      error->assign(name).append(" needs a value");
      return 2;
    }
    return 1;
  };
  std::string hosts, rails, rate, mtu, spines, leaves, flow_rate;
  bool fabric_flag = false;  // --spines, --leaves or --flow-rate given
  bool emu_flag = false;  // --rails, --rate, --mtu or --keep-net given
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
      if (v.empty() || *end || errno || n < 1 || n > kMaxRanks) {
        *error = "-n needs a number of ranks from 1 to " + std::to_string(kMaxRanks) + ", got '" + v + "'";
        return 2;
      }
      opt->nranks = static_cast<int>(n);
    } else if ((m = value(arg, "--env", &v)) || (m = value(arg, "-x", &v))) {
      if (m == 2) return 2;
      const bool x = arg.compare(0, 2, "-x") == 0;
      const size_t eq = v.find('=');
      if (x && eq == std::string::npos && !v.empty()) {  // -x NAME: NAME's value here, as mpirun does
        const char* here = std::getenv(v.c_str());
        if (!here) {
          *error = "-x " + v + ": " + v + " is not set in dccl-run's environment (use -x " + v + "=VALUE)";
          return 2;
        }
        v += "=";
        v += here;
      } else if (eq == std::string::npos || eq == 0) {
        *error = std::string(x ? "-x" : "--env") + " needs K=V" + (x ? " or NAME" : "") + ", got '" + v + "'";
        return 2;
      }
      // The rank and size are dccl-run's per rank: another size (or one rank for all) would
      // leave every rank waiting until DCCL_TIMEOUT_S for ranks that never start.
      for (const char* own : {"DCCL_RANK", "DCCL_WORLD_SIZE"})
        if (v.compare(0, v.find('='), own) == 0) {
          *error = std::string(x ? "-x " : "--env ") + v + ": dccl-run sets " + own +
                   " for each rank (DCCL_RANK 0..N-1, DCCL_WORLD_SIZE N of -n N); choose the size with -n";
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
    } else if ((m = value(arg, "--hosts", &v))) {
      if (m == 2) return 2;
      hosts = v;
    } else if ((m = value(arg, "--rails", &v))) {
      if (m == 2) return 2;
      rails = v;
      emu_flag = true;
    } else if ((m = value(arg, "--rate", &v))) {
      if (m == 2) return 2;
      rate = v;
      emu_flag = true;
    } else if ((m = value(arg, "--mtu", &v))) {
      if (m == 2) return 2;
      mtu = v;
      emu_flag = true;
    } else if (arg == "--fabric") {
      opt->fabric = emu_flag = true;
    } else if ((m = value(arg, "--spines", &v))) {
      if (m == 2) return 2;
      spines = v;
      fabric_flag = true;
    } else if ((m = value(arg, "--leaves", &v))) {
      if (m == 2) return 2;
      leaves = v;
      fabric_flag = true;
    } else if (arg == "--interleave") {
      opt->interleave = fabric_flag = true;
    } else if ((m = value(arg, "--flow-rate", &v))) {
      if (m == 2) return 2;
      flow_rate = v;
      fabric_flag = true;
    } else if (arg == "--keep-net") {
      opt->keep_net = emu_flag = true;
    } else if (arg == "--no-default-route") {
      opt->no_default_route = emu_flag = true;
    } else if (arg == "--keep-going") {
      opt->keep_going = true;
    } else if (arg == "--no-prefix") {
      opt->no_prefix = true;
    } else if ((m = value(arg, "--bind-to", &v))) {
      if (m == 2) return 2;
      if (v != "core" && v != "none") {
        *error = "--bind-to takes core or none, not '" + v + "'";
        return 2;
      }
      opt->bind_to = v;
    } else if (arg.size() > 1 && arg[0] == '-') {
      *error = "unknown option '" + arg + "'";
      return 2;
    } else {
      break;  // the program
    }
  }
  for (; a < argc; ++a) opt->argv.emplace_back(argv[a]);
  if (hosts.empty() && emu_flag) {
    *error = "--rails, --rate, --mtu, --fabric, --no-default-route and --keep-net need --hosts";
    return 2;
  }
  if (fabric_flag && !opt->fabric) {
    *error = "--spines, --leaves, --interleave and --flow-rate need --fabric";
    return 2;
  }
  if (!hosts.empty()) {
    std::string why;
    opt->ranks_per_host = place_ranks(hosts, opt->nranks, &why);
    if (opt->ranks_per_host.empty()) {
      *error = "--hosts " + hosts + ": " + why;
      return 2;
    }
    if (opt->nranks == 0)
      for (int k : opt->ranks_per_host) opt->nranks += k;
    if (!rails.empty()) {
      char* end = nullptr;
      errno = 0;
      const long r = std::strtol(rails.c_str(), &end, 10);
      if (*end || errno || r < 1 || r > kMaxRails) {
        *error = "--rails needs a number of interfaces from 1 to " + std::to_string(kMaxRails) + ", got '" +
                 rails + "'";
        return 2;
      }
      opt->rails = static_cast<int>(r);
    }
    if (!rate.empty() && (opt->rate_bps = parse_rate(rate, &why)) == 0) {
      *error = "--rate " + rate + ": " + why;
      return 2;
    }
    if (!mtu.empty()) {
      char* end = nullptr;
      errno = 0;
      const long m2 = std::strtol(mtu.c_str(), &end, 10);
      if (*end || errno || m2 < 576 || m2 > 65535) {
        *error = "--mtu needs a number of bytes from 576 to 65535, got '" + mtu + "'";
        return 2;
      }
      opt->mtu = static_cast<int>(m2);
    }
    if (opt->fabric && !parse_fabric(spines, leaves, flow_rate, opt, error)) return 2;
  }
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
