// Unit tests of the C API with ranks as threads of this process: run f(rank) on
// one thread per rank, read this thread's last error text, destroy the ranks,
// check a refusal's code and text, check that allreduce works on every rank.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

// A refused call: its code, and this thread's last error naming `word`.
inline void expect_code(dcclResult_t got, dcclResult_t want, const std::string& word, const char* what) {
  EXPECT_EQ(got, want) << what;
  EXPECT_NE(last_error().find(word), std::string::npos)
      << what << ": last error '" << last_error() << "' does not name " << word;
}

// Every rank all-reduces rank-dependent int32 and float data (on a stream of its
// own when on_stream); results are compared with references computed here.
inline void expect_allreduce_works(const std::vector<dcclComm_t>& cs, bool on_stream = false) {
  const int n = static_cast<int>(cs.size());
  const size_t count = 1027;
  on_ranks(n, [&](int r) {
    dcclComm_t c = cs[static_cast<size_t>(r)];
    dcclStream_t s = nullptr;
    if (on_stream && dcclStreamCreate(&s) != dcclSuccess) FAIL() << last_error();
    std::vector<int32_t> ii(count), io(count, -1);
    std::vector<float> fi(count), fo(count, -1.0f);
    for (size_t i = 0; i < count; ++i) {
      ii[i] = static_cast<int32_t>(i * 7) - 1000 * r + 3;
      fi[i] = 0.25f * static_cast<float>(i % 97) + 1.5f * static_cast<float>(r);
    }
    EXPECT_EQ(dcclAllReduce(ii.data(), io.data(), count, dcclInt32, dcclSum, c, s), dcclSuccess) << last_error(c);
    EXPECT_EQ(dcclAllReduce(fi.data(), fo.data(), count, dcclFloat32, dcclSum, c, s), dcclSuccess) << last_error(c);
    if (s) {
      EXPECT_EQ(dcclStreamSynchronize(s), dcclSuccess) << last_error(c);
      EXPECT_EQ(dcclStreamDestroy(s), dcclSuccess) << last_error();
    }
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      int64_t iref = 0;
      double fref = 0;
      for (int q = 0; q < n; ++q) {
        iref += static_cast<int64_t>(i * 7) - 1000 * q + 3;
        fref += 0.25 * static_cast<double>(i % 97) + 1.5 * q;
      }
      if (io[i] != iref || std::abs(fo[i] - fref) > 1e-5 * (1 + std::abs(fref))) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "rank " << r << " of " << n << ": wrong allreduce sums";
  });
}
