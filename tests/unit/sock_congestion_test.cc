// The socket path's congestion control (DCCL_NET_TCP_CONGESTION,
// net/sock/sock_path.hpp): a pair on one host does not pace, whatever the system's
// default; "system" keeps that default; a name sets it on every connection; a name
// the kernel refuses fails with the setting and the reason named.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/socket.hpp"
#include "net/sock/sock_path.hpp"
#include "sock_pair.hpp"

namespace dccl::net {
namespace {

// The system's default, as new connections get it.
std::string system_default() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  in >> name;
  return name;
}

bool settable(const std::string& name) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const bool ok = fd >= 0 && sock::set_congestion(fd, name) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

// Two SockPaths over loopback with `policy` (nullptr: as constructed); returns what
// each end's connection uses.
std::pair<std::string, std::string> connected(const char* policy) {
  SockPath a(0, 1 << 20, std::chrono::milliseconds(10000), {"127.0.0.1"});
  SockPath b(1, 1 << 20, std::chrono::milliseconds(10000), {"127.0.0.1"});
  if (policy) {
    a.set_congestion(policy);
    b.set_congestion(policy);
  }
  nettest::connect_pair(a, b);
  return {a.congestion(1), b.congestion(0)};
}

TEST(SockCongestion, PairOnOneHostTakesCubicOrReno) {
  const std::string want = settable("cubic") ? "cubic" : settable("reno") ? "reno" : system_default();
  for (const char* policy : {static_cast<const char*>(nullptr), "auto"}) {
    const auto [a, b] = connected(policy);
    EXPECT_EQ(a, want) << (policy ? policy : "default") << "; system default " << system_default();
    EXPECT_EQ(b, want);
  }
}

TEST(SockCongestion, SystemKeepsTheDefault) {
  const auto [a, b] = connected("system");
  EXPECT_EQ(a, system_default());
  EXPECT_EQ(b, system_default());
}

TEST(SockCongestion, NameSetsEveryConnection) {
  for (const char* name : {"reno", "bbr", "cubic"}) {
    if (!settable(name)) continue;  // this kernel or process cannot choose it
    const auto [a, b] = connected(name);
    EXPECT_EQ(a, name);
    EXPECT_EQ(b, name);
  }
  ASSERT_TRUE(settable("reno")) << "reno is in every kernel and always allowed";
}

TEST(SockCongestion, RefusedNameFailsNamingTheSetting) {
  SockPath a(3, 1 << 20, std::chrono::milliseconds(1000), {"127.0.0.1"});
  try {
    a.set_congestion("no-such-cc");
    FAIL() << "accepted a congestion control the kernel does not have";
  } catch (const core::Error& e) {
    EXPECT_EQ(e.code(), dcclInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 3"), std::string::npos) << what;
    EXPECT_NE(what.find("DCCL_NET_TCP_CONGESTION"), std::string::npos) << what;
    EXPECT_NE(what.find("'no-such-cc' is not in this kernel"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dccl::net
