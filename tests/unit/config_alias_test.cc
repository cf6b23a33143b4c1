// Renamed settings and algorithm names keep working (core/config_aliases.hpp): a
// deprecated setting name sets the setting when its current name is not set, is
// warned about once per process, and a deprecated algorithm name in DCCL_ALGO picks
// the algorithm's current name. Lines naming a deprecated name say so, so that
// renames of the current names leave them as they are.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "tune/algo_table.hpp"
#include "tune/plan.hpp"
#include "tune/tuner.hpp"

using dccl::core::Config;
using dccl::core::load_config;

namespace {
bool in_table(const std::string& name) {
  for (const dccl::core::ConfigEntry& e : dccl::core::config_entries())
    if (name == e.name) return true;
  return false;
}

// Unsets the named variables for the test's span and puts them back after.
class Unset {
 public:
  explicit Unset(std::vector<std::string> names) {
    for (const std::string& n : names) {
      const char* v = getenv(n.c_str());
      saved_[n] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(n.c_str());
    }
  }
  ~Unset() {
    for (const auto& [n, v] : saved_)
      if (v) setenv(n.c_str(), v->c_str(), 1);
      else unsetenv(n.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST(ConfigAlias, EveryAliasNamesACurrentSetting) {
  for (const dccl::core::ConfigAlias& a : dccl::core::setting_aliases()) {
    EXPECT_TRUE(in_table(a.name)) << a.name;
    EXPECT_FALSE(in_table(a.old_name)) << a.old_name << " is deprecated yet still in the table";
  }
}

TEST(ConfigAlias, DeprecatedSegmentSettingsAreReadAndWarnedOnce) {
  Unset env({"DCCL_SMEM_BYTES", "DCCL_SMEM_CHUNK_BYTES", "DCCL_SEGMENT_BYTES", "DCCL_SEGMENT_CHUNK_BYTES", "DCCL_DEBUG"});  // deprecated names too
  setenv("DCCL_SMEM_BYTES", "8K", 1);           // deprecated name
  setenv("DCCL_SMEM_CHUNK_BYTES", "128K", 1);   // deprecated name
  testing::internal::CaptureStderr();
  const Config c = load_config();
  const Config again = load_config();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.segment_bytes, 8u * 1024);
  EXPECT_EQ(c.segment_chunk_bytes, 128u * 1024);
  EXPECT_EQ(again.segment_chunk_bytes, 128u * 1024);
  // Recorded under the current name, so that "set in the environment" holds for it.
  EXPECT_TRUE(c.set_in_env("DCCL_SEGMENT_CHUNK_BYTES"));
  // One warning per deprecated name, however often the settings are read.
  EXPECT_EQ(count(err, "DCCL_SMEM_BYTES is deprecated: use DCCL_SEGMENT_BYTES"), 1) << err;
  EXPECT_EQ(count(err, "DCCL_SMEM_CHUNK_BYTES is deprecated: use DCCL_SEGMENT_CHUNK_BYTES"), 1) << err;
  EXPECT_EQ(c.deprecated, (std::vector<std::string>{"DCCL_SMEM_BYTES", "DCCL_SMEM_CHUNK_BYTES"}));  // deprecated

  // The current name wins over the deprecated one.
  setenv("DCCL_SEGMENT_BYTES", "16K", 1);
  EXPECT_EQ(load_config().segment_bytes, 16u * 1024);
  // A bad value under the deprecated name is refused as under the current one.
  unsetenv("DCCL_SEGMENT_BYTES");
  setenv("DCCL_SMEM_BYTES", "lots", 1);  // deprecated name
  EXPECT_THROW(load_config(), dccl::core::Error);
}

TEST(ConfigAlias, DeprecatedAlgorithmNamesPickTheCurrentOnes) {
  Config cfg;
  cfg.algo = "allreduce:smem_rs,allgather:smem";  // deprecated names
  cfg.segment_bytes = 64 * 1024;
  cfg.segment_chunk_bytes = 256 * 1024;
  cfg.hier = true;
  cfg.spin_us = 50;
  // 8 bytes: without the override, the one-shot through the segment and Bruck.
  testing::internal::CaptureStderr();
  const dccl::tune::Tuner t(dccl::tune::make_plan({.nranks = 4, .nhosts = 1, .local_size = 4, .provider = "shm"}, cfg));
  const std::string err = testing::internal::GetCapturedStderr();
  // The warning says where the old name came from.
  EXPECT_EQ(count(err, "DCCL_ALGO: the algorithm smem_rs is deprecated: use segment_rs"), 1) << err;  // deprecated
  EXPECT_EQ(t.choose(dccl::tune::Coll::AllReduce, 8, 4).algo, dccl::tune::Algo::SegmentRs);
  EXPECT_EQ(t.choose(dccl::tune::Coll::AllGather, 8, 4).algo, dccl::tune::Algo::Segment);
  cfg.algo = "";
  const dccl::tune::Tuner plain(dccl::tune::make_plan({.nranks = 4, .nhosts = 1, .local_size = 4, .provider = "shm"}, cfg));
  EXPECT_EQ(plain.choose(dccl::tune::Coll::AllReduce, 8, 4).algo, dccl::tune::Algo::Segment);
  EXPECT_EQ(plain.choose(dccl::tune::Coll::AllGather, 8, 4).algo, dccl::tune::Algo::Bruck);
  EXPECT_NO_THROW(dccl::tune::check_algo_override("allreduce:smem"));  // deprecated name
  EXPECT_THROW(dccl::tune::check_algo_override("allreduce:smem_no"), dccl::core::Error);
  // Help texts list the current names only.
  EXPECT_EQ(dccl::tune::algo_list_text().find("smem"), std::string::npos);  // deprecated name
}

// A DCCL_* variable one or two letters away from a setting is named with the setting
// it is like; settings, deprecated names, launcher variables and names far from every
// known one are not.
TEST(MisspelledSettings, NearMissesAreNamed) {
  const char* env[] = {"DCCL_TIMOUT_S=5",       "DCCL_NET_FLOW=3",  "DCCL_TIMEOUT_S=5", "DCCL_SMEM_BYTES=1M",
                       "DCCL_LOCAL_RANK=0",     "DCCL_MY_SCRIPTS_OWN_SETTING=1",    "PATH=/bin",
                       "DCCL_RECORDER_DIRS=/x", "DCCL_EMPTY",       nullptr};
  const auto got = dccl::core::misspelled_settings(const_cast<char* const*>(env));
  const std::vector<std::pair<std::string, std::string>> want = {{"DCCL_TIMOUT_S", "DCCL_TIMEOUT_S"},
                                                                 {"DCCL_NET_FLOW", "DCCL_NET_FLOWS"},
                                                                 {"DCCL_RECORDER_DIRS", "DCCL_RECORDER_DIR"}};
  EXPECT_EQ(got, want);
}
