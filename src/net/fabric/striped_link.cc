#include "net/fabric/striped_link.hpp"

#include "core/error.hpp"

namespace dccl::net {

// Parts, and pieces of those at least stripe_min long on every lane; each lane gets
// its pieces in message order (receives match in that order).
void StripedLink::post(bool send, void* buf, size_t len, uint64_t tag, Request* req, MemRegion* mr) {
  const size_t n = cut_.count(len);
  std::lock_guard<std::mutex> lk(*order_);
  req->pending_parts.store(static_cast<int>(n), std::memory_order_release);
  size_t posted = 0;
  std::string cause;
  cut_.each(len, [&](int lane, size_t off, size_t plen) {
    if (!cause.empty()) return;
    cause = lanes_[static_cast<size_t>(lane)]->post_piece(send, static_cast<char*>(buf) + off, plen, tag, req, mr);
    if (cause.empty()) ++posted;
    else cause += " (piece " + std::to_string(posted + 1) + "/" + std::to_string(n) + ")";
  });
  if (cause.empty()) return;
  req->fail(cause);
  req->parts_done(static_cast<int>(n - posted));  // never posted
  core::raise(dcclSystemError,
              core::describe(rank_, std::string(send ? "isend to" : "irecv from") + " rank " + std::to_string(peer_),
                             cause));
}

std::string StripedLink::mismatch_note(const Request& r) const {
  for (const auto& l : lanes_)
    if (l->other_length(r)) return FabricLink::count_note(r);
  size_t got = 0;
  for (const auto& l : lanes_)
    if (l->other_call(r, &got)) return call_mismatch_note(r, got);
  return "";
}

std::string StripedLink::pending_note(const Request& r) const {
  std::string s;
  for (const auto& l : lanes_)
    if (l->endpoint()->holds(&r)) s += (s.empty() ? "" : " and ") + l->endpoint()->label();
  return s.empty() ? s : "; pieces still pending on " + s;
}

}  // namespace dccl::net
