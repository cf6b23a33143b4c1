// DCCL_* settings: the value parsers and load_config() over the environment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"

namespace {

using dccl::core::Config;
using dccl::core::env_text;
using dccl::core::env_value;
using dccl::core::Error;
using dccl::core::provider_choice;
using dccl::core::load_config;
using dccl::core::parse_bool;
using dccl::core::parse_bytes;
using dccl::core::parse_int;

// The code an expression throws with (dcclSuccess when it does not throw).
dcclResult_t code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dccl::core::Error& e) {
    return e.code();
  }
  return dcclSuccess;
}

TEST(ParseBytes, PlainAndSuffixes) {
  EXPECT_EQ(0u, parse_bytes("0", "X"));
  EXPECT_EQ(4096u, parse_bytes("4096", "X"));
  EXPECT_EQ(10u, parse_bytes("10B", "X"));
  EXPECT_EQ(4096u, parse_bytes("4K", "X"));
  EXPECT_EQ(4096u, parse_bytes("4k", "X"));
  EXPECT_EQ(4096u, parse_bytes("4KB", "X"));
  EXPECT_EQ(4096u, parse_bytes("4KiB", "X"));
  EXPECT_EQ(uint64_t{1} << 20, parse_bytes("1M", "X"));
  EXPECT_EQ(uint64_t{3} << 20, parse_bytes("3MiB", "X"));
  EXPECT_EQ(uint64_t{2} << 30, parse_bytes("2G", "X"));
  EXPECT_EQ(uint64_t{16} << 30, parse_bytes("16GB", "X"));
  EXPECT_EQ(UINT64_MAX, parse_bytes("18446744073709551615", "X"));
  EXPECT_EQ(uint64_t{17179869183} << 30, parse_bytes("17179869183G", "X"));  // largest that fits
}

TEST(ParseBytes, RejectsBadText) {
  for (const char* bad : {"", "abc", "K", "4X", "4T", "4 M", "4MM", "1.5M", "0x10", "-1", "-4K",
                          " -5", "\t-5", "+-5", "18446744073709551616", "17179869184G",
                          "99999999999999999999999K", "4K ", "4\n"}) {
    EXPECT_EQ(dcclInvalidArgument, code_of([&] { parse_bytes(bad, "DCCL_X"); })) << "'" << bad << "'";
  }
}

TEST(ParseBytes, ErrorNamesTheSetting) {
  try {
    parse_bytes("4X", "DCCL_CHUNK_BYTES");
    FAIL() << "no throw";
  } catch (const dccl::core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("DCCL_CHUNK_BYTES"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("4X"), std::string::npos) << e.what();
  }
}

TEST(ParseInt, Values) {
  EXPECT_EQ(0, parse_int("0", "X"));
  EXPECT_EQ(42, parse_int("42", "X"));
  EXPECT_EQ(-3, parse_int("-3", "X"));
  EXPECT_EQ(INT64_MAX, parse_int("9223372036854775807", "X"));
  EXPECT_EQ(INT64_MIN, parse_int("-9223372036854775808", "X"));
  for (const char* bad : {"", "abc", "12abc", "1.5", "4K", "9223372036854775808",
                          "-9223372036854775809", "0x", "5 "}) {
    EXPECT_EQ(dcclInvalidArgument, code_of([&] { parse_int(bad, "DCCL_X"); })) << "'" << bad << "'";
  }
}

TEST(ParseBool, Values) {
  for (const char* t : {"1", "true", "yes", "on"}) EXPECT_TRUE(parse_bool(t, "X")) << t;
  for (const char* f : {"0", "false", "no", "off", ""}) EXPECT_FALSE(parse_bool(f, "X")) << f;
  for (const char* bad : {"2", "maybe", "-1", "truee", " 1"}) {
    EXPECT_EQ(dcclInvalidArgument, code_of([&] { parse_bool(bad, "DCCL_X"); })) << "'" << bad << "'";
  }
}

// Clears every variable load_config reads (and FI_PROVIDER) for the test,
// and puts the original values back afterwards.
class LoadConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& e : dccl::core::config_entries()) save(e.name);
    save("FI_PROVIDER");
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  void save(const std::string& name) {
    const char* v = getenv(name.c_str());
    saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
    unsetenv(name.c_str());
  }
  static dcclResult_t load_with(const char* name, const char* value) {
    setenv(name, value, 1);
    const dcclResult_t r = code_of([] { load_config(); });
    unsetenv(name);
    return r;
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(LoadConfig, Defaults) {
  const Config c = load_config();
  EXPECT_EQ("WARN", c.debug);
  EXPECT_EQ(600, c.timeout_s);
  EXPECT_EQ("", c.provider);
  EXPECT_EQ("", c.algo);
  EXPECT_EQ(0u, c.chunk_bytes);
  EXPECT_EQ("auto", c.peer_direct);
  EXPECT_EQ(uint64_t{1} << 20, c.staging_slot_bytes);
  EXPECT_EQ(4, c.staging_slots);
  EXPECT_FALSE(c.stats);
  EXPECT_FALSE(c.check);
  EXPECT_EQ(50, c.spin_us);
  EXPECT_EQ(-1, c.rank);
  EXPECT_EQ(-1, c.world_size);
}

TEST_F(LoadConfig, ReadsEnvironment) {
  setenv("DCCL_DEBUG", "INFO", 1);
  setenv("DCCL_TIMEOUT_S", "30", 1);
  setenv("DCCL_ALGO", "allreduce:ring", 1);
  setenv("DCCL_CHUNK_BYTES", "512K", 1);
  setenv("DCCL_PEER_DIRECT", "0", 1);
  setenv("DCCL_STAGING_SLOT_BYTES", "2M", 1);
  setenv("DCCL_STAGING_SLOTS", "2", 1);
  setenv("DCCL_STATS", "1", 1);
  setenv("DCCL_CHECK", "yes", 1);
  setenv("DCCL_RANK", "3", 1);
  setenv("DCCL_WORLD_SIZE", "8", 1);
  setenv("DCCL_ADDR", "10.0.0.1:29500", 1);
  const Config c = load_config();
  EXPECT_EQ("INFO", c.debug);
  EXPECT_EQ(30, c.timeout_s);
  EXPECT_EQ("allreduce:ring", c.algo);
  EXPECT_EQ(512u * 1024, c.chunk_bytes);
  EXPECT_EQ("0", c.peer_direct);
  EXPECT_EQ(uint64_t{2} << 20, c.staging_slot_bytes);
  EXPECT_EQ(2, c.staging_slots);
  EXPECT_TRUE(c.stats);
  EXPECT_TRUE(c.check);
  EXPECT_EQ(3, c.rank);
  EXPECT_EQ(8, c.world_size);
  EXPECT_EQ("10.0.0.1:29500", c.addr);
}

TEST_F(LoadConfig, ProviderFallsBackToFiProvider) {
  setenv("FI_PROVIDER", "tcp", 1);
  EXPECT_EQ("tcp", load_config().provider);
  setenv("DCCL_PROVIDER", "shm", 1);
  EXPECT_EQ("shm", load_config().provider);  // DCCL_PROVIDER wins
  setenv("DCCL_PROVIDER", "", 1);
  EXPECT_EQ("tcp", load_config().provider);  // empty counts as unset
  setenv("FI_PROVIDER", "^shm", 1);  // libfabric's filters choose no provider
  EXPECT_EQ("", load_config().provider);
  setenv("FI_PROVIDER", "tcp,shm", 1);
  EXPECT_EQ("", load_config().provider);
  EXPECT_EQ("", provider_choice());
  setenv("FI_PROVIDER", "psm3", 1);
  EXPECT_EQ("psm3", provider_choice());
  unsetenv("FI_PROVIDER");
  EXPECT_EQ("", load_config().provider);
}

TEST_F(LoadConfig, EnvironmentOnlyThroughTheTables) {
  setenv("FI_PROVIDER", "tcp", 1);
  EXPECT_STREQ("tcp", env_value("FI_PROVIDER"));
  unsetenv("FI_PROVIDER");
  EXPECT_EQ(nullptr, env_value("FI_PROVIDER"));
  EXPECT_EQ("", env_text("SLURM_LOCALID"));  // a launcher's variable
  EXPECT_THROW(env_value("HOME"), Error);    // neither a setting nor an outside variable
}

TEST_F(LoadConfig, RejectsBadValues) {
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_TIMEOUT_S", "0"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_TIMEOUT_S", "-5"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_TIMEOUT_S", "ten"));
  EXPECT_EQ(dcclSuccess, load_with("DCCL_TIMEOUT_S", "1"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_STAGING_SLOTS", "1"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_STAGING_SLOTS", "0"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_STAGING_SLOTS", "-2"));
  EXPECT_EQ(dcclSuccess, load_with("DCCL_STAGING_SLOTS", "2"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_STAGING_SLOT_BYTES", "1K"));
  EXPECT_EQ(dcclSuccess, load_with("DCCL_STAGING_SLOT_BYTES", "4K"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_CHUNK_BYTES", "-1"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_CHUNK_BYTES", "lots"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_STATS", "sometimes"));
  EXPECT_EQ(dcclInvalidArgument, load_with("DCCL_RANK", "three"));
  EXPECT_EQ(dcclSuccess, load_with("DCCL_DEBUG", "TRACE"));
}

// Values that parse but would overflow the arithmetic done with them (deadlines,
// sizes) are refused at init, naming the setting and the allowed range.
TEST_F(LoadConfig, RejectsValuesOutsideTheirRange) {
  struct Case {
    const char* name;
    const char* value;
    const char* says;  // part of the message
  };
  for (const Case& k : std::vector<Case>{
           {"DCCL_TIMEOUT_S", "9999999999", "31536000 (one year)"},
           {"DCCL_TIMEOUT_S", "9223372036854775807", "DCCL_TIMEOUT_S=9223372036854775807"},
           {"DCCL_TIMEOUT_S", "31536001", "out of range"},
           {"DCCL_SEGMENT_BYTES", "18446744073709551615", "DCCL_SEGMENT_BYTES"},
           {"DCCL_SEGMENT_CHUNK_BYTES", "1G", "256M"},
           {"DCCL_CHUNK_BYTES", "17179869183G", "DCCL_CHUNK_BYTES"},
           {"DCCL_STAGING_SLOT_BYTES", "16G", "4K to 1G"},
           {"DCCL_STAGING_SLOTS", "1000000", "2 to 1024"},
           {"DCCL_REG_CACHE_BYTES", "18446744073709551615", "16T"},
           {"DCCL_RXM_EAGER_BYTES", "4G", "DCCL_RXM_EAGER_BYTES"},
           {"DCCL_SPIN_US", "-1", "DCCL_SPIN_US"},
           {"DCCL_SPIN_US", "9223372036854775807", "DCCL_SPIN_US"},
           {"DCCL_RANK", "-2", "DCCL_RANK"},
           {"DCCL_WORLD_SIZE", "9999999999", "16777216"},
       }) {
    SCOPED_TRACE(std::string(k.name) + "=" + k.value);
    setenv(k.name, k.value, 1);
    try {
      load_config();
      ADD_FAILURE() << "accepted";
    } catch (const dccl::core::Error& e) {
      EXPECT_EQ(dcclInvalidArgument, e.code());
      EXPECT_NE(std::string(e.what()).find(k.name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(k.says), std::string::npos) << e.what();
    }
    unsetenv(k.name);
  }
  EXPECT_EQ(dcclSuccess, load_with("DCCL_TIMEOUT_S", "31536000"));
  EXPECT_EQ(dcclSuccess, load_with("DCCL_SEGMENT_BYTES", "256M"));
  EXPECT_EQ(dcclSuccess, load_with("DCCL_RANK", "-1"));
}

TEST_F(LoadConfig, RejectsUnknownLogLevels) {
  for (const char* bad : {"LOUD", "VERBOSE", "warn ", "1"}) {
    setenv("DCCL_DEBUG", bad, 1);
    try {
      load_config();
      ADD_FAILURE() << "DCCL_DEBUG=" << bad << " accepted";
    } catch (const dccl::core::Error& e) {
      EXPECT_EQ(dcclInvalidArgument, e.code());
      EXPECT_NE(std::string(e.what()).find("DCCL_DEBUG=" + std::string(bad)), std::string::npos) << e.what();
    }
  }
  for (const char* good : {"NONE", "off", "Warn", "INFO", "trace"}) EXPECT_EQ(dcclSuccess, load_with("DCCL_DEBUG", good));
}

TEST_F(LoadConfig, ErrorNamesTheVariable) {
  setenv("DCCL_SPIN_US", "fast", 1);
  try {
    load_config();
    FAIL() << "no throw";
  } catch (const dccl::core::Error& e) {
    EXPECT_EQ(dcclInvalidArgument, e.code());
    EXPECT_NE(std::string(e.what()).find("DCCL_SPIN_US"), std::string::npos) << e.what();
  }
}

TEST(ConfigEntries, TableIsWellFormed) {
  const auto& entries = dccl::core::config_entries();
  ASSERT_FALSE(entries.empty());
  std::set<std::string> names;
  for (const auto& e : entries) {
    const std::string name = e.name;
    EXPECT_EQ(0u, name.rfind("DCCL_", 0)) << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
    EXPECT_NE(nullptr, e.def) << name;
    EXPECT_GT(std::string(e.help).size(), 5u) << name;
    // Every default parses as its declared type.
    switch (e.type) {
      case dccl::core::ConfigType::Int: EXPECT_NO_THROW(parse_int(e.def, e.name)) << name; break;
      case dccl::core::ConfigType::Bytes: EXPECT_NO_THROW(parse_bytes(e.def, e.name)) << name; break;
      case dccl::core::ConfigType::Bool: EXPECT_NO_THROW(parse_bool(e.def, e.name)) << name; break;
      case dccl::core::ConfigType::Str: break;
    }
  }
  EXPECT_TRUE(names.count("DCCL_TIMEOUT_S"));
  EXPECT_TRUE(names.count("DCCL_PROVIDER"));
  EXPECT_TRUE(names.count("DCCL_STAGING_SLOTS"));
}

// Every numeric setting states its range (config_table.hpp's DCCL_CONFIG_RANGES),
// its default lies in it, and its help shows it.
TEST(ConfigEntries, EveryNumericSettingHasARange) {
  for (const auto& e : dccl::core::config_entries()) {
    if (e.type != dccl::core::ConfigType::Int && e.type != dccl::core::ConfigType::Bytes) continue;
    const dccl::core::ConfigRange* r = dccl::core::config_range(e.name);
    ASSERT_NE(nullptr, r) << e.name << " has no range in DCCL_CONFIG_RANGES";
    EXPECT_LE(static_cast<uint64_t>(std::max<int64_t>(r->min, 0)), r->max) << e.name;
    if (e.type == dccl::core::ConfigType::Int) {
      const int64_t d = parse_int(e.def, e.name);
      EXPECT_TRUE(d >= r->min && (d < 0 || static_cast<uint64_t>(d) <= r->max)) << e.name;
    } else {
      const uint64_t d = parse_bytes(e.def, e.name);
      EXPECT_TRUE(d <= r->max && (r->min <= 0 || d >= static_cast<uint64_t>(r->min))) << e.name;
    }
    EXPECT_NE(std::string(e.help).find("; range "), std::string::npos) << e.name << ": " << e.help;
  }
}

TEST(ConfigSnapshot, NeverThrows) {
  // config() is the process-wide snapshot; a bad value must not make it throw
  // (communicator init reports it through load_config instead).
  EXPECT_NO_THROW(dccl::core::config());
  EXPECT_GT(dccl::core::config().timeout_s, 0);
}

}  // namespace
