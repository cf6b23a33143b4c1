// The peer benchmarks' measurement loop; see harness.hpp.
#include "harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace peerbench {
namespace {

using dcclperf::Options;

// Before the library is up the rank is unknown: print usage errors unless a
// launcher's variable says this process is not rank 0.
bool maybe_rank0() {
  for (const char* v : {"DCCL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* s = std::getenv(v);
    if (s && *s) return std::strcmp(s, "0") == 0;
  }
  return true;
}

struct Buffers {
  void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;
  ~Buffers() {
    std::free(send);
    std::free(recv);
  }
};

void* page_alloc(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 4096)) != 0) {
    std::fprintf(stderr, "peer-bench: cannot allocate %zu bytes\n", bytes);
    std::exit(1);
  }
  std::memset(p, 0, std::max<size_t>(bytes, 4096));  // fault the pages in now
  return p;
}

char* at(void* base, size_t elems, size_t elem) { return static_cast<char*>(base) + elems * elem; }

Ptrs pointers(const Case& k, const Buffers& b, int rank, size_t elem, bool in_place) {
  Ptrs p;
  if (!in_place) {
    p.send = b.send;
    p.recv = b.recv;
    p.base = b.recv;
    return p;
  }
  const size_t r = static_cast<size_t>(rank);
  p.base = k.coll == Coll::ReduceScatter ? b.send : b.recv;
  p.send = at(p.base, k.lay.send_inplace_off * r, elem);
  p.recv = at(p.base, k.lay.recv_inplace_off * r, elem);
  return p;
}

struct Result {
  double time_us = 0, algbw = 0, busbw = 0, wrong = -1;
};
struct Row {
  size_t bytes = 0, count = 0;
  Result v[2];  // out of place, in place
};

void init_buffers(const Case& k, const Ptrs& p, int rank, size_t elem) {
  if (k.lay.recv_count) std::memset(p.recv, 0, k.lay.recv_count * elem);
  if (k.lay.send_count) dcclperf::fill_input(k, rank, p.send);
}

Result measure(Backend& b, const Options& o, const Case& k, const Ptrs& p, bool in_place, size_t elem) {
  Result res;
  init_buffers(k, p, b.rank(), elem);
  for (int i = 0; i < o.warmup; ++i) b.launch(k, p, in_place);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) b.launch(k, p, in_place);
  const auto t1 = std::chrono::steady_clock::now();
  res.time_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / o.iters;
  if (o.check && (!in_place || dcclperf::in_place_checked(k.coll))) {  // untimed, on fresh data
    init_buffers(k, p, b.rank(), elem);
    b.launch(k, p, in_place);
    const void* result = in_place ? b.in_place_result(k, p) : p.recv;
    res.wrong = k.lay.recv_count ? double(dcclperf::count_wrong(k, b.rank(), result)) : 0.0;
  }
  return res;
}

std::string center(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  const size_t left = (width - s.size()) / 2;
  return std::string(left, ' ') + s + std::string(width - s.size() - left, ' ');
}

std::string time_text(double us) {
  char buf[32];
  if (us >= 1e4) std::snprintf(buf, sizeof buf, "%7.0f", us);
  else if (us >= 100) std::snprintf(buf, sizeof buf, "%7.1f", us);
  else std::snprintf(buf, sizeof buf, "%7.2f", us);
  return buf;
}

int root_column(const Options& o) { return dcclperf::coll_has_root(o.coll) ? o.root : -1; }
const char* op_column(const Options& o) {
  return dcclperf::coll_has_op(o.coll) ? dcclperf::op_label(o.op) : "none";
}

void print_header(FILE* f, Backend& b, const Options& o, const char* prog) {
  std::fprintf(f, "# %s %s: nranks %d minBytes %zu maxBytes %zu step: ", prog,
               dcclperf::coll_name(o.coll), b.nranks(), o.min_bytes, o.max_bytes);
  if (o.step_factor > 1) std::fprintf(f, "%zu(factor)", o.step_factor);
  else std::fprintf(f, "%zu(bytes)", o.step_bytes);
  std::fprintf(f, " warmup iters: %d iters: %d validation: %d\n", o.warmup, o.iters, o.check ? 1 : 0);
  std::fprintf(f, "# %s  algo: %s  transport: %s\n#\n", b.library().c_str(), b.algo().c_str(),
               b.transport().c_str());
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s", "", "", "", "", "");
  std::fprintf(f, "%s%s\n", center("out-of-place", 33).c_str(), center("in-place", 33).c_str());
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int v = 0; v < 2; ++v) std::fprintf(f, "  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
  std::fprintf(f, "\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int v = 0; v < 2; ++v) std::fprintf(f, "  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  std::fprintf(f, "\n");
  std::fflush(f);
}

void print_row(FILE* f, const Options& o, const Row& r) {
  std::fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, dcclperf::dtype_label(o.type),
               op_column(o), root_column(o));
  for (const Result& x : r.v) {
    char wrong[32] = "N/A";
    if (x.wrong >= 0) std::snprintf(wrong, sizeof wrong, "%.0f", x.wrong);
    std::fprintf(f, "  %7s  %6.2f  %6.2f  %6s", time_text(x.time_us).c_str(), x.algbw, x.busbw, wrong);
  }
  std::fprintf(f, "\n");
  std::fflush(f);
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    out += ch;
  }
  return out;
}

void json_number(FILE* f, const char* key, double v, bool comma = true) {
  if (std::isfinite(v)) std::fprintf(f, "\"%s\": %.6g", key, v);
  else std::fprintf(f, "\"%s\": null", key);
  if (comma) std::fputs(", ", f);
}

bool write_json(FILE* f, Backend& b, const Options& o, const std::vector<Row>& rows) {
  std::fputs("[\n", f);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "  {\"library\": \"%s\", \"algo\": \"%s\", \"transport\": \"%s\", "
                 "\"collective\": \"%s\", \"nranks\": %d, \"size\": %zu, \"count\": %zu, "
                 "\"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, \"mem\": \"host\", ",
                 json_escape(b.library()).c_str(), json_escape(b.algo()).c_str(),
                 json_escape(b.transport()).c_str(), dcclperf::coll_name(o.coll), b.nranks(), r.bytes,
                 r.count, dcclperf::dtype_label(o.type), op_column(o), root_column(o));
    for (int v = 0; v < 2; ++v) {
      const Result& x = r.v[v];
      std::fprintf(f, "\"%s\": {", v ? "in_place" : "out_of_place");
      json_number(f, "time_us", x.time_us);
      json_number(f, "algbw_gbps", x.algbw);
      json_number(f, "busbw_gbps", x.busbw);
      if (x.wrong >= 0) json_number(f, "wrong", x.wrong, false);
      else std::fputs("\"wrong\": null", f);
      std::fputs(v ? "}" : "}, ", f);
    }
    std::fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
  }
  std::fputs("]\n", f);
  return std::fflush(f) == 0 && !std::ferror(f);
}

}  // namespace

int parse(int argc, char** argv, const char* prog, const char* algos, Options* opt, std::string* algo) {
  // Take out --algo NAME / --algo=NAME; the rest is dccl-perf's command line.
  std::vector<char*> rest = {argv[0]};
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--algo") && a + 1 < argc) {
      *algo = argv[++a];
    } else if (!std::strncmp(argv[a], "--algo=", 7)) {
      *algo = argv[a] + 7;
    } else if (!std::strcmp(argv[a], "-h") || !std::strcmp(argv[a], "--help")) {
      std::printf("usage: %s COLLECTIVE [dccl-perf's flags] [--algo NAME]\n  --algo: %s\n"
                  "Same flags, columns, layout and checks as dccl-perf; -z, --mem and\n"
                  "--peer-direct are accepted and ignored (host memory, blocking calls).\n"
                  "dccl-perf's flags:\n",
                  prog, algos);
      dcclperf::print_usage(stdout);
      return 1;
    } else {
      rest.push_back(argv[a]);
    }
  }
  std::string error;
  const int rc = dcclperf::parse_args(int(rest.size()), rest.data(), opt, &error);
  if (rc == 2 && maybe_rank0()) std::fprintf(stderr, "%s: %s (see %s --help)\n", prog, error.c_str(), prog);
  return rc;
}

int parse_fixed_algo(int argc, char** argv, const char* prog, const char* chooses, Options* opt) {
  std::string algo;
  const int rc = parse(argc, argv, prog, (std::string("none (") + chooses + ")").c_str(), opt, &algo);
  if (rc != 0 || algo.empty() || algo == "default") return rc;
  if (maybe_rank0()) std::fprintf(stderr, "%s: --algo: %s\n", prog, chooses);
  return 2;
}

int run(Backend& b, const Options& o, const char* prog) {
  const bool rank0 = b.rank() == 0;
  const size_t elem = dcclperf::dtype_bytes(o.type);
  if (dcclperf::coll_has_root(o.coll) && o.root >= b.nranks()) {
    if (rank0) std::fprintf(stderr, "%s: root %d is not a rank (nranks %d)\n", prog, o.root, b.nranks());
    return 2;
  }
  auto make_case = [&](size_t bytes) {
    Case k;
    k.coll = o.coll;
    k.type = o.type;
    k.op = o.op;
    k.nranks = b.nranks();
    k.root = o.root;
    k.lay = dcclperf::layout(k.coll, bytes, elem, b.nranks());
    return k;
  };
  {
    const std::string why = b.unsupported(make_case(o.max_bytes));
    if (!why.empty()) {
      if (rank0) std::fprintf(stderr, "%s: %s\n", prog, why.c_str());
      return 2;
    }
  }
  Buffers buf;
  {
    const dcclperf::Layout l = make_case(o.max_bytes).lay;
    buf.bytes = std::max({l.send_count, l.recv_count, size_t{1}}) * elem;
    buf.send = page_alloc(buf.bytes);
    buf.recv = page_alloc(buf.bytes);
  }

  FILE* out = (o.json && o.json_file.empty()) ? stderr : stdout;
  if (rank0) print_header(out, b, o, prog);
  std::vector<Row> rows;
  double wrong_total = 0;
  for (size_t size = o.min_bytes;;) {
    const Case k = make_case(size);
    Row row;
    row.bytes = k.lay.bytes;
    row.count = k.lay.param_count;
    for (int v = 0; v < 2; ++v) row.v[v] = measure(b, o, k, pointers(k, buf, b.rank(), elem, v == 1), v == 1, elem);
    double comb[4] = {row.v[0].time_us, row.v[1].time_us, row.v[0].wrong, row.v[1].wrong};
    b.combine(comb);
    for (int v = 0; v < 2; ++v) {
      Result& r = row.v[v];
      r.time_us = comb[v];
      const double sec = r.time_us * 1e-6;
      r.algbw = sec > 0 ? double(k.lay.bytes) / 1e9 / sec : 0.0;
      r.busbw = r.algbw * dcclperf::bus_factor(k.coll, b.nranks());
      if (r.wrong >= 0) r.wrong = comb[2 + v];  // checked on every rank alike
      wrong_total += std::max(r.wrong, 0.0);
    }
    if (rank0) print_row(out, o, row);
    rows.push_back(row);
    if (!dcclperf::next_size(o, &size)) break;
  }
  if (rank0) {
    double bw = 0;
    for (const Row& r : rows) bw += (r.v[0].busbw + r.v[1].busbw) / 2;
    std::fprintf(out, "# Out of bounds values : %.0f %s\n", wrong_total, wrong_total > 0 ? "FAILED" : "OK");
    std::fprintf(out, "# Avg bus bandwidth    : %g\n#\n", rows.empty() ? 0.0 : bw / double(rows.size()));
    std::fflush(out);
  }
  int rc = rank0 && wrong_total > 0 ? 1 : 0;
  if (rank0 && o.json) {
    FILE* jf = o.json_file.empty() ? stdout : std::fopen(o.json_file.c_str(), "w");
    if (!jf || !write_json(jf, b, o, rows)) {
      std::fprintf(stderr, "%s: cannot write %s\n", prog, o.json_file.empty() ? "stdout" : o.json_file.c_str());
      rc = 1;
    }
    if (jf && jf != stdout) std::fclose(jf);
  }
  b.barrier();
  return rc;
}

}  // namespace peerbench
