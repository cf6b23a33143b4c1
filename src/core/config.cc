#include "core/config.hpp"
#include "core/config_aliases.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/launcher.hpp"
#include "core/log.hpp"

namespace dccl::core {

uint64_t parse_bytes(const std::string& text, const char* what) {
  if (text.empty()) raise(dcclInvalidArgument, std::string(what) + ": empty size");
  errno = 0;
  char* end = nullptr;
  if (text[0] == '-') raise(dcclInvalidArgument, std::string(what) + ": negative size '" + text + "'");
  // strtoull skips blanks and accepts a sign, so " -5" would become 2^64-5: insist on a digit.
  if (text[0] < '0' || text[0] > '9')
    raise(dcclInvalidArgument, std::string(what) + ": not a size '" + text + "'");
  unsigned long long v = strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || errno == ERANGE)
    raise(dcclInvalidArgument, std::string(what) + ": not a size '" + text + "'");
  uint64_t mult = 1;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") mult = 1ULL << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") mult = 1ULL << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") mult = 1ULL << 30;
  else if (suffix == "B" || suffix.empty()) mult = 1;
  else raise(dcclInvalidArgument, std::string(what) + ": unknown size suffix in '" + text + "'");
  if (v > std::numeric_limits<uint64_t>::max() / mult)
    raise(dcclInvalidArgument, std::string(what) + ": size overflows '" + text + "'");
  return v * mult;
}

int64_t parse_int(const std::string& text, const char* what) {
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    raise(dcclInvalidArgument, std::string(what) + ": not an integer '" + text + "'");
  return v;
}

bool parse_bool(const std::string& text, const char* what) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off" || text.empty()) return false;
  raise(dcclInvalidArgument, std::string(what) + ": not a boolean '" + text + "'");
}

namespace {

constexpr ConfigRange kRanges[] = {
#define R(name, lo, hi) {name, static_cast<int64_t>(lo), static_cast<uint64_t>(hi)},
    DCCL_CONFIG_RANGES(R)
#undef R
};

// "1G" for whole binary multiples, else the number.
std::string bound_text(uint64_t v, bool bytes) {
  if (bytes && v > 0) {
    static const char* const units[] = {"T", "G", "M", "K"};
    for (int i = 0; i < 4; ++i) {
      const uint64_t unit = uint64_t{1} << (10 * (4 - i));
      if (v % unit == 0) return std::to_string(v / unit) + units[i];
    }
  }
  return std::to_string(v);
}

std::string range_text(const ConfigRange& r, bool bytes) {
  const std::string lo = r.min < 0 ? std::to_string(r.min) : bound_text(static_cast<uint64_t>(r.min), bytes);
  std::string t = lo + " to " + bound_text(r.max, bytes);
  if (std::string(r.name) == "DCCL_TIMEOUT_S") t += " (one year)";
  return t;
}

[[noreturn]] void out_of_range(const char* name, const std::string& text, const ConfigRange& r, bool bytes) {
  raise(dcclInvalidArgument, std::string(name) + "=" + text + " is out of range: allowed " + range_text(r, bytes));
}

void check_range(int64_t v, const char* name, const std::string& text) {
  const ConfigRange* r = config_range(name);
  if (r && (v < r->min || (v >= 0 && static_cast<uint64_t>(v) > r->max))) out_of_range(name, text, *r, false);
}
void check_range(uint64_t v, const char* name, const std::string& text) {
  const ConfigRange* r = config_range(name);
  if (r && ((r->min > 0 && v < static_cast<uint64_t>(r->min)) || v > r->max)) out_of_range(name, text, *r, true);
}

void assign(std::string& f, const std::string& v, const char*) { f = v; }
void assign(int64_t& f, const std::string& v, const char* n) {
  f = parse_int(v, n);
  check_range(f, n, v);
}
void assign(uint64_t& f, const std::string& v, const char* n) {
  f = parse_bytes(v, n);
  check_range(f, n, v);
}
void assign(bool& f, const std::string& v, const char* n) { f = parse_bool(v, n); }
}  // namespace

const std::vector<ConfigAlias>& setting_aliases() {
#define A(old_name, name) {old_name, name},
  static const std::vector<ConfigAlias> v = {DCCL_CONFIG_ALIASES(A)};
#undef A
  return v;
}

const std::vector<ConfigAlias>& algo_aliases() {
#define A(old_name, name) {old_name, name},
  static const std::vector<ConfigAlias> v = {DCCL_ALGO_ALIASES(A)};
#undef A
  return v;
}

void warn_deprecated(const ConfigAlias& a, const char* where) {
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(a.old_name).second) return;
  }
  DCCL_WARN("%s%s is deprecated: use %s (it is read as that)", where, a.old_name, a.name);
}

namespace {
// A setting's value from the environment: its own variable, else a deprecated
// name for it (recorded in `deprecated`).
const char* env_or_alias(const char* name, std::vector<std::string>* deprecated) {
  if (const char* v = getenv(name)) return v;
  for (const ConfigAlias& a : setting_aliases())
    if (!strcmp(a.name, name))
      if (const char* v = getenv(a.old_name)) {
        if (deprecated) deprecated->push_back(a.old_name);
        return v;
      }
  return nullptr;
}
}  // namespace

bool Config::set_in_env(const char* name) const {
  for (const std::string& n : from_env)
    if (n == name) return true;
  return false;
}

namespace {
const char* table_default(const char* name) {
  for (const ConfigEntry& e : config_entries())
    if (std::string(e.name) == name) return e.def;
  return nullptr;
}
}  // namespace

const std::vector<OutsideVar>& outside_vars() {
  static const std::vector<OutsideVar> table = [] {
    std::vector<OutsideVar> v = {
        {"FI_PROVIDER", "libfabric's provider filter; a single name is the provider choice without DCCL_PROVIDER"},
        {"FI_OFI_RXM_EAGER_LIMIT", "libfabric's rxm eager size: DCCL_RXM_EAGER_BYTES sets it unless the user did"},
        {"XDG_RUNTIME_DIR", "the per-user folder for the job's secret file"},
        {"PATH", "dccl-run finds the program and the ip/tc tools through it"},
        {"MASTER_ADDR", "torchrun's store address: the rendezvous host"},
        {"MASTER_PORT", "torchrun's store port: the rendezvous listens on the next one"},
        {"SLURM_STEP_NUM_NODES", "Slurm: whether the job spans several nodes"},
        {"SLURM_NNODES", "Slurm: whether the job spans several nodes"},
        {"SLURM_JOB_NUM_NODES", "Slurm: whether the job spans several nodes"},
        {"TORCHELASTIC_RUN_ID", "a launcher's job id: seeds the DCCL_INSECURE secret"},
        {"SLURM_JOB_ID", "a launcher's job id: seeds the DCCL_INSECURE secret"},
        {"SLURM_STEP_ID", "a launcher's job id: seeds the DCCL_INSECURE secret"},
        {"OMPI_MCA_ess_base_jobid", "a launcher's job id: seeds the DCCL_INSECURE secret"},
        {"PMI_JOBID", "a launcher's job id: seeds the DCCL_INSECURE secret"},
    };
    for (const Launcher& l : launchers())
      for (const char* n : {l.rank, l.size, l.local_rank, l.local_size})
        if (n && !table_default(n)) v.push_back({n, "a launcher's rank, size, local rank or local size"});
    return v;
  }();
  return table;
}

const char* env_value(const char* name) {
  bool known = table_default(name) != nullptr;
  for (const ConfigAlias& a : setting_aliases()) known |= std::string(a.old_name) == name;
  for (const OutsideVar& o : outside_vars()) known |= std::string(o.name) == name;
  if (!known)
    raise(dcclInternalError, std::string("env_value: ") + name + " is neither a setting nor a known outside variable");
  return getenv(name);
}

std::string env_text(const char* name) {
  const char* v = env_value(name);
  return v ? v : "";
}

std::string setting_text(const char* name) {
  const char* def = table_default(name);
  if (!def) raise(dcclInternalError, std::string("setting_text: ") + name + " is not in the settings table");
  const char* env = env_or_alias(name, nullptr);
  return env ? env : def;
}

std::string provider_choice() {
  const std::string own = env_text("DCCL_PROVIDER");
  if (!own.empty()) return own;
  const std::string fi = env_text("FI_PROVIDER");
  return fi.find_first_of("^,") == std::string::npos ? fi : "";
}

std::string seconds_text(int64_t ms) {
  char buf[40];
  if (ms % 1000 == 0)
    snprintf(buf, sizeof(buf), "%lld s", static_cast<long long>(ms / 1000));
  else
    snprintf(buf, sizeof(buf), "%g s", static_cast<double>(ms) / 1000.0);
  return buf;
}

std::string timeout_text(const Config& c) {
  std::string t = seconds_text(c.timeout_ms);
  t.append(" (").append(c.timeout_from).push_back(')');
  return t;
}

const ConfigRange* config_range(const std::string& name) {
  for (const ConfigRange& r : kRanges)
    if (name == r.name) return &r;
  return nullptr;
}

namespace {
// The settings from the environment, without warnings: config() runs it before
// the log level is known.
Config read_config() {
  Config c;
#define X(field, name, type, def, help)          \
  {                                              \
    const char* env = env_or_alias(name, &c.deprecated); \
    assign(c.field, env ? env : def, name);      \
    if (env) c.from_env.push_back(name);         \
  }
  DCCL_CONFIG_TABLE(X)
#undef X
  c.provider = provider_choice();
  if (!valid_log_level(c.debug))
    raise(dcclInvalidArgument, "DCCL_DEBUG=" + c.debug + " is not a log level: use NONE, WARN, INFO or TRACE");
  if (c.peer_direct != "auto" && c.peer_direct != "0" && c.peer_direct != "1")
    raise(dcclInvalidArgument, "DCCL_PEER_DIRECT=" + c.peer_direct + " is not auto, 1 or 0");
  c.timeout_ms = c.timeout_s * 1000;
  return c;
}
}  // namespace

Config load_config() {
  Config c = read_config();
  warn_misspelled_settings();
  for (const std::string& old : c.deprecated)
    for (const ConfigAlias& a : setting_aliases())
      if (old == a.old_name) warn_deprecated(a);
  return c;
}

const Config& config() {
  static const Config c = [] {
    try {
      return read_config();
    } catch (const Error&) {
      // A bad value is reported by the call that loads the config explicitly
      // (communicator init); logging falls back to defaults here.
      Config d;
#define X(field, name, type, def, help) assign(d.field, def, name);
      DCCL_CONFIG_TABLE(X)
#undef X
      d.timeout_ms = d.timeout_s * 1000;
      return d;
    }
  }();
  return c;
}

const std::vector<ConfigEntry>& config_entries() {
  static const std::vector<ConfigEntry> entries = [] {
    std::vector<ConfigEntry> v = {
#define X(field, name, type, def, help) {name, ConfigType::type, def, help},
        DCCL_CONFIG_TABLE(X)
#undef X
    };
    static std::vector<std::string> helps;  // the numeric settings' help with their range
    helps.reserve(v.size());
    for (ConfigEntry& e : v) {
      const ConfigRange* r = config_range(e.name);
      if (r && (e.type == ConfigType::Int || e.type == ConfigType::Bytes)) {
        helps.push_back(std::string(e.help) + "; range " + range_text(*r, e.type == ConfigType::Bytes));
        e.help = helps.back().c_str();
      }
    }
    return v;
  }();
  return entries;
}

}  // namespace dccl::core
