// One provider's fabric, domain, address vector, completion queue and RDM endpoint,
// plus the operations in flight on it. All calls into the domain hold `mu_`
// (FI_THREAD_DOMAIN), so several threads may post and progress at once.
#pragma once
#include <atomic>
#include <functional>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "net/fabric/fid.hpp"
#include "net/fabric/provider.hpp"
#include "net/transport.hpp"

namespace dccl::net {

class Endpoint;

// A buffer registered with every endpoint of a transport (see Transport::register_memory).
struct MemRegion {
  const void* base = nullptr;
  size_t len = 0;
  bool device = false;  // a dma-buf registration: device memory, never read by the CPU
  std::vector<std::pair<const Endpoint*, Fid<fid_mr>>> regs;
  void* desc_for(const Endpoint* ep) const;
};

// One message (a whole request, or one part of a split one), posted or waiting in a
// backlog to be posted.
struct MsgOp {
  fi_context2 ctx;  // first member: the provider hands &ctx back as op_context
  Request* req = nullptr;  // nullptr once cancelled: the completion is then dropped
  Fid<fid_mr> mr;          // internal registration on FI_MR_LOCAL providers
  char* buf = nullptr;
  size_t len = 0;
  void* desc = nullptr;
  fi_addr_t addr = FI_ADDR_UNSPEC;
  uint64_t tag = 0;
  bool send = false;
  bool peek = false;  // FI_PEEK probe: its completion carries the message's length
  // The first part of a send/recv receive (net::has_size_mark): posted ignoring the
  // length and size marks; its completion's tag must carry this receive's.
  bool first = false;
  MsgOp* prev = nullptr;  // links in the outstanding list (posted ops)
  MsgOp* next = nullptr;
};

class Endpoint {
 public:
  // Opens everything; throws core::Error(dcclUnavailable) with the reason.
  // part_cap > 0 caps one message below the provider's max_msg_size.
  // `rail`: the interface this endpoint is bound to ("" when it is not a rail).
  Endpoint(const std::string& provider, ProviderInfo pi, int rank, int nranks, size_t part_cap,
           std::string rail = {});
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  const std::string& provider() const { return provider_; }
  const std::string& address() const { return address_; }  // fi_getname bytes
  const std::string& rail() const { return rail_; }
  // "tcp;ofi_rxm on eth1", or just the provider when not a rail; with several flows
  // on the rail, "tcp;ofi_rxm on eth1, flow 3 of 8" (flows counted from 1).
  std::string label() const {
    const std::string base = rail_label();
    return flows_ < 2 ? base : base + ", flow " + std::to_string(flow_ + 1) + " of " + std::to_string(flows_);
  }
  std::string rail_label() const { return rail_.empty() ? provider_ : provider_ + " on " + rail_; }
  // Flow `flow` (0: the rail's first endpoint, the one its blob address names) of the
  // `flows` endpoints opened on this rail (net/rails.hpp).
  void set_flow(int flow, int flows) {
    flow_ = flow;
    flows_ = flows;
  }
  int flow() const { return flow_; }
  // Bytes of completed sends and receives on this endpoint.
  uint64_t sent_bytes() const { return sent_.load(std::memory_order_relaxed); }
  uint64_t recv_bytes() const { return recvd_.load(std::memory_order_relaxed); }
  size_t max_part() const { return max_part_; }
  fid_domain* domain() const { return domain_.get(); }
  // Opened with FI_HMEM in caps (from the fi_info it was opened with): the domain
  // takes device memory. Without it a device address is treated as host memory.
  bool hmem() const { return hmem_; }

  // Registers [buf, buf+len) on this domain for local send/recv; throws core::Error.
  Fid<fid_mr> register_buffer(const void* buf, size_t len);
  // Device memory by dma-buf: fi_mr_regattr with FI_MR_DMABUF and an fi_mr_attr of the
  // newest layout (net/fi_dmabuf_compat.hpp). Throws core::Error(dcclUnavailable) naming
  // the runtime version when libfabric is older than 1.20, or when the endpoint was
  // opened without FI_HMEM; dcclSystemError when the provider refuses.
  Fid<fid_mr> register_dmabuf(int fd, uint64_t offset, size_t len, void* base, int iface, int device);
  void close_buffer(Fid<fid_mr>& mr);

  // Adds a peer's address; throws core::Error on failure.
  fi_addr_t insert(const std::string& addr, int peer);

  // Posts len bytes as ceil(len / max_part()) tagged messages completing `req`. Never
  // blocks: a part the provider refuses with -FI_EAGAIN (full queue; shm's first contact
  // with a peer) waits in a FIFO backlog per direction, posted by progress() in order, so
  // FI_ORDER_SAS and receive matching order still follow the order of the calls.
  // Throws core::Error(dcclSystemError) on other failures, `req` marked failed.
  // Same-host peers: a send to a process that has exited is refused instead of
  // posted (shm would spin forever on a lock the dead process held).
  void set_liveness(std::function<bool(fi_addr_t)> alive) { alive_ = std::move(alive); }
  void post(bool send, fi_addr_t addr, void* buf, size_t len, uint64_t tag, void* desc,
            Request* req);
  // One message of len <= max_part() bytes, one of `req`'s parts: the caller counted it
  // in req->pending_parts beforehand. Never blocks, as post(). Returns "" once posted or
  // queued; on failure the cause (the part is then neither posted nor counted down).
  // `first`: the message's first part (MsgOp::first).
  std::string post_one(bool send, fi_addr_t addr, void* buf, size_t len, uint64_t tag, void* desc,
                       Request* req, bool first = false);

  // Reads the CQ (a few batches), completes requests, posts what the backlogs hold.
  // With block=false it skips the pass when another thread is already progressing this
  // endpoint. Returns completions.
  // Whether a message from `addr` whose tag equals `tag` outside the `ignore` bits
  // has arrived and is not yet received (FI_PEEK); *len: what the provider reports
  // as its length (tcp;ofi_rxm reports the peek's own, not the message's). Waits up to
  // wait_ms for the provider's answer. False: none, or the provider cannot peek.
  bool peek(fi_addr_t addr, uint64_t tag, uint64_t ignore, size_t* len, int wait_ms);
  int progress(bool block = false);
  // Whether an operation of `r` is posted here or waits in a backlog.
  bool holds(const Request* r);

  // fi_cancel on everything outstanding, backlogs dropped; the requests are marked failed
  // ("cancelled").
  void cancel_all();
  // True once cancel_all() cancelled an operation the provider had accepted.
  bool cancelled_any() const { return cancelled_any_; }

 private:
  int drain_locked();
  int try_post_locked(MsgOp* op, const char** call);  // 0, -FI_EAGAIN or -error (in *call)
  // Posts op now or queues it behind the backlog: 0, or -error with *call set (op freed).
  int submit_locked(MsgOp* op, const char** call);
  void flush_backlog_locked(std::deque<MsgOp*>& q);
  // `tag`: the completion's (the sender's) tag, for a first part's size check.
  void complete_locked(MsgOp* op, size_t len, int err, const std::string& text, uint64_t tag = 0);
  // A first part failed: the request's other parts are cancelled and counted done, so
  // that it ends now (their late completions are dropped).
  void end_rest_locked(Request* r, MsgOp* failed);
  MsgOp* alloc_op();
  // An op from the pool, filled for one tagged send or receive (under mu_).
  MsgOp* make_op(bool send, fi_addr_t addr, char* buf, size_t len, uint64_t tag, void* desc, Request* req);
  void free_op(MsgOp* op);
  std::string cq_error_text(const fi_cq_err_entry& e);

  std::string provider_;
  std::string rail_;
  int flow_ = 0, flows_ = 1;
  int rank_;
  bool mr_local_ = false;
  bool hmem_ = false;
  size_t max_part_ = 0;
  std::function<bool(fi_addr_t)> alive_;
  bool cancelled_any_ = false;
  std::string address_;
  InfoPtr info_;
  // Declaration order is the reverse of the order fi_close must run in.
  Fid<fid_fabric> fabric_;
  Fid<fid_domain> domain_;
  Fid<fid_av> av_;
  Fid<fid_cq> cq_;
  Fid<fid_ep> ep_;

  std::mutex mu_;
  MsgOp* head_ = nullptr;  // outstanding ops (doubly linked)
  unsigned idle_passes_ = 0;  // progress passes that found nothing outstanding (under mu_)
  std::deque<MsgOp*> tx_backlog_, rx_backlog_;
  size_t tx_posted_ = 0, rx_posted_ = 0;  // posted, not yet completed
  size_t tx_limit_ = 0, rx_limit_ = 0;    // the provider's queue sizes (0: no limit)
  std::vector<MsgOp*> free_;
  std::atomic<uint64_t> sent_{0}, recvd_{0};
};

}  // namespace dccl::net
