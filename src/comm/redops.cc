// A communicator's user-defined reduction ops (PreMulSum) and its registered buffers.
#include <cstring>
#include <string>

#include "comm/communicator.hpp"
#include "core/types.hpp"
#include "mem/path_choice.hpp"

namespace dccl::comm {

namespace {
constexpr size_t kMaxRedOps = 1 << 16;  // live PreMulSum ops per communicator
}  // namespace

dcclRedOp_t Communicator::create_premul(const void* scalar, dcclDataType_t dt, bool immediate) {
  std::lock_guard<std::mutex> lk(redop_mu_);
  size_t i = 0;
  while (i < redops_.size() && redops_[i].live) ++i;
  if (i == kMaxRedOps)
    core::raise(dcclInvalidUsage, core::describe(state_.rank, "dcclRedOpCreatePreMulSum",
                                                 std::to_string(kMaxRedOps) + " ops are live; destroy some first"));
  if (i == redops_.size()) redops_.emplace_back();
  PreMul& m = redops_[i];
  m = PreMul{};
  m.live = true;
  m.dt = dt;
  m.immediate = immediate;
  if (immediate)
    memcpy(m.value, scalar, core::dtype_size(dt));  // copied now: the caller's memory may go
  else
    m.ptr = scalar;
  return static_cast<dcclRedOp_t>(dcclNumOps + static_cast<int>(i));
}

void Communicator::destroy_premul(dcclRedOp_t op) {
  std::lock_guard<std::mutex> lk(redop_mu_);
  const int i = static_cast<int>(op) - dcclNumOps;
  if (i < 0 || static_cast<size_t>(i) >= redops_.size() || !redops_[static_cast<size_t>(i)].live)
    core::raise(dcclInvalidArgument,
                core::describe(state_.rank, "dcclRedOpDestroy", "op " + std::to_string(static_cast<int>(op)) +
                                                              (i < 0 ? " is a built-in op"
                                                                     : " is not a live op of this communicator")));
  redops_[static_cast<size_t>(i)].live = false;
}

void Communicator::resolve_premul(sched::Op& op, const char* fn) const {
  std::lock_guard<std::mutex> lk(redop_mu_);
  const int i = static_cast<int>(op.op) - dcclNumOps;
  if (i < 0 || static_cast<size_t>(i) >= redops_.size() || !redops_[static_cast<size_t>(i)].live)
    core::raise(dcclInvalidArgument, core::describe(state_.rank, fn, "op " + std::to_string(static_cast<int>(op.op)) +
                                                                   " is not a dcclRedOp_t or a live op of this "
                                                                   "communicator"));
  const PreMul& m = redops_[static_cast<size_t>(i)];
  if (m.dt != op.dt)
    core::raise(dcclInvalidArgument,
                core::describe(state_.rank, fn, std::string("op ") + std::to_string(static_cast<int>(op.op)) +
                                              " was created for " + core::dtype_name(m.dt) + ", not " +
                                              core::dtype_name(op.dt)));
  op.premul = true;
  op.op = dcclSum;
  memcpy(op.scalar, m.value, sizeof(op.scalar));
  op.scalar_ptr = m.immediate ? nullptr : m.ptr;
}

void* Communicator::register_buffer(const void* p, size_t bytes) { return paths_->register_user(p, bytes); }

void Communicator::deregister_buffer(void* handle) { paths_->deregister_user(handle); }

}  // namespace dccl::comm
