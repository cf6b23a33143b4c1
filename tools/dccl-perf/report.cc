// dccl-perf's output; see report.hpp.
#include "dccl-perf/report.hpp"

#include <cmath>
#include <cstdlib>

namespace dcclperf {
namespace {

bool show_staged(const Ctx& c) { return c.opt.mem != dcclMemHost; }
int root_column(const Ctx& c) { return coll_has_root(c.opt.coll) ? c.opt.root : -1; }
const char* op_column(const Ctx& c) { return coll_has_op(c.opt.coll) ? op_label(c.opt.op) : "none"; }

// The provider and peer-direct mode asked for (DCCL_PROVIDER, else FI_PROVIDER; DCCL_PEER_DIRECT).
const char* provider_label() {
  const char* p = std::getenv("DCCL_PROVIDER");
  if (!p || !*p) p = std::getenv("FI_PROVIDER");
  return p && *p ? p : "auto";
}
const char* peer_direct_label() {
  const char* pd = std::getenv("DCCL_PEER_DIRECT");
  return pd && *pd ? pd : "auto";
}

// nccl-tests' "Avg bus bandwidth": the mean over rows of the out-of-place and in-place busbw.
double avg_busbw(const std::vector<Row>& rows) {
  double bw = 0;
  for (const Row& r : rows) bw += (r.out_of_place.busbw + r.in_place.busbw) / 2;
  return rows.empty() ? 0.0 : bw / static_cast<double>(rows.size());
}

std::string center(const std::string& s, size_t width) {
  if (s.size() >= width) return s;
  const size_t left = (width - s.size()) / 2;
  return std::string(left, ' ') + s + std::string(width - s.size() - left, ' ');
}

// Width of one out-of-place / in-place group: "  %7s  %6s  %6s  %6s" [+ "  %8s"].
size_t group_width(const Ctx& c) { return show_staged(c) ? 43 : 33; }

void print_group_titles(FILE* f, const Ctx& c, const char* a, const char* b, const char* d,
                        const char* e, const char* g) {
  std::fprintf(f, "  %7s  %6s  %6s  %6s", a, b, d, e);
  if (show_staged(c)) std::fprintf(f, "  %8s", g);
}

std::string time_text(double us) {
  char buf[32];
  if (us >= 1e4) std::snprintf(buf, sizeof buf, "%7.0f", us);
  else if (us >= 100) std::snprintf(buf, sizeof buf, "%7.1f", us);
  else std::snprintf(buf, sizeof buf, "%7.2f", us);
  return buf;
}

void print_result(FILE* f, const Ctx& c, const Result& r) {
  char wrong[32] = "N/A";
  if (r.wrong >= 0) std::snprintf(wrong, sizeof wrong, "%.0f", r.wrong);
  std::fprintf(f, "  %7s  %6.2f  %6.2f  %6s", time_text(r.time_us).c_str(), r.algbw, r.busbw, wrong);
  if (show_staged(c)) std::fprintf(f, "  %8.3f", r.staged);
}

void json_number(FILE* f, const char* key, double v, bool comma = true) {
  if (std::isfinite(v)) std::fprintf(f, "\"%s\": %.6g", key, v);
  else std::fprintf(f, "\"%s\": null", key);
  if (comma) std::fputs(", ", f);
}

void json_result(FILE* f, const Ctx& c, const char* name, const Result& r) {
  std::fprintf(f, "\"%s\": {", name);
  json_number(f, "time_us", r.time_us);
  json_number(f, "algbw_gbps", r.algbw);
  json_number(f, "busbw_gbps", r.busbw);
  if (r.wrong >= 0) json_number(f, "wrong", r.wrong, show_staged(c));
  else std::fprintf(f, "\"wrong\": null%s", show_staged(c) ? ", " : "");
  if (show_staged(c)) json_number(f, "staged_per_byte", r.staged, false);
  std::fputs("}", f);
}

}  // namespace

void print_header(FILE* f, const Ctx& c, const std::vector<std::string>& rank_lines) {
  const Options& o = c.opt;
  std::fprintf(f, "# dccl-perf %s: nranks %d minBytes %zu maxBytes %zu step: ", coll_name(o.coll),
               c.nranks, o.min_bytes, o.max_bytes);
  if (o.step_factor > 1) std::fprintf(f, "%zu(factor)", o.step_factor);
  else std::fprintf(f, "%zu(bytes)", o.step_bytes);
  std::fprintf(f, " warmup iters: %d iters: %d validation: %d blocking: %d\n", o.warmup, o.iters,
               o.check ? 1 : 0, o.blocking ? 1 : 0);
  int version = 0;
  dcclGetVersion(&version);
  std::fprintf(f, "# DirectCCL %d.%d.%d  mem: %s  peer-direct: %s  provider: %s\n", version / 10000,
               version / 100 % 100, version % 100, mem_label(o.mem), peer_direct_label(), provider_label());
  std::fprintf(f, "#\n# Using devices\n");
  for (size_t r = 0; r < rank_lines.size(); ++r) {
    std::fprintf(f, "#  Rank %2zu %s mem %s\n", r, rank_lines[r].c_str(), mem_label(o.mem));
  }
  std::fprintf(f, "#\n");
  const size_t gw = group_width(c);
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s", "", "", "", "", "");
  std::fprintf(f, "%s%s\n", center("out-of-place", gw).c_str(), center("in-place", gw).c_str());
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int v = 0; v < 2; ++v) print_group_titles(f, c, "time", "algbw", "busbw", "#wrong", "staged/B");
  std::fprintf(f, "\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int v = 0; v < 2; ++v) print_group_titles(f, c, "(us)", "(GB/s)", "(GB/s)", "", "");
  std::fprintf(f, "\n");
  std::fflush(f);
}

void print_row(FILE* f, const Ctx& c, const Row& r) {
  std::fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, dtype_label(c.opt.type),
               op_column(c), root_column(c));
  print_result(f, c, r.out_of_place);
  print_result(f, c, r.in_place);
  std::fprintf(f, "\n");
  std::fflush(f);
}

void print_footer(FILE* f, const std::vector<Row>& rows, double wrong_total) {
  std::fprintf(f, "# Out of bounds values : %.0f %s\n", wrong_total, wrong_total > 0 ? "FAILED" : "OK");
  std::fprintf(f, "# Avg bus bandwidth    : %g\n#\n", avg_busbw(rows));
  std::fflush(f);
}

bool write_json(FILE* f, const Ctx& c, const std::vector<Row>& rows) {
  std::fputs("[\n", f);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "  {\"collective\": \"%s\", \"nranks\": %d, \"size\": %zu, \"count\": %zu, "
                 "\"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, \"mem\": \"%s\", "
                 "\"peer_direct\": \"%s\", \"provider\": \"%s\", ",
                 coll_name(c.opt.coll), c.nranks, r.bytes, r.count, dtype_label(c.opt.type),
                 op_column(c), root_column(c), mem_label(c.opt.mem), peer_direct_label(), provider_label());
    json_number(f, "avg_busbw_gbps", avg_busbw(rows));
    json_result(f, c, "out_of_place", r.out_of_place);
    std::fputs(", ", f);
    json_result(f, c, "in_place", r.in_place);
    std::fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
  }
  std::fputs("]\n", f);
  return std::fflush(f) == 0 && !std::ferror(f);
}

}  // namespace dcclperf
