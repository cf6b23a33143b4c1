// Emulated hosts for dccl-run --hosts: one network namespace per host, and one
// "switch" namespace per job holding a bridge per rail; host h's interface
// eth<r> is one end of a veth pair whose other end (h<h>r<r>) is a port of
// bridge br<r>. Nothing is added to the namespace dccl-run runs in.
//
//   namespaces  dccl-<pid>-h<h> (hosts), dccl-<pid>-sw (switch)
//   addresses   host h, rail r: 198.18.<r>.<h+1>/24; the switch: 198.18.0.254/24 on br0
//   routes      each host's default route goes via 198.18.0.254 on eth0 (nothing
//               lies beyond it; it is there for programs that bind to "the
//               default-route interface"); none with NetSpec::default_route false
//   shaping     optional tbf on both ends of every veth (see tbf_for)
//
// With NetSpec::fabric the switch is a leaf-spine network of router namespaces
// instead (dccl-run --fabric; fabric.hpp); the store then listens in leaf 0.
//
// Built with iproute2 (ip, tc); removed with `ip netns del`, which takes the
// veths, bridges and qdiscs with it.
#pragma once
#include <signal.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dccl-run/net_spec.hpp"

namespace dcclrun {

// tbf parameters for a rate: burst = 1 ms of traffic at the rate, at least 16 KiB
// and two frames of the MTU (a frame above the burst would be dropped; smaller GSO
// packets pass whole); latency 50 ms (the queue
// holds at most 50 ms of traffic, beyond it packets are dropped).
struct TbfParams {
  uint64_t burst_bytes = 0;
  int latency_ms = 0;
};
TbfParams tbf_for(uint64_t rate_bps, int mtu);
std::string rate_text(uint64_t rate_bps);  // "1gbit", "2.5gbit", "100mbit"

// What is missing to emulate hosts here ("" when nothing): root, ip, and tc
// when shaping. `path` is the PATH to look for the tools in.
std::string emulation_unavailable(bool shaping, const std::string& path);

class EmuNet {
 public:
  // Removes the namespaces of earlier jobs (dccl-<pid>-*) whose dccl-run is
  // gone, and this pid's own (left by an earlier process with the same pid).
  // Returns one line per failure.
  static std::vector<std::string> remove_stale(const std::string& path, const sigset_t& child_mask);
  // Builds the job's network. nullptr with *why when a step fails; what was
  // made by then is removed. `child_mask` is the signal mask the tools run with.
  static std::unique_ptr<EmuNet> create(const NetSpec& spec, const std::string& path,
                                        const sigset_t& child_mask, std::string* why);
  ~EmuNet();  // remove(), unless keep()
  EmuNet(const EmuNet&) = delete;
  EmuNet& operator=(const EmuNet&) = delete;

  std::string ns_name(int host) const;  // dccl-<pid>-h<host>
  std::string switch_ns() const;        // dccl-<pid>-sw; with a fabric, leaf 0's (the store's)
  std::vector<std::string> all_ns() const;  // every namespace of the job, hosts first
  static std::string hostname(int host);  // dccl-h<host>, the UTS name of its ranks
  static std::string address(int host, int rail);
  static std::string store_address() { return "198.18.0.254"; }
  int host_ns_fd(int host) const { return host_fds_[static_cast<size_t>(host)]; }
  // Runs f with the calling thread in the switch namespace (sockets made there
  // stay there). False with *why when it could not enter it or come back.
  bool in_switch(const std::function<void()>& f, std::string* why) { return in_netns(switch_fd_, switch_ns(), f, why); }
  // Removes every namespace; "" or what failed.
  std::string remove();
  void keep() { keep_ = true; }
  std::string summary() const;

 private:
  EmuNet(const NetSpec& spec, std::string ip, std::string tc, const sigset_t& mask);
  bool build(std::string* why);
  bool build_fabric(std::string* why);  // in fabric.cc's companion, netns_fabric.cc
  bool in_netns(int fd, const std::string& name, const std::function<void()>& f, std::string* why);
  bool open_namespaces(std::string* why);
  // The router namespaces: the switch, or the leaves then the spines.
  std::vector<std::string> router_ns() const;
  std::string fabric_summary() const;
  // Runs `tool args...` with `input` on stdin; false with *why naming the command and its output.
  bool run(const std::vector<std::string>& cmd, const std::string& input, std::string* why) const;

  NetSpec spec_;
  std::string tag_;  // dccl-<pid>
  std::string ip_, tc_;
  sigset_t mask_;
  std::vector<int> host_fds_;
  int switch_fd_ = -1;
  bool keep_ = false, removed_ = false;
};

}  // namespace dcclrun
