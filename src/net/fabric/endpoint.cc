#include "net/fabric/endpoint.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include "core/error.hpp"
#include "core/log.hpp"
#include "net/fabric/fi_dmabuf_compat.hpp"

namespace dccl::net {

namespace {

// Providers that do not pick keys themselves (no FI_MR_PROV_KEY) need a unique requested
// key per registration; providers that do ignore it.
uint64_t next_mr_key() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string fi_err(const char* call, int rc) {
  return std::string(call) + ": " + fi_strerror(rc < 0 ? -rc : rc);
}

constexpr size_t kBatch = 16;    // CQ entries per fi_cq_read
constexpr int kMaxBatches = 8;   // batches per progress pass
constexpr unsigned kIdleDrainEvery = 16;  // progress passes with nothing outstanding per drain

}  // namespace

void* MemRegion::desc_for(const Endpoint* ep) const {
  for (const auto& [e, mr] : regs)
    if (e == ep) return fi_mr_desc(mr.get());
  return nullptr;
}

Endpoint::Endpoint(const std::string& provider, ProviderInfo pi, int rank, int nranks,
                   size_t part_cap, std::string rail)
    : provider_(provider),
      rail_(std::move(rail)),
      rank_(rank),
      mr_local_(pi.mr_local),
      hmem_(pi.hmem),
      info_(std::move(pi.info)) {
  auto fail = [&](const char* call, int rc) {
    core::raise(dcclUnavailable,
                core::describe(rank_, "open provider " + label(), fi_err(call, rc)));
  };
  int rc = fi_fabric(info_->fabric_attr, fabric_.out(), nullptr);
  if (rc) fail("fi_fabric", rc);
  rc = fi_domain(fabric_.get(), info_.get(), domain_.out(), nullptr);
  if (rc) fail("fi_domain", rc);

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_UNSPEC;
  av_attr.count = static_cast<size_t>(std::max(nranks, 1));
  rc = fi_av_open(domain_.get(), &av_attr, av_.out(), nullptr);
  if (rc) fail("fi_av_open", rc);

  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_NONE;  // we poll; see Transport::wait for the yield policy
  rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  if (rc) fail("fi_cq_open", rc);

  rc = fi_endpoint(domain_.get(), info_.get(), ep_.out(), nullptr);
  if (rc) fail("fi_endpoint", rc);
  rc = fi_ep_bind(ep_.get(), &av_.get()->fid, 0);
  if (rc) fail("fi_ep_bind(av)", rc);
  rc = fi_ep_bind(ep_.get(), &cq_.get()->fid, FI_TRANSMIT | FI_RECV);
  if (rc) fail("fi_ep_bind(cq)", rc);
  rc = fi_enable(ep_.get());
  if (rc) fail("fi_enable", rc);

  std::string name(64, '\0');
  size_t len = name.size();
  rc = fi_getname(&ep_.get()->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_.get()->fid, name.data(), &len);
  }
  if (rc) fail("fi_getname", rc);
  name.resize(len);
  address_ = std::move(name);

  // shm answers a full receive queue with -FI_ENOMEM, not -FI_EAGAIN: we never post
  // more than the queues hold and keep the rest in the backlogs.
  tx_limit_ = info_->tx_attr->size;
  rx_limit_ = info_->rx_attr->size;
  max_part_ = info_->ep_attr->max_msg_size;
  if (part_cap > 0) max_part_ = std::min(max_part_, part_cap);
  if (max_part_ == 0) max_part_ = 1;
}

Endpoint::~Endpoint() {
  ep_.reset();  // no completion can arrive after this
  std::lock_guard<std::mutex> lk(mu_);
  while (head_) {
    MsgOp* op = head_;
    head_ = op->next;
    delete op;
  }
  for (MsgOp* op : tx_backlog_) delete op;
  for (MsgOp* op : rx_backlog_) delete op;
  for (MsgOp* op : free_) delete op;
}

fi_addr_t Endpoint::insert(const std::string& addr, int peer) {
  std::lock_guard<std::mutex> lk(mu_);
  fi_addr_t fa = FI_ADDR_UNSPEC;
  int rc = fi_av_insert(av_.get(), addr.data(), 1, &fa, 0, nullptr);
  if (rc != 1)
    core::raise(dcclSystemError,
                core::describe(rank_, "connect", "fi_av_insert of rank " + std::to_string(peer) +
                                                     " on " + label() + " failed (" +
                                                     fi_strerror(rc < 0 ? -rc : FI_EINVAL) + ")"));
  return fa;
}

Fid<fid_mr> Endpoint::register_buffer(const void* buf, size_t len) {
  std::lock_guard<std::mutex> lk(mu_);
  Fid<fid_mr> mr;
  int rc = fi_mr_reg(domain_.get(), buf, len, FI_SEND | FI_RECV, 0, next_mr_key(), 0, mr.out(),
                     nullptr);
  if (rc)
    core::raise(dcclSystemError, core::describe(rank_, "register memory on " + label(),
                                                fi_err("fi_mr_reg", rc)));
  return mr;
}

Fid<fid_mr> Endpoint::register_dmabuf(int fd, uint64_t offset, size_t len, void* base, int iface, int device) {
  const std::string what = "register dma-buf on " + label();
  // Viability keeps device memory staged in both cases; fail clearly if called anyway.
  const uint32_t v = fi_version();
  if (v < mem::kDmabufMinVersion)
    core::raise(dcclUnavailable,
                core::describe(rank_, what,
                               "libfabric runtime " + std::to_string(FI_MAJOR(v)) + "." +
                                   std::to_string(FI_MINOR(v)) +
                                   " has no FI_MR_DMABUF (needs 1.20 or newer)"));
  if (!hmem_)
    core::raise(dcclUnavailable,
                core::describe(rank_, what, "the endpoint was opened without FI_HMEM"));
  std::lock_guard<std::mutex> lk(mu_);
  const fi_mr_dmabuf dmabuf{fd, offset, len, base};
  Fid<fid_mr> mr;
  int rc = mem::regattr_dmabuf(domain_.get(), dmabuf, iface, device, next_mr_key(), mr.out());
  if (rc) core::raise(dcclSystemError, core::describe(rank_, what, fi_err("fi_mr_regattr", rc)));
  return mr;
}

void Endpoint::close_buffer(Fid<fid_mr>& mr) {
  std::lock_guard<std::mutex> lk(mu_);
  mr.reset();
}

MsgOp* Endpoint::alloc_op() {
  if (free_.empty()) return new MsgOp();
  MsgOp* op = free_.back();
  free_.pop_back();
  return op;
}

MsgOp* Endpoint::make_op(bool send, fi_addr_t addr, char* buf, size_t len, uint64_t tag, void* desc, Request* req) {
  MsgOp* op = alloc_op();
  op->req = req;
  op->buf = buf;
  op->len = len;
  op->desc = desc;
  op->addr = addr;
  op->tag = tag;
  op->send = send;
  return op;
}

void Endpoint::free_op(MsgOp* op) {
  op->mr.reset();
  op->req = nullptr;
  op->peek = false;
  op->first = false;
  op->prev = op->next = nullptr;
  free_.push_back(op);
}

int Endpoint::submit_locked(MsgOp* op, const char** call) {
  std::deque<MsgOp*>& backlog = op->send ? tx_backlog_ : rx_backlog_;
  if (!backlog.empty()) {  // keep the order of the calls
    backlog.push_back(op);
    return 0;
  }
  int rc = try_post_locked(op, call);
  if (rc == -FI_EAGAIN) {
    drain_locked();
    rc = try_post_locked(op, call);
  }
  if (rc == -FI_EAGAIN) {
    backlog.push_back(op);
    return 0;
  }
  if (rc != 0) free_op(op);
  return rc;
}

void Endpoint::post(bool send, fi_addr_t addr, void* buf, size_t len, uint64_t tag, void* desc,
                    Request* req) {
  const size_t parts = len == 0 ? 1 : 1 + (len - 1) / max_part_;  // no overflow at SIZE_MAX
  if (!send && req->up_to && parts > 1)
    core::raise(dcclInvalidArgument,
                core::describe(rank_, "irecv from rank " + std::to_string(req->peer),
                               "a receive of up to " + std::to_string(len) + " bytes exceeds the part size " +
                                   std::to_string(max_part_) + " of " + label()));
  std::lock_guard<std::mutex> lk(mu_);
  // Set before the first post: early parts may complete while later ones are posted.
  req->pending_parts.store(static_cast<int>(parts), std::memory_order_release);
  for (size_t i = 0; i < parts; ++i) {
    MsgOp* op = make_op(send, addr, static_cast<char*>(buf) + i * max_part_, std::min(max_part_, len - i * max_part_),
                        tag, desc, req);
    op->first = i == 0 && !send;
    const char* call = nullptr;
    const int rc = submit_locked(op, &call);
    if (rc != 0) {
      std::string cause = std::string(call) + " on " + label() + " (part " +
                          std::to_string(i + 1) + "/" + std::to_string(parts) +
                          "): " + fi_strerror(-rc);
      req->fail(cause);
      req->parts_done(static_cast<int>(parts - i));  // this part and the rest: never posted
      core::raise(dcclSystemError,
                  core::describe(rank_,
                                 std::string(send ? "isend to" : "irecv from") + " rank " +
                                     std::to_string(req->peer),
                                 cause));
    }
  }
}

std::string Endpoint::post_one(bool send, fi_addr_t addr, void* buf, size_t len, uint64_t tag, void* desc,
                               Request* req, bool first) {
  std::lock_guard<std::mutex> lk(mu_);
  MsgOp* op = make_op(send, addr, static_cast<char*>(buf), len, tag, desc, req);
  op->first = first && !send;
  const char* call = nullptr;
  const int rc = submit_locked(op, &call);
  if (rc == 0) return {};
  return std::string(call) + " on " + label() + ": " + fi_strerror(-rc);
}

int Endpoint::try_post_locked(MsgOp* op, const char** call) {
  size_t& posted = op->send ? tx_posted_ : rx_posted_;
  const size_t limit = op->send ? tx_limit_ : rx_limit_;
  if (limit && posted >= limit) return -FI_EAGAIN;
  void* d = op->desc;
  if (!d && mr_local_ && op->len > 0) {
    if (!op->mr) {
      *call = "fi_mr_reg";
      int rc = fi_mr_reg(domain_.get(), op->buf, op->len, op->send ? FI_SEND : FI_RECV, 0,
                         next_mr_key(), 0, op->mr.out(), nullptr);
      if (rc) return rc;
    }
    d = fi_mr_desc(op->mr.get());
  }
  if (op->send && alive_ && !alive_(op->addr)) {
    *call = "peer check";
    return -FI_EHOSTDOWN;  // the peer's process has exited
  }
  *call = op->send ? "fi_tsend" : "fi_trecv";
  const uint64_t tag = op->tag | length_mark(op->len);  // see kLengthMarkBits
  // A receive of up to len bytes matches any length: the length mark is ignored. So
  // does a send/recv receive's first part, and the size mark too (checked on arrival).
  uint64_t ignore = !op->send && op->req && op->req->up_to ? kLengthMarkBits : 0;
  if (op->first && has_size_mark(op->tag)) ignore |= kLengthMarkBits | kSizeMarkBits;
  ssize_t rc = op->send ? fi_tsend(ep_.get(), op->buf, op->len, d, op->addr, tag, &op->ctx)
                        : fi_trecv(ep_.get(), op->buf, op->len, d, op->addr, tag, ignore, &op->ctx);
  if (rc == -FI_ENOMEM && posted > 0) rc = -FI_EAGAIN;  // a full queue, by another name
  if (rc != 0) return static_cast<int>(rc);
  ++posted;
  DCCL_TRACE("net: %s %s tag 0x%llx %zu bytes posted (op %p)", provider_.c_str(),
             op->send ? "send" : "recv", static_cast<unsigned long long>(op->tag), op->len,
             static_cast<void*>(op));
  op->prev = nullptr;
  op->next = head_;
  if (head_) head_->prev = op;
  head_ = op;
  return 0;
}

void Endpoint::flush_backlog_locked(std::deque<MsgOp*>& q) {
  while (!q.empty()) {
    MsgOp* op = q.front();
    const char* call = nullptr;
    int rc = try_post_locked(op, &call);
    if (rc == -FI_EAGAIN) return;
    q.pop_front();
    if (rc != 0) {  // the request fails; wait() reports it
      Request* r = op->req;
      r->fail(std::string(call) + " on " + label() + ": " + fi_strerror(-rc));
      r->parts_done();
      free_op(op);
    }
  }
}

void Endpoint::complete_locked(MsgOp* op, size_t len, int err, const std::string& text_in, uint64_t tag) {
  std::string text = text_in;
  // Parts are cut alike at both ends: a short part is a mismatch, unless the
  // receive takes up to its length (Request::up_to).
  const bool short_ok = op->req && op->req->up_to && len < op->len;
  const bool sized = op->first && has_size_mark(op->tag);
  // The completion carries the sender's tag; its size mark counts only where the rest
  // of it is this receive's (a provider that left the field empty says nothing).
  // Looked at for a send/recv receive's first part only, not on every completion.
  auto other_size = [&] {
    const uint64_t diff = tag ^ op->tag;
    return (diff & ~(kSizeMarkBits | kLengthMarkBits)) == 0 && (diff & kSizeMarkBits) != 0;
  };
  if (sized && op->req && (err == FI_ETRUNC || (!err && (len != op->len || other_size())))) {
    // The sender's message for this send/recv receive has another length.
    const size_t whole = op->req->len;
    const std::string where = op->len == whole ? "" : " in the first part of this " + std::to_string(whole) + "-byte receive";
    text = "count mismatch: rank " + std::to_string(op->req->peer) + " sent " +
           (err ? "a message longer than the " + std::to_string(op->len) + " bytes this rank expects" + where
            : len != op->len ? std::to_string(len) + " bytes where this rank expects " + std::to_string(op->len) + where
                             : "a message of another length for this " + std::to_string(whole) + "-byte receive") +
           " (" + label() + ")";
    err = FI_ETRUNC;
  } else if (!err && !op->send && !op->peek && len != op->len && !short_ok) {
    err = FI_ETRUNC;
    text = "count mismatch: the sender's message part was " + std::to_string(len) + " bytes where this rank expects " +
           std::to_string(op->len) + " (" + label() + ")";
  }
  const bool calls_differ = err == FI_ETRUNC;
  if (err && sized && op->req) end_rest_locked(op->req, op);
  if (op->prev) op->prev->next = op->next;
  else head_ = op->next;
  if (op->next) op->next->prev = op->prev;
  --(op->send ? tx_posted_ : rx_posted_);
  Request* r = op->req;
  DCCL_TRACE("net: %s completion op %p len %zu err %d%s", provider_.c_str(),
             static_cast<void*>(op), len, err, r ? "" : " (cancelled request)");
  if (!err && !op->peek) (op->send ? sent_ : recvd_).fetch_add(op->send ? op->len : len, std::memory_order_relaxed);
  if (r) {
    if (err) r->fail(text, calls_differ);
    else r->bytes.fetch_add(op->send ? op->len : len, std::memory_order_relaxed);
    r->parts_done();
  }
  free_op(op);
}

std::string Endpoint::cq_error_text(const fi_cq_err_entry& e) {
  std::string t = fi_strerror(e.err);
  char buf[256] = {0};
  const char* prov = fi_cq_strerror(cq_.get(), e.prov_errno, e.err_data, buf, sizeof(buf));
  if (prov && *prov && t != prov) t += std::string(" (") + label() + ": " + prov + ")";
  else t += " (" + label() + ")";
  if (e.err == FI_ETRUNC)
    t += "; the message was " + std::to_string(e.olen) + " bytes longer than the receive buffer";
  return t;
}

int Endpoint::drain_locked() {
  fi_cq_tagged_entry ent[kBatch];
  int total = 0;
  for (int b = 0; b < kMaxBatches; ++b) {
    ssize_t n = fi_cq_read(cq_.get(), ent, kBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i)
        complete_locked(reinterpret_cast<MsgOp*>(ent[i].op_context), ent[i].len, 0, {}, ent[i].tag);
      total += static_cast<int>(n);
      if (static_cast<size_t>(n) < kBatch) break;
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(cq_.get(), &e, 0) == 1) {
        MsgOp* op = reinterpret_cast<MsgOp*>(e.op_context);
        const int err = e.err < 0 ? -e.err : e.err;  // shm reports it negated
        e.err = err;
        if (op) complete_locked(op, 0, err ? err : FI_EOTHER, cq_error_text(e), e.tag);
        ++total;
      }
    } else {
      if (n != -FI_EAGAIN) DCCL_WARN("fi_cq_read on %s: %s", label().c_str(), fi_strerror(-n));
      break;
    }
  }
  return total;
}

int Endpoint::progress(bool block) {
  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  if (block) lk.lock();
  else if (!lk.try_lock()) return 0;
  // Nothing of ours outstanding: reading the completion queue costs a poll() on
  // the provider's sockets for nothing (1 us of a 14 us 8-byte round trip on the
  // socket path, which shares this loop). Every 16th pass still drains, so that
  // what the provider does on its own (accepting connections, buffering what a peer
  // sends before its receive is posted) is never held for long.
  if (!head_ && tx_backlog_.empty() && rx_backlog_.empty() && ++idle_passes_ % kIdleDrainEvery != 0) return 0;
  int n = drain_locked();
  flush_backlog_locked(tx_backlog_);
  flush_backlog_locked(rx_backlog_);
  return n;
}

bool Endpoint::peek(fi_addr_t addr, uint64_t tag, uint64_t ignore, size_t* len, int wait_ms) {
  Request r;
  r.pending_parts.store(1, std::memory_order_relaxed);
  MsgOp* op = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    op = alloc_op();
    op->req = &r;
    op->peek = true;
    op->addr = addr;
    op->tag = tag;
    fi_msg_tagged m{};
    m.addr = addr;
    m.tag = tag;
    m.ignore = ignore;
    m.context = &op->ctx;
    if (fi_trecvmsg(ep_.get(), &m, FI_PEEK) != 0) {
      free_op(op);
      return false;
    }
    ++rx_posted_;
    op->next = head_;
    if (head_) head_->prev = op;
    head_ = op;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (!r.done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) progress(true);
  std::lock_guard<std::mutex> lk(mu_);
  if (!r.done.load(std::memory_order_acquire)) {
    op->req = nullptr;  // no answer in time: a late one is dropped
    return false;
  }
  *len = r.bytes.load(std::memory_order_relaxed);
  return !r.failed;
}

bool Endpoint::holds(const Request* r) {
  std::lock_guard<std::mutex> lk(mu_);
  for (MsgOp* op = head_; op; op = op->next)
    if (op->req == r && !op->peek) return true;
  for (auto* q : {&tx_backlog_, &rx_backlog_})
    for (MsgOp* op : *q)
      if (op->req == r) return true;
  return false;
}

void Endpoint::end_rest_locked(Request* r, MsgOp* failed) {
  int rest = 0;
  for (MsgOp* op = head_; op; op = op->next) {
    if (op == failed || op->req != r) continue;
    fi_cancel(&ep_.get()->fid, &op->ctx);
    cancelled_any_ = true;
    op->req = nullptr;
    ++rest;
  }
  for (auto* q : {&tx_backlog_, &rx_backlog_})
    for (auto it = q->begin(); it != q->end();) {
      if ((*it)->req != r) {
        ++it;
        continue;
      }
      free_op(*it);
      it = q->erase(it);
      ++rest;
    }
  if (rest) r->parts_done(rest);
}

void Endpoint::cancel_all() {
  std::lock_guard<std::mutex> lk(mu_);
  for (MsgOp* op = head_; op; op = op->next) {
    Request* r = op->req;
    if (!r) continue;
    fi_cancel(&ep_.get()->fid, &op->ctx);
    cancelled_any_ = true;
    r->abandon("cancelled");
    op->req = nullptr;
  }
  for (auto* q : {&tx_backlog_, &rx_backlog_}) {
    for (MsgOp* op : *q) {
      op->req->abandon("cancelled");
      free_op(op);
    }
    q->clear();
  }
}

}  // namespace dccl::net
