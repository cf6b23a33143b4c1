// dccl-info --job HOST:PORT [--secret HEX] [--json] [--stale-s S] [--ns NAMESPACE]
// Connects to the job's store as an observer (the job secret: --secret, else
// DCCL_SECRET), reads every rank's status record and prints one row per rank and
// what the rows say: a rank whose record went stale (stopped, killed, cut off), a
// rank behind the others' call, a call that differs between ranks.
#include "job.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/env_init.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/unique_id.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/recorder.hpp"
#include "json_text.hpp"

namespace {

using dccl::boot::Bootstrap;

// A value of the flat JSON objects the ranks publish: "key":123 or "key":"text".
std::string field(const std::string& rec, const char* key) {
  const std::string k = std::string("\"") + key + "\":";
  size_t at = rec.find(k);
  if (at == std::string::npos) return "";
  at += k.size();
  if (rec[at] == '"') {
    std::string out;
    for (size_t i = at + 1; i < rec.size() && rec[i] != '"'; ++i) {
      if (rec[i] == '\\' && i + 1 < rec.size()) ++i;
      out.push_back(rec[i]);
    }
    return out;
  }
  size_t end = rec.find_first_of(",}", at);
  return rec.substr(at, end == std::string::npos ? std::string::npos : end - at);
}
long long num(const std::string& rec, const char* key) { return atoll(field(rec, key).c_str()); }

struct Row {
  int rank = 0;
  bool have = false;
  std::string rec;
  double age_s = 0, progress_s = 0, in_call_s = 0;
  std::string call() const {
    if (!have || field(rec, "coll").empty()) return "-";
    return field(rec, "coll") + " #" + field(rec, "seq") + " (" + field(rec, "count") + " x " + field(rec, "type") + ")";
  }
};

std::unique_ptr<Bootstrap> connect(const dccl::boot::UniqueIdData& id, const std::string& ns) {
  return std::make_unique<Bootstrap>(id, 0, 1, std::chrono::seconds(5), nullptr, ns, Bootstrap::Role::Watch);
}

// The store connection's errors begin "rank 0: " (the observer connects as rank 0
// of a watch): not a rank of the job, so left out.
std::string observer_text(const std::string& what) {
  return what.rfind("rank 0: ", 0) == 0 ? what.substr(8) : what;
}

// The communicator's namespace: the one given, else the first that has status records
// ("" for dcclCommInitRank's, "env0" for the first dcclCommInitFromEnv's).
std::unique_ptr<Bootstrap> find_job(const dccl::boot::UniqueIdData& id, std::string* ns, int* n) {
  std::vector<std::string> tries = ns->empty() ? std::vector<std::string>{"", "env0", "env1", "env2"}
                                               : std::vector<std::string>{*ns};
  std::string why;
  bool any_comm = false;  // a namespace with a communicator (but no status records)
  const std::string at = id.host + ":" + std::to_string(id.port);
  for (const std::string& t : tries) {
    std::unique_ptr<Bootstrap> b;
    try {
      b = connect(id, t);
    } catch (const dccl::core::Error& e) {
      // A namespace without a communicator: try the next; anything else (nothing
      // listening, another job's secret) ends the search at once.
      if (std::string(e.what()).find("no communicator") == std::string::npos)
        throw std::runtime_error("cannot reach the job's store at " + at + " with this secret: " + observer_text(e.what()));
      why += std::string(why.empty() ? "" : "; ") + "namespace '" + t + "': no communicator";
      continue;
    }
    try {
      *n = atoi(b->get("status/n", std::chrono::seconds(2)).c_str());
      *ns = t;
      return b;
    } catch (const dccl::core::Error& e) {
      any_comm = true;
      why += std::string(why.empty() ? "" : "; ") + "namespace '" + t + "': no status records (" + observer_text(e.what()) + ")";
    }
  }
  if (!any_comm) throw std::runtime_error("the store at " + at + " has no communicator there: " + why);
  throw std::runtime_error("the store at " + at + " has no status records (is DCCL_STATUS_MS 0 in the job?): " + why);
}

}  // namespace

int job_view(int argc, char** argv) {
  std::string addr, secret = dccl::core::env_text("DCCL_SECRET");
  std::string ns;
  bool json = false;
  double stale_s = 3.0;
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--json") json = true;
    else if (arg == "--secret" && a + 1 < argc) secret = argv[++a];
    else if (arg == "--stale-s" && a + 1 < argc) {
      const char* v = argv[++a];
      char* end = nullptr;
      errno = 0;
      stale_s = strtod(v, &end);
      if (end == v || *end || errno || !std::isfinite(stale_s) || stale_s <= 0) {
        fprintf(stderr, "dccl-info --job: bad value '%s' for --stale-s (seconds, a number > 0)\n", v);
        return 2;
      }
    }
    else if (arg == "--ns" && a + 1 < argc) ns = argv[++a];
    else if (addr.empty() && arg[0] != '-') addr = arg;
    else {
      fprintf(stderr, "dccl-info --job: bad option '%s'\nusage: dccl-info --job HOST:PORT [--secret HEX] [--json] "
                      "[--stale-s S] [--ns NAMESPACE]\n", arg.c_str());
      return 2;
    }
  }
  if (addr.empty() || secret.empty()) {
    fprintf(stderr, "dccl-info --job: give the store's HOST:PORT (DCCL_ADDR) and the job secret (--secret or "
                    "DCCL_SECRET)\n");
    return 2;
  }
  dccl::boot::UniqueIdData id;
  try {
    int port = 0;
    dccl::boot::parse_store_addr(addr, &id.host, &port);
    id.port = static_cast<uint16_t>(port);
  } catch (const dccl::core::Error& e) {
    fprintf(stderr, "dccl-info --job: bad address: %s\n", e.what());
    return 2;
  }
  std::vector<Row> rows;
  try {
    id.secret = dccl::boot::secret_from_hex(secret);
    int n = 0;
    auto store = find_job(id, &ns, &n);
    const long long now = dccl::core::Recorder::now_ns();
    for (int r = 0; r < n; ++r) {
      Row row;
      row.rank = r;
      try {
        row.rec = store->get("status/" + std::to_string(r), std::chrono::milliseconds(500));
        row.have = true;
        row.age_s = (now - num(row.rec, "time_ns")) / 1e9;
        row.progress_s = (now - num(row.rec, "last_progress_ns")) / 1e9;
        row.in_call_s = (now - num(row.rec, "start_ns")) / 1e9;
      } catch (const dccl::core::Error&) {
        store = connect(id, ns);  // a wait that timed out leaves the connection unusable
      }
      rows.push_back(row);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "dccl-info --job %s: %s\n", addr.c_str(), e.what());
    return 1;
  }
  // What the rows say: stale records, the furthest behind, a call that differs.
  long long top = -1;
  std::map<std::string, std::vector<int>> at_top;  // call signature at the furthest call -> ranks
  for (const Row& r : rows)
    if (r.have) top = std::max(top, num(r.rec, "seq"));
  for (const Row& r : rows)
    if (r.have && num(r.rec, "seq") == top) at_top[r.call()].push_back(r.rank);
  std::string kind, why;
  const Row* culprit = nullptr;
  if (at_top.size() > 1) {
    auto minority = std::min_element(at_top.begin(), at_top.end(),
                                     [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    culprit = &rows[static_cast<size_t>(minority->second[0])];
    kind = "mismatch";
    why = "called " + minority->first + " where other ranks called another";
  }
  for (const Row& r : rows)
    if (!culprit && (!r.have || r.age_s > stale_s)) {
      culprit = &r;
      kind = "stale";
      why = r.have ? "its status record is " + std::to_string(static_cast<int>(r.age_s)) +
                         " s old: stopped, killed or cut off; its last call " +
                         (r.call() == "-" ? std::string("none recorded") : r.call())
                   : "no status record";
    }
  // Behind: idle for a second or more when its record was written (a rank of a busy
  // loop is often between two calls when its record is taken, a few calls behind).
  constexpr double kIdleS = 1.0;
  for (const Row& r : rows)
    if (!culprit && r.have && num(r.rec, "seq") < top && field(r.rec, "state") != "in call" &&
        r.progress_s - r.age_s >= kIdleS) {
      culprit = &r;
      kind = "behind";
      why = "idle after " + r.call() + " while others are in #" + std::to_string(top);
    }
  // A rank that is stale or behind is missing the call the others are in: name that call.
  std::string call = culprit ? culprit->call() : "";
  if (culprit && kind != "mismatch" && !at_top.empty()) {
    auto most = std::max_element(at_top.begin(), at_top.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    if (num(culprit->rec, "seq") != top || field(culprit->rec, "coll").empty()) {
      call = most->first;
      why += "; the others are in " + call;
    }
  }
  if (json) {
    printf("{\"ranks\":[");
    for (size_t i = 0; i < rows.size(); ++i)
      printf("%s%s", i ? "," : "", rows[i].have ? rows[i].rec.c_str() : ("{\"rank\":" + std::to_string(i) + "}").c_str());
    if (culprit)
      printf("],\"culprit\":{\"rank\":%d,\"host\":\"%s\",\"kind\":\"%s\",\"call\":\"%s\",\"why\":\"%s\"}}\n",
             culprit->rank, json_text(field(culprit->rec, "host")).c_str(), kind.c_str(),
             json_text(call).c_str(), json_text(why).c_str());
    else
      printf("],\"culprit\":null}\n");
    return 0;
  }
  printf("%-5s %-16s %-8s %-11s %-36s %9s %11s %9s %8s %8s\n", "rank", "host", "pid", "state", "call", "in call s",
         "progress s", "record s", "calls", "ops");
  for (const Row& r : rows) {
    if (!r.have) {
      printf("%-5d (no status record)\n", r.rank);
      continue;
    }
    const bool in = field(r.rec, "state") == "in call";
    char in_s[16] = "-", prog_s[16] = "-";
    if (in) snprintf(in_s, sizeof(in_s), "%.1f", r.in_call_s);
    if (num(r.rec, "last_progress_ns") > 0) snprintf(prog_s, sizeof(prog_s), "%.1f", r.progress_s);
    printf("%-5d %-16.16s %-8s %-11s %-36.36s %9s %11s %9.1f %8s %8s\n", r.rank, field(r.rec, "host").c_str(),
           field(r.rec, "pid").c_str(), field(r.rec, "state").c_str(), r.call().c_str(), in_s, prog_s,
           r.age_s, field(r.rec, "calls").c_str(), field(r.rec, "ops").c_str());
  }
  if (culprit)
    printf("culprit: rank %d on %s (%s): %s\n", culprit->rank, field(culprit->rec, "host").c_str(), kind.c_str(),
           why.c_str());
  else
    printf("no rank stands out: every record is fresh and every rank is at the same call\n");
  return 0;
}
