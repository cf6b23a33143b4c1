#include "net/fabric/fabric_link.hpp"

namespace dccl::net {

std::vector<std::string> FabricLink::counters() const {
  if (ep_->rail().empty()) return {};
  return {ep_->label() + ": sent " + std::to_string(ep_->sent_bytes()) + " bytes, received " +
          std::to_string(ep_->recv_bytes()) + " bytes"};
}

bool FabricLink::other_length(const Request& r) const {
  size_t got = 0;
  return ep_->peek(addr_, r.tag, kLengthMarkBits, &got, 100);
}

bool FabricLink::other_call(const Request& r, size_t* got) const {
  return has_call_mark(r.tag) && ep_->peek(addr_, r.tag, kLengthMarkBits | kCallMarkBits, got, 100);
}

std::string FabricLink::count_note(const Request& r) {
  return "; count mismatch: rank " + std::to_string(r.peer) +
         " sent a message of another length for it (this rank expects " + std::to_string(r.len) + " bytes)";
}

std::string FabricLink::mismatch_note(const Request& r) const {
  size_t got = 0;
  if (other_length(r)) return count_note(r);
  if (other_call(r, &got)) return call_mismatch_note(r, got);
  return "";
}

}  // namespace dccl::net
