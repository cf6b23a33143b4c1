// Connections that never present the secret cost the job nothing: a flood of
// silent connections neither keeps ranks out of the store nor floods the log;
// a rank turned away as busy retries within its timeout.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/unique_id.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

using namespace dccl::boot;
using namespace std::chrono_literals;
using dccl::core::Error;
using Clock = std::chrono::steady_clock;

namespace {

int start_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

// Keeps `n` silent connections open to `port` until stopped: each one the store
// closes is replaced at once, as an attacker would.
class Flood {
 public:
  Flood(uint16_t port, size_t n) : port_(port), fds_(n, -1) {
    thread_ = std::thread([this] { run(); });
  }
  ~Flood() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }
  uint64_t opened() const { return opened_.load(); }

 private:
  void run() {
    std::vector<pollfd> p(fds_.size());
    char buf[256];
    while (!stop_) {
      for (size_t i = 0; i < fds_.size(); ++i)
        if (fds_[i] < 0 && (fds_[i] = start_connect(port_)) >= 0) ++opened_;
      for (size_t i = 0; i < fds_.size(); ++i) p[i] = {fds_[i], POLLIN, 0};
      if (poll(p.data(), p.size(), 20) <= 0) continue;
      for (size_t i = 0; i < fds_.size(); ++i)
        if (p[i].revents != 0 && recv(fds_[i], buf, sizeof(buf), MSG_DONTWAIT) <= 0 && errno != EAGAIN) {
          close(fds_[i]);
          fds_[i] = -1;
        }
    }
  }
  uint16_t port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> opened_{0};
  std::thread thread_;
};

// Sends this process's stderr to a file while alive; lines() reads it back.
class CaptureStderr {
 public:
  CaptureStderr() {
    fflush(stderr);
    saved_ = dup(2);
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  ~CaptureStderr() { restore(); }
  void restore() {
    if (saved_ < 0) return;
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::vector<std::string> lines() {
    restore();
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    unlink(path_.c_str());
    return out;
  }

 private:
  std::string path_ = "/tmp/dccl-flood-test-" + std::to_string(getpid()) + ".log";
  int saved_ = -1;
};

}  // namespace

TEST(Flood, SilentConnectionsDoNotKeepRanksOut) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 4096);
  setrlimit(RLIMIT_NOFILE, &rl);
  StoreLimits lim;
  lim.max_connections = 64;  // the job's budget: far fewer than the flood
  lim.max_pending = 32;
  lim.hello_timeout = 500ms;
  auto server = StoreServer::start("127.0.0.1", 0, random_secret(), lim);
  const UniqueIdData id = server->id();
  CaptureStderr capture;
  auto t0 = Clock::now();
  double worst_init_ms = 0;
  {
    Flood flood(id.port, 600);
    std::this_thread::sleep_for(1s);  // the flood is at full strength
    constexpr int n = 4;
    std::atomic<int> ok{0};
    std::vector<double> init_ms(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        try {
          auto t = Clock::now();
          Bootstrap b(id, r, n, 10s);
          init_ms[static_cast<size_t>(r)] = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
          for (int k = 0; k < 3; ++k) {
            auto all = b.allgather(std::to_string(r * 10 + k));
            for (int q = 0; q < n; ++q)
              if (all[static_cast<size_t>(q)] != std::to_string(q * 10 + k)) return;
          }
          b.barrier();
          ++ok;
        } catch (const Error& e) {
          ADD_FAILURE() << e.what();
        }
      });
    for (auto& t : ts) t.join();
    EXPECT_EQ(ok.load(), n);
    for (double ms : init_ms) worst_init_ms = std::max(worst_init_ms, ms);
    std::this_thread::sleep_for(1s);  // the flood goes on a while longer
    EXPECT_GT(flood.opened(), 600u) << "the store closed none of the silent connections";
    printf("flood: %llu connections opened\n", static_cast<unsigned long long>(flood.opened()));
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<std::string> lines = capture.lines();
  size_t warns = 0;
  bool counted = false;
  for (const auto& l : lines) {
    if (l.find("DCCL WARN") == std::string::npos) continue;
    ++warns;
    counted = counted || l.find("suppressed") != std::string::npos || l.find("unauthenticated connection(s)") !=
                                                                          std::string::npos;
  }
  printf("flood: %.1f s, worst rank init %.0f ms, %zu WARN lines\n", secs, worst_init_ms, warns);
  EXPECT_LT(worst_init_ms, 5000);
  // One line per second per kind of complaint (about three kinds), with counts.
  EXPECT_LE(static_cast<double>(warns), 4 * (secs + 1)) << "log flooded: " << warns << " lines";
  EXPECT_TRUE(counted) << "the suppressed lines are not counted";
}

// A rank turned away because the store is at its connection limit comes back
// within its timeout, and gets in once a slot frees.
TEST(Flood, BusyStoreIsRetried) {
  StoreLimits lim;
  lim.max_connections = 2;
  auto server = StoreServer::start("127.0.0.1", 0, random_secret(), lim);
  const UniqueIdData id = server->id();
  Bootstrap a(id, 0, 3, 5s);
  auto b = std::make_unique<Bootstrap>(id, 1, 3, 5s);
  std::thread freer([&] {
    std::this_thread::sleep_for(300ms);
    b.reset();
  });
  auto t0 = Clock::now();
  Bootstrap c(id, 2, 3, 5s);
  EXPECT_GE(Clock::now() - t0, 250ms);
  freer.join();
  c.set("k", "v");
  EXPECT_EQ(a.get("k"), "v");
}

TEST(LogLimiter, OneLinePerIntervalWithCounts) {
  dccl::core::LogLimiter lim(100ms);
  uint64_t held = 99;
  EXPECT_TRUE(lim.allow(&held));
  EXPECT_EQ(held, 0u);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(lim.allow(&held));
  EXPECT_EQ(lim.take_suppressed(), 0u);  // the interval has not passed
  std::this_thread::sleep_for(120ms);
  EXPECT_EQ(lim.take_suppressed(), 1000u);
  EXPECT_FALSE(lim.allow(&held));  // take_suppressed started a new interval
  std::this_thread::sleep_for(120ms);
  EXPECT_TRUE(lim.allow(&held));
  EXPECT_EQ(held, 1u);
}
