// Unit tests of the C API with ranks as threads of this process: run f(rank) on
// one thread per rank, read this thread's last error text, destroy the ranks.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"

// The C API tests' environment: every rank talks over shm and a wait gives up
// after `timeout_s` seconds. Register once per binary:
//   ::testing::AddGlobalTestEnvironment(new ShmApiEnv("20"));
class ShmApiEnv : public ::testing::Environment {
 public:
  explicit ShmApiEnv(const char* timeout_s) : timeout_s_(timeout_s) {}
  void SetUp() override {
    setenv("DCCL_TIMEOUT_S", timeout_s_, 1);
    setenv("DCCL_PROVIDER", "shm", 1);
  }

 private:
  const char* timeout_s_;
};

// Runs f(rank) on one thread per rank and joins them.
inline void on_ranks(int n, const std::function<void(int)>& f) {
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(f, r);
  for (auto& t : ts) t.join();
}

inline std::string last_error(dcclComm_t comm = nullptr) {
  return dcclGetLastError(comm) ? dcclGetLastError(comm) : "(null)";
}

// Destroys every rank's communicator (null ones are skipped), each on its own thread.
inline void destroy_all(const std::vector<dcclComm_t>& cs) {
  on_ranks(static_cast<int>(cs.size()), [&](int r) {
    if (cs[static_cast<size_t>(r)]) {
      EXPECT_EQ(dcclCommDestroy(cs[static_cast<size_t>(r)]), dcclSuccess) << last_error();
    }
  });
}
