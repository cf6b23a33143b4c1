#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <vector>
int main() {
  prctl(PR_SET_TIMERSLACK, 1);
  const int n = 24;
  std::vector<int> fds;
  int ep = epoll_create1(0);
  for (int i = 0; i < n; ++i) {
    int sv[2];
    int l = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{}; a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(0x7f000001);
    bind(l, (sockaddr*)&a, sizeof a); listen(l, 1); socklen_t al = sizeof a; getsockname(l, (sockaddr*)&a, &al);
    sv[0] = socket(AF_INET, SOCK_STREAM, 0); connect(sv[0], (sockaddr*)&a, sizeof a); sv[1] = accept(l, nullptr, nullptr);
    fds.push_back(sv[0]);
    epoll_event ev{}; ev.events = EPOLLIN; ev.data.fd = sv[0];
    epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
  }
  auto bench = [&](std::vector<pollfd> p, const char* what) {
    timespec ts{0, SLEEP};
    const int iters = 200000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) ppoll(p.data(), p.size(), &ts, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    printf("%s: %.0f ns a ppoll\n", what, std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
  };
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<pollfd> all, three, one{{ep, POLLIN, 0}};
    for (int i = 0; i < n; ++i) all.push_back({fds[i], POLLIN, 0});
    for (int i = 0; i < 3; ++i) three.push_back({fds[i], POLLIN, 0});
    bench(all, "24 sockets");
    bench(three, "3 sockets");
    bench(one, "epoll fd");
  }
}
