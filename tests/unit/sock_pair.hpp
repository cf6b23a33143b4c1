// Helper of the socket-path tests: two SockPaths of one process (ranks 0 and 1)
// connected to each other over loopback, each connect() on a thread of its own.
#pragma once
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "net/sock/sock_path.hpp"

namespace dccl::net::nettest {

inline void connect_pair(SockPath& a, SockPath& b) {
  const std::vector<std::pair<int, std::string>> peers = {{0, a.address()}, {0, b.address()}};
  std::thread t([&] { b.connect(peers); });
  a.connect(peers);
  t.join();
}

}  // namespace dccl::net::nettest
