// dccl-perf's command line; see args.hpp.
#include "dccl-perf/args.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace dcclperf {
namespace {

struct Flag {
  char short_name;
  const char* long_name;
  bool optional_value;  // -z and --json may stand alone
};
constexpr Flag kFlags[] = {
    {'b', "minbytes", false}, {'e', "maxbytes", false},     {'f', "stepfactor", false},
    {'i', "stepbytes", false}, {'n', "iters", false},       {'w', "warmup_iters", false},
    {'c', "check", false},    {'d', "datatype", false},     {'o', "op", false},
    {'r', "root", false},     {'z', "blocking", true},      {'t', "nthreads", false},
    {'g', "ngpus", false},    {'h', "help", true},          {0, "json", true},
    {'a', "average", false},  {'m', "agg_iters", false},    {'G', "cudagraph", false},
    {0, "mem", false},        {0, "peer-direct", false},    {0, "trace", false}};

bool parse_int(const std::string& s, long lo, long hi, long* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 0);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

bool parse_size(const std::string& in, size_t* out) {
  std::string s = in;
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  if (s.empty() || s[0] == '-') return false;
  unsigned shift = 0;
  switch (s.back()) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
  }
  if (shift) s.pop_back();
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || errno || *end || v > (SIZE_MAX >> shift)) return false;
  *out = static_cast<size_t>(v) << shift;
  return true;
}

const char* mem_label(dcclMemType_t m) {
  switch (m) {
    case dcclMemHost: return "host";
    case dcclMemSim: return "sim";
    case dcclMemCuda: return "cuda";
  }
  return "?";
}

void print_usage(FILE* f) {
  std::fprintf(f,
      "usage: dccl-perf COLLECTIVE [flags]\n"
      "  COLLECTIVE: all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv\n"
      "  -b, --minbytes SIZE      smallest size (default 8; K/M/G suffixes)\n"
      "  -e, --maxbytes SIZE      largest size (default 64M)\n"
      "  -f, --stepfactor N       multiply the size by N each step (default 2)\n"
      "  -i, --stepbytes SIZE     add SIZE each step instead (when -f is not given or is 1)\n"
      "  -n, --iters N            timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N     untimed iterations before them (default 5)\n"
      "  -c, --check 0|1          check the results (default 1)\n"
      "  -d, --datatype T         int8 uint8 int32 uint32 int64 uint64 half|float16\n"
      "                           bfloat16 float|float32 double|float64 (default float)\n"
      "  -o, --op OP              sum prod max min avg (default sum)\n"
      "  -r, --root R             root of broadcast and reduce (default 0)\n"
      "  -z, --blocking [0|1]     use the NULL stream: every call completes before it returns\n"
      "      --json [FILE]        write the rows as a JSON array to FILE (or stdout, with the\n"
      "                           table then going to stderr)\n"
      "      --trace FILE         after the run, each rank dumps its flight recorder (its last\n"
      "                           DCCL_RECORDER calls) to FILE.dumps/ and rank 0 writes their\n"
      "                           timeline to FILE (Chrome trace format) with dccl-trace; an\n"
      "                           earlier run's dumps there (dccl-rec.*.jsonl) are removed first\n"
      "      --mem host|sim|cuda  memory the buffers live in (default host)\n"
      "      --peer-direct 0|1|auto  sets DCCL_PEER_DIRECT before init\n"
      "  -a, --average 0|1|2|3    time reported: rank 0's, the mean, the fastest or the slowest\n"
      "                           rank's (default 3, the slowest; nccl-tests defaults to 1)\n"
      "  -m, --agg_iters N        launch N operations back to back per timed iteration (default 1)\n"
      "  -t, -g 1                 accepted for nccl-tests scripts: one rank per process\n"
      "  -G, --cudagraph N        refused: DirectCCL calls are not captured into CUDA graphs\n"
      "Columns as nccl-tests' (time per operation, algbw = bytes/time, busbw = algbw x the\n"
      "collective's bus factor), plus staged/B with --mem sim|cuda: bytes that crossed host\n"
      "staging buffers (staged path, counted on the sending and the receiving rank) per\n"
      "payload byte, averaged over ranks; 0 when every transfer went peer-direct.\n"
      "--json rows carry the collective, size, type, memory kind, peer-direct mode, provider,\n"
      "both results and the run's average busbw. Under dccl-run, add --no-prefix to dccl-run\n"
      "or give --json a FILE so that the JSON is not mixed with rank prefixes.\n"
      "Run one process per rank, e.g. dccl-run -n 4 dccl-perf all_reduce -b 8 -e 64M\n");
}

int parse_args(int argc, char** argv, Options* opt, std::string* error) {
  bool have_coll = false, factor_given = false, step_given = false;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg.size() < 2 || arg[0] != '-') {
      if (have_coll) { *error = "unexpected argument '" + arg + "'"; return 2; }
      if (!parse_coll(arg, &opt->coll)) { *error = "unknown collective '" + arg + "'"; return 2; }
      have_coll = true;
      continue;
    }
    // Identify the flag and its inline value (-b8, --minbytes=8).
    const Flag* flag = nullptr;
    std::string value;
    bool has_value = false;
    if (arg[1] == '-') {
      std::string name = arg.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        has_value = true;
      }
      for (const Flag& f : kFlags) {
        if (name == f.long_name) flag = &f;
      }
    } else {
      for (const Flag& f : kFlags) {
        if (f.short_name == arg[1]) flag = &f;
      }
      if (arg.size() > 2) { value = arg.substr(2); has_value = true; }
    }
    if (!flag) { *error = "unknown flag '" + arg + "'"; return 2; }
    const std::string name = flag->short_name ? std::string("-") + flag->short_name
                                              : "--" + std::string(flag->long_name);
    if (flag->short_name == 'h') { print_usage(stdout); return 1; }
    if (!has_value) {
      const bool next_ok = a + 1 < argc && (argv[a + 1][0] != '-' || argv[a + 1][1] == 0);
      if (flag->optional_value) {
        // -z takes an optional 0/1 (a number after it is its value: -z 2 is refused as
        // -z's, not as a stray argument); --json an optional file name.
        const char* next = next_ok ? argv[a + 1] : "";
        const bool number = *next && std::strspn(next, "0123456789") == std::strlen(next);
        if (next_ok && (flag->short_name != 'z' || number)) {
          Coll next_coll;
          if (flag->short_name == 'z' || have_coll || !parse_coll(argv[a + 1], &next_coll)) {
            value = argv[++a];
            has_value = true;
          }
        }
      } else {
        if (a + 1 >= argc) { *error = name + " needs a value"; return 2; }
        value = argv[++a];
        has_value = true;
      }
    }
    long v = 0;
    auto bad = [&](const char* what) {
      *error = "bad value '" + value + "' for " + name + " (" + what + ")";
      return 2;
    };
    switch (flag->short_name) {
      case 'b': if (!parse_size(value, &opt->min_bytes)) return bad("a size"); break;
      case 'e': if (!parse_size(value, &opt->max_bytes)) return bad("a size"); break;
      case 'i':
        if (!parse_size(value, &opt->step_bytes) || !opt->step_bytes) return bad("a size > 0");
        step_given = true;
        break;
      case 'f':
        if (!parse_int(value, 1, 1 << 20, &v)) return bad("an integer >= 1");
        opt->step_factor = static_cast<size_t>(v);
        factor_given = true;
        break;
      case 'n': if (!parse_int(value, 1, INT_MAX, &v)) return bad("an integer >= 1"); opt->iters = int(v); break;
      case 'w': if (!parse_int(value, 0, INT_MAX, &v)) return bad("an integer >= 0"); opt->warmup = int(v); break;
      case 'c': if (!parse_int(value, 0, 1, &v)) return bad("0 or 1"); opt->check = v != 0; break;
      case 'r': if (!parse_int(value, 0, INT_MAX, &v)) return bad("a rank"); opt->root = int(v); break;
      case 'd': if (!parse_dtype(value, &opt->type)) return bad("a datatype"); break;
      case 'o': if (!parse_op(value, &opt->op)) return bad("sum prod max min avg"); break;
      case 'z':
        if (has_value && value != "0" && value != "1") return bad("0 or 1");
        opt->blocking = !has_value || value == "1";
        break;
      case 'a': if (!parse_int(value, 0, 3, &v)) return bad("0 rank 0, 1 mean, 2 min, 3 max"); opt->average = int(v); break;
      case 'm': if (!parse_int(value, 1, 1 << 20, &v)) return bad("an integer >= 1"); opt->agg = int(v); break;
      case 'G':
        *error = "-G (CUDA graph launches) is not supported: DirectCCL calls run on DirectCCL streams and "
                 "are not captured into CUDA graphs; run without -G";
        return 2;
      case 't': case 'g':
        if (!parse_int(value, 1, 1, &v))
          return bad("dccl-perf drives one rank per process; start several with dccl-run -n N");
        break;
      default:  // long-only flags
        if (!std::strcmp(flag->long_name, "json")) {
          opt->json = true;
          opt->json_file = has_value ? value : "";
        } else if (!std::strcmp(flag->long_name, "trace")) {
          if (value.empty()) return bad("a file name");  // --trace= would trace nothing
          opt->trace_file = value;
        } else if (!std::strcmp(flag->long_name, "mem")) {
          if (value == "host") opt->mem = dcclMemHost;
          else if (value == "sim") opt->mem = dcclMemSim;
          else if (value == "cuda") opt->mem = dcclMemCuda;
          else return bad("host, sim or cuda");
        } else {  // peer-direct
          if (value != "0" && value != "1" && value != "auto") return bad("0, 1 or auto");
          opt->peer_direct = value;
        }
        break;
    }
  }
  if (!have_coll) { *error = "no collective given"; return 2; }
  if (opt->min_bytes > opt->max_bytes) { *error = "-b is larger than -e"; return 2; }
  // nccl-tests: a factor > 1 multiplies; otherwise stepbytes is added.
  if (step_given && !factor_given) opt->step_factor = 1;
  return 0;
}

bool next_size(const Options& o, size_t* size) {
  if (*size >= o.max_bytes) return false;
  if (o.step_factor > 1) {
    if (*size == 0) {
      *size = 1;
      return true;
    }
    if (*size > o.max_bytes / o.step_factor) return false;
    *size *= o.step_factor;
    return true;
  }
  if (o.step_bytes > o.max_bytes - *size) return false;
  *size += o.step_bytes;
  return true;
}

}  // namespace dcclperf
