// The socket path's TCP congestion control (DCCL_NET_TCP_CONGESTION;
// net/sock/sock_path.hpp, "Congestion control").
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/socket.hpp"
#include "net/sock/sock_path.hpp"

namespace dccl::net {

namespace {

// 0 when the kernel lets this process give a TCP connection `name`, else its errno.
int probe(const std::string& name) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return errno;
  const int e = sock::set_congestion(fd, name);
  close(fd);
  return e;
}

std::string refusal(const std::string& name, int e) {
  if (e == ENOENT) return "'" + name + "' is not in this kernel (net.ipv4.tcp_available_congestion_control lists those it has)";
  if (e == EPERM)
    return "'" + name + "' is not allowed for this process (net.ipv4.tcp_allowed_congestion_control lists those an "
           "unprivileged process may choose)";
  return "'" + name + "': " + sock::errno_text(e);
}

}  // namespace

void SockPath::set_congestion(const std::string& policy) {
  near_cc_.clear();
  far_cc_.clear();
  if (policy.empty() || policy == "system") return;
  if (policy == "auto") {
    // Pairs on one host: the first of these the kernel lets this process choose.
    for (const char* name : {"cubic", "reno"})
      if (probe(name) == 0) {
        near_cc_ = name;
        return;
      }
    DCCL_INFO("net: rank %d socket path: neither cubic nor reno can be chosen here; pairs on this host keep the "
              "system's congestion control", rank_);
    return;
  }
  if (const int e = probe(policy))
    core::raise(dcclInvalidArgument, core::describe(rank_, "socket path", "DCCL_NET_TCP_CONGESTION: " + refusal(policy, e)));
  near_cc_ = far_cc_ = policy;
}

void SockPath::apply_congestion(int fd, bool near) {
  const std::string& name = near ? near_cc_ : far_cc_;
  if (name.empty()) return;
  if (const int e = sock::set_congestion(fd, name))  // probed at set_congestion: only a changed kernel refuses now
    core::raise(dcclSystemError, core::describe(rank_, "socket path", "DCCL_NET_TCP_CONGESTION: " + refusal(name, e)));
}

std::string SockPath::congestion(int peer) const {
  const Conn* c = conn_of(peer);
  return c && c->fd >= 0 ? sock::congestion(c->fd) : "";
}

}  // namespace dccl::net
