#include "core/config.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "tune/algo_table.hpp"

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
void assign(std::string& f, const std::string& v, const char*) { f = v; }
void assign(int64_t& f, const std::string& v, const char* n) { f = parse_int(v, n); }
void assign(uint64_t& f, const std::string& v, const char* n) { f = parse_bytes(v, n); }
void assign(bool& f, const std::string& v, const char* n) { f = parse_bool(v, n); }
}  // namespace

Config load_config() {
  Config c;
#define X(field, name, type, def, help)          \
  {                                              \
    const char* env = getenv(name);              \
    assign(c.field, env ? env : def, name);      \
  }
  DCCL_CONFIG_TABLE(X)
#undef X
  if (c.provider.empty()) {
    if (const char* fp = getenv("FI_PROVIDER")) c.provider = fp;
  }
  if (c.timeout_s <= 0) raise(dcclInvalidArgument, "DCCL_TIMEOUT_S must be positive");
  if (c.staging_slots < 2) raise(dcclInvalidArgument, "DCCL_STAGING_SLOTS must be at least 2");
  if (c.staging_slot_bytes < 4096) raise(dcclInvalidArgument, "DCCL_STAGING_SLOT_BYTES must be at least 4K");
  return c;
}

const Config& config() {
  static const Config c = [] {
    try {
      return load_config();
    } catch (const Error&) {
      // A bad value is reported by the call that loads the config explicitly
      // (communicator init); logging falls back to defaults here.
      Config d;
#define X(field, name, type, def, help) assign(d.field, def, name);
      DCCL_CONFIG_TABLE(X)
#undef X
      return d;
    }
  }();
  return c;
}

const std::vector<ConfigEntry>& config_entries() {
  // DCCL_ALGO's help lists the algorithms from the one table of them.
  static const std::string algo_help = std::string("Force an algorithm, for every collective that has it (ring) or per "
                                                   "collective (allreduce:rhd,broadcast:tree). Known: ") +
                                       tune::algo_list_text();
  static const std::vector<ConfigEntry> entries = [] {
    std::vector<ConfigEntry> v = {
#define X(field, name, type, def, help) {name, ConfigType::type, def, help},
        DCCL_CONFIG_TABLE(X)
#undef X
    };
    for (ConfigEntry& e : v)
      if (std::string(e.name) == "DCCL_ALGO") e.help = algo_help.c_str();
    return v;
  }();
  return entries;
}

}  // namespace dccl::core
