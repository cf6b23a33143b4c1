#include "mem/staged_path.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"

namespace dccl::mem {

StagedPath::StagedPath(net::Transport& net, int rank, int nranks, size_t slot_bytes, int slots,
                       PathCounters counters)
    : net_(net), rank_(rank), slot_bytes_(slot_bytes), slots_(slots), ctr_(counters),
      send_pools_(static_cast<size_t>(nranks)), recv_pools_(static_cast<size_t>(nranks)) {}

StagedPath::~StagedPath() {
  for (Transfer* op : active_) delete op;
  for (auto* pools : {&send_pools_, &recv_pools_})
    for (auto& p : *pools)
      if (p) {
        if (p->pinned) try {
            p->pinned->unpin_host(p->base);
          } catch (const std::exception& e) {
            DCCL_WARN("rank %d: staging: unpinning staging slots failed: %s", rank_, e.what());
          }
        net_.deregister_memory(p->mr);
        host_backend().free(p->base);
      }
}

StagedPath::Pool& StagedPath::pool(int peer, bool send) {
  auto& slot = (send ? send_pools_ : recv_pools_)[static_cast<size_t>(peer)];
  if (!slot) {
    auto p = std::make_unique<Pool>();
    const size_t bytes = slot_bytes_ * static_cast<size_t>(slots_);
    p->base = static_cast<char*>(host_backend().alloc(bytes));
    p->mr = net_.register_memory(p->base, bytes);
    for (int i = 0; i < slots_; ++i) p->free.push_back(i);
    ctr_.allocations->fetch_add(1, std::memory_order_relaxed);
    DCCL_TRACE("staging: %d x %zu-byte %s slots for peer %d", slots_, slot_bytes_, send ? "send" : "receive", peer);
    slot = std::move(p);
  }
  return *slot;
}

// Page-locks a pool for the device backend that copies into it, so its device
// copies run asynchronously and overlap the transfers (a pageable destination
// makes a CUDA device-to-host copy synchronous). Tried once per pool: when the
// system refuses, the backend logs it once and the slots stay pageable (slower,
// still correct).
void StagedPath::pin(Pool& p, Backend& be) {
  p.pin_tried = true;
  try {
    if (be.pin_host(p.base, slot_bytes_ * static_cast<size_t>(slots_))) p.pinned = &be;
  } catch (const std::exception& e) {  // pin_host does not throw; a backend that does is not retried either
    DCCL_WARN("rank %d: staging: staging slots not pinned for %s memory (%s)", rank_, be.name(), e.what());
  }
}

void StagedPath::post(bool send, int peer, char* p, size_t bytes, uint64_t tag, Xfer& x) {
  auto* op = new Transfer;
  op->send = send;
  op->peer = peer;
  op->dev = p;
  op->bytes = bytes;
  op->tag = tag;
  op->nparts = bytes == 0 ? 1 : (bytes + slot_bytes_ - 1) / slot_bytes_;
  op->be = bytes ? &backend_of(p) : &host_backend();
  op->pool = &pool(peer, send);
  if (op->be->kind() != Kind::Host && !op->pool->pin_tried) pin(*op->pool, *op->be);
  op->pool->waiting.push_back(op);
  active_.push_back(op);
  x.path_state = op;
  grant(*op->pool);
}

void StagedPath::post_send(int peer, const void* p, size_t bytes, uint64_t tag, Xfer& x) {
  post(true, peer, const_cast<char*>(static_cast<const char*>(p)), bytes, tag, x);
}

void StagedPath::post_recv(int peer, void* p, size_t bytes, uint64_t tag, Xfer& x) {
  post(false, peer, static_cast<char*>(p), bytes, tag, x);
}

void StagedPath::start_part(Transfer& op, int slot) {
  Part& part = op.parts.emplace_back();
  part.off = op.started * slot_bytes_;
  part.len = op.bytes - part.off < slot_bytes_ ? op.bytes - part.off : slot_bytes_;
  part.slot = slot;
  ++op.started;
  char* host = slot_ptr(*op.pool, slot);
  if (op.send && part.len > 0) {
    part.ticket = op.be->copy_async(host, op.dev + part.off, part.len);
    part.stage = Stage::CopyOut;
    ctr_.host_copies->fetch_add(1, std::memory_order_relaxed);
    ctr_.staged_host->fetch_add(part.len, std::memory_order_relaxed);
  } else if (op.send) {
    net_.isend(op.peer, host, 0, op.tag, &part.req, op.pool->mr);
    part.stage = Stage::Net;
  } else {
    net_.irecv(op.peer, host, part.len, op.tag, &part.req, op.pool->mr);
    part.stage = Stage::Net;
  }
}

// Strict FIFO: the oldest op with parts to start gets every free slot first.
void StagedPath::grant(Pool& pool) {
  while (!pool.free.empty() && !pool.waiting.empty()) {
    Transfer* op = pool.waiting.front();
    int slot = pool.free.back();
    pool.free.pop_back();
    start_part(*op, slot);
    if (op->started == op->nparts) pool.waiting.pop_front();
  }
}

void StagedPath::advance(Transfer& op) {
  bool sends_in_order = true;  // a part is sent only after every earlier part was
  for (Part& part : op.parts) {
    if (part.stage == Stage::CopyOut) {
      if (!sends_in_order || !op.be->done(part.ticket)) {
        sends_in_order = false;
        continue;
      }
      net_.isend(op.peer, slot_ptr(*op.pool, part.slot), part.len, op.tag, &part.req, op.pool->mr);
      part.stage = Stage::Net;
    }
    if (part.stage == Stage::Net) {
      if (!part.req.done.load(std::memory_order_acquire)) continue;
      if (part.req.failed) {
        op.error = part.req.error;
        part.stage = Stage::Done;
        continue;
      }
      if (op.send || part.len == 0) {
        part.stage = Stage::Done;
      } else {
        part.ticket = op.be->copy_async(op.dev + part.off, slot_ptr(*op.pool, part.slot), part.len);
        part.stage = Stage::CopyIn;
        ctr_.host_copies->fetch_add(1, std::memory_order_relaxed);
        ctr_.staged_host->fetch_add(part.len, std::memory_order_relaxed);
      }
    }
    if (part.stage == Stage::CopyIn && op.be->done(part.ticket)) part.stage = Stage::Done;
  }
  while (!op.parts.empty() && op.parts.front().stage == Stage::Done) {
    op.pool->free.push_back(op.parts.front().slot);
    op.parts.pop_front();
    ++op.finished;
  }
}

void StagedPath::advance_all() {
  for (Transfer* op : active_) advance(*op);
  for (auto* pools : {&send_pools_, &recv_pools_})
    for (auto& p : *pools)
      if (p && !p->waiting.empty()) grant(*p);
}

bool StagedPath::progress(Xfer& x) {
  advance_all();
  Transfer* op = static_cast<Transfer*>(x.path_state);
  const bool failed = !op->error.empty();
  if (!failed && op->finished < op->nparts) return false;
  if (!op->parts.empty()) return false;  // after a failure, let started parts drain first
  std::string err = op->error;
  active_.remove(op);
  auto& w = op->pool->waiting;
  for (auto it = w.begin(); it != w.end(); ++it)
    if (*it == op) {
      w.erase(it);
      break;
    }
  int peer = op->peer;
  bool send = op->send;
  delete op;
  x.path_state = nullptr;
  if (failed)
    throw core::Error(dcclRemoteError, core::describe(rank_, "staged transfer", std::string(send ? "send to" : "receive from") +
                                                                                  " rank " + std::to_string(peer) + ": " + err));
  return true;
}

}  // namespace dccl::mem
