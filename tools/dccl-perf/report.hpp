// dccl-perf's output, as nccl-tests prints it, plus an optional JSON array.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "dccl-perf/bench.hpp"

namespace dcclperf {

// Header lines, '#'-prefixed: settings, the ranks (hosts gathered by the
// caller, one "pid host" line per rank) and the column titles.
void print_header(FILE* f, const Ctx& c, const std::vector<std::string>& rank_lines);
void print_row(FILE* f, const Ctx& c, const Row& r);
// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth : X".
void print_footer(FILE* f, const std::vector<Row>& rows, double wrong_total);
// The rows as a JSON array; false when the file cannot be written.
bool write_json(FILE* f, const Ctx& c, const std::vector<Row>& rows);

}  // namespace dcclperf
