// A bad DCCL_* setting at init: the error names the rank, the init call, the
// variable and its value (dcclCommInitRank, dcclCommInitRankConfig,
// dcclCommInitFromEnv), and no communicator is returned.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dccl/dccl.h"
#include "rank_threads.hpp"

namespace {

[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new ShmApiEnv("10"));

struct SetEnv {
  const char* name;
  SetEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~SetEnv() { unsetenv(name); }
};

// "rank 0: <call>: DCCL_X..." (a setting read at the call), or "rank 0: init: DCCL_ALGO..."
// (read where the communicator is made, before its store or transport).
void expect_names(const std::string& text, const std::string& call, const std::string& setting) {
  const bool named = text.rfind("rank 0: " + call + ": " + setting, 0) == 0 ||
                     text.rfind("rank 0: init: " + setting, 0) == 0;
  EXPECT_TRUE(named) << call << ": " << text;
}

dcclUniqueId fresh_id() {
  dcclUniqueId id;
  EXPECT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
  return id;
}

TEST(ApiEnv, BadSettingNamesRankCallAndVariable) {
  struct Case {
    const char* var;
    const char* value;
  } cases[] = {{"DCCL_NET_FLOWS", "abc"}, {"DCCL_TIMEOUT_S", "0"}, {"DCCL_ALGO", "nonsense"}};
  for (const Case& c : cases) {
    SetEnv bad(c.var, c.value);
    const std::string setting = c.var;
    dcclComm_t comm = nullptr;
    EXPECT_EQ(dcclCommInitRank(&comm, 1, fresh_id(), 0), dcclInvalidArgument) << c.var;
    EXPECT_EQ(comm, nullptr);
    expect_names(last_error(), "dcclCommInitRank", setting);
    dcclConfig_t cfg = DCCL_CONFIG_INITIALIZER;
    EXPECT_EQ(dcclCommInitRankConfig(&comm, 1, fresh_id(), 0, &cfg), dcclInvalidArgument) << c.var;
    expect_names(last_error(), "dcclCommInitRankConfig", setting);
    SetEnv rank("DCCL_RANK", "0"), size("DCCL_WORLD_SIZE", "1");
    EXPECT_EQ(dcclCommInitFromEnv(&comm), dcclInvalidArgument) << c.var;
    EXPECT_EQ(comm, nullptr);
    expect_names(last_error(), "dcclCommInitFromEnv", setting);
  }
}

}  // namespace
