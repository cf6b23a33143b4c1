// Typed view of the DCCL_* settings (see config_table.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/config_table.hpp"

namespace dccl::core {

enum class ConfigType { Str, Int, Bytes, Bool };

struct ConfigEntry {
  const char* name;
  ConfigType type;
  const char* def;
  const char* help;  // for Int and Bytes settings, ends with the range
};

// The values an Int or Bytes setting accepts (config_table.hpp's DCCL_CONFIG_RANGES).
struct ConfigRange {
  const char* name;
  int64_t min;
  uint64_t max;
};
// Null when the setting has no range (a Str or Bool setting, or a table omission).
const ConfigRange* config_range(const std::string& name);

struct Config {
#define DCCL_CFG_FIELD_Str std::string
#define DCCL_CFG_FIELD_Int int64_t
#define DCCL_CFG_FIELD_Bytes uint64_t
#define DCCL_CFG_FIELD_Bool bool
#define X(field, name, type, def, help) DCCL_CFG_FIELD_##type field{};
  DCCL_CONFIG_TABLE(X)
#undef X
  // Every blocking wait's bound: timeout_s in ms, unless a communicator's
  // dcclConfig_t set it; timeout_from names where it came from, for messages.
  int64_t timeout_ms = 0;
  const char* timeout_from = "DCCL_TIMEOUT_S";
  std::vector<std::string> from_env;  // the settings the environment set
  std::vector<std::string> deprecated;  // deprecated names the environment used for them
  bool set_in_env(const char* name) const;
};

// A renamed setting or algorithm name that is still accepted (core/config_aliases.hpp).
struct ConfigAlias {
  const char* old_name;
  const char* name;
};
const std::vector<ConfigAlias>& setting_aliases();
const std::vector<ConfigAlias>& algo_aliases();
// Logs "OLD is deprecated: use NEW" once per process and alias; `where` comes first
// ("DCCL_ALGO: the algorithm " for an algorithm name).
void warn_deprecated(const ConfigAlias& a, const char* where = "");

// A table setting's text: the environment's value, else the table's default (the
// few settings read without a communicator's Config: the bootstrap interface, the
// sim backend's dma-buf, the local rank). Throws dcclInternalError for a name that
// is not in the table.
std::string setting_text(const char* name);

// A variable the project reads that is not one of its settings: libfabric's,
// a launcher's (core/launcher.hpp) or the system's; `why` says what it is read for.
struct OutsideVar {
  const char* name;
  const char* why;
};
const std::vector<OutsideVar>& outside_vars();
// The environment's value of a setting or an outside variable, null when unset
// (the environment's own string, as getenv): the one place the environment is
// read. Throws dcclInternalError for any other name.
const char* env_value(const char* name);
// env_value as text, "" when unset.
std::string env_text(const char* name);
// The provider the user chose, under one rule: DCCL_PROVIDER, else FI_PROVIDER
// when it names a single provider ("tcp"; a libfabric filter such as "^shm" or
// "tcp,shm" chooses none). "" when there is no choice.
std::string provider_choice();
// "600 s (DCCL_TIMEOUT_S)", "1.5 s (dcclConfig_t.timeoutMs)": a bound as errors state it.
std::string timeout_text(const Config& c);
// Milliseconds as seconds: "600 s", "1.5 s", "0.25 s".
std::string seconds_text(int64_t ms);

// DCCL_* variables of `env` (an environ-style list) that are no setting or known
// variable but within two letters of one: (name, the known name it is like).
std::vector<std::pair<std::string, std::string>> misspelled_settings(char* const* env);
// Logs each of the process environment's misspelled settings once per process.
void warn_misspelled_settings();

// Read from the environment once per call; throws Error(dcclInvalidArgument) on a
// bad value (unparsable, outside its range, an unknown DCCL_DEBUG level), naming the setting.
Config load_config();
// Process-wide snapshot taken on first use.
const Config& config();
const std::vector<ConfigEntry>& config_entries();

// "4M" -> 4194304; accepts K, M, G (binary) and plain numbers. Throws on bad text.
uint64_t parse_bytes(const std::string& text, const char* what);
int64_t parse_int(const std::string& text, const char* what);
bool parse_bool(const std::string& text, const char* what);

}  // namespace dccl::core
