// The several-flows Link (net/link.hpp): one pair's TCP connections on DirectCCL's
// socket path when the pair has more than one (DCCL_NET_FLOWS, net/sock/spray.hpp).
// A message of at least spray::kSprayMinBytes is announced on the lead flow and its
// chunks are sprayed over every flow, each to the one with the fewest bytes queued
// (net/sock/sock_spray.cc); smaller ones go whole on the lead flow, as on a SockLink,
// whose engine (the socket path, serving every socket peer) it shares. Host memory only.
#pragma once
#include <string>

#include "net/sock/sock_link.hpp"

namespace dccl::net {

class FlowsLink final : public SockLink {
 public:
  using SockLink::SockLink;
  std::string describe() const override {
    return "DirectCCL sockets, " + std::to_string(path_->flows(peer_)) + " flows sprayed";
  }
};

}  // namespace dccl::net
