// Non-power-of-two fix-up shared by the recursive algorithms: extra ranks fold
// their data into a partner before the exchange and get the result after it.
#pragma once
#include "coll/call_context.hpp"
#include "coll/patterns/rhd.hpp"

namespace dccl::coll {

// Step numbers reserved for the fold (before) and unfold (after).
constexpr uint32_t kFoldStep = 0xfff000;
constexpr uint32_t kUnfoldStep = 0xfff001;

// Before: extras send buf to their partner; partners receive into tmp and reduce into buf.
inline void fold_in(CallContext& c, const patterns::Rhd& h, void* buf, void* tmp, size_t count) {
  int partner = h.fold_partner();
  if (partner < 0) return;
  Xfer x;
  if (h.is_extra()) {
    c.send(partner, buf, count * c.esize(), kFoldStep, x);
    c.wait(x);
  } else {
    c.recv(partner, tmp, count * c.esize(), kFoldStep, x);
    c.wait(x);
    c.reduce(buf, tmp, buf, count);  // lower rank's data first, as the extra is rank-1
  }
}

// After: partners send the result to their extra.
inline void fold_out(CallContext& c, const patterns::Rhd& h, void* buf, size_t count) {
  int partner = h.fold_partner();
  if (partner < 0) return;
  Xfer x;
  if (h.is_extra())
    c.recv(partner, buf, count * c.esize(), kUnfoldStep, x);
  else
    c.send(partner, buf, count * c.esize(), kUnfoldStep, x);
  c.wait(x);
}

}  // namespace dccl::coll
