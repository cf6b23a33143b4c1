// RAII owners for libfabric objects: every fid_* is closed exactly once, fi_info freed.
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <memory>
#include <string>

#include "core/log.hpp"

namespace dccl::net {

// Owns one fid_* (fid_fabric, fid_domain, fid_ep, fid_av, fid_cq, fid_mr, ...).
// Closing order matters in libfabric (ep before av/cq, those before domain, domain
// before fabric): Endpoint declares its members so that they are destroyed in that order.
template <typename T>
class Fid {
 public:
  Fid() = default;
  explicit Fid(T* p) : p_(p) {}
  Fid(const Fid&) = delete;
  Fid& operator=(const Fid&) = delete;
  Fid(Fid&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Fid& operator=(Fid&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_;
      o.p_ = nullptr;
    }
    return *this;
  }
  ~Fid() { reset(); }

  void reset() {
    if (p_) {
      int rc = fi_close(&p_->fid);
      if (rc) DCCL_WARN("fi_close failed: %s", fi_strerror(-rc));
      p_ = nullptr;
    }
  }
  T* get() const { return p_; }
  T** out() {
    reset();
    return &p_;
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

struct InfoDeleter {
  void operator()(fi_info* p) const {
    if (p) fi_freeinfo(p);
  }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace dccl::net
