// C API: collectives, send/recv, barrier and groups, with argument checks.
#include <cstdint>
#include <string>
#include <utility>

#include "api/group.hpp"
#include "api/handles.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"

using namespace dccl;
using tune::Coll;

namespace {

// Rejects what would crash or hang later; every message names the rank (once
// the communicator is known), the call and the argument.
struct Check {
  const char* fn;
  int me = -1;  // this rank in the communicator; -1 before it is known
  // The backends found so far, by pointer: mem() and same_kind() ask about the same
  // two buffers, and the answer travels with the operation (sched::Op::backend).
  mutable std::pair<const void*, mem::Backend*> seen[2] = {};
  mem::Backend& backend(const void* p) const {
    for (auto& [q, be] : seen)
      if (be && q == p) return *be;
    mem::Backend& be = mem::backend_of(p);
    seen[seen[0].second ? 1 : 0] = {p, &be};
    return be;
  }
  [[noreturn]] void bad(const std::string& what, dcclResult_t code = dcclInvalidArgument) const {
    core::raise(code, api::say(me, fn, what));
  }
  void dtype(dcclDataType_t t) const {
    if (!core::dtype_valid(t)) bad("datatype " + std::to_string(static_cast<int>(t)) + " is not a dcclDataType_t");
  }
  void redop(dcclRedOp_t o) const {
    if (!core::op_valid(o)) bad("op " + std::to_string(static_cast<int>(o)) + " is not a dcclRedOp_t");
  }
  // `mult` elements of `count` are touched; catches negative values cast to size_t.
  void count(size_t count, dcclDataType_t t, size_t mult, const char* name) const {
    // count > 2^60 / size / mult, without the divisions (the same bound for whole counts).
    using Wide = unsigned __int128;
    if (static_cast<Wide>(count) * core::dtype_size(t) * (mult ? mult : 1) > (Wide{1} << 60))
      bad(std::string(name) + " " + std::to_string(count) +
          " is too large (negative value or byte size overflows)");
  }
  void buf(const void* p, size_t count, const char* name) const {
    if (p == nullptr && count > 0) bad(std::string(name) + " is NULL");
  }
  // A device buffer must lie inside one live allocation (host memory cannot be
  // checked). The data path would find out only while running, and an error
  // there fails the communicator for good.
  void mem(const void* p, size_t count, dcclDataType_t t, size_t mult, const char* name) const {
    if (p == nullptr || count == 0) return;
    mem::Backend& be = backend(p);
    if (be.kind() == mem::Kind::Host) return;
    const size_t bytes = count * core::dtype_size(t) * mult;  // bounded by count()
    void* base = nullptr;
    size_t size = 0;
    if (!be.range_of(p, &base, &size) ||
        bytes > size - static_cast<size_t>(static_cast<const char*>(p) - static_cast<const char*>(base)))
      bad(std::string(name) + " (" + std::to_string(bytes) + " bytes) is not inside one live " + be.name() +
          " allocation");
  }
  // Both buffers must be the same kind of memory (as the data path requires).
  // Returns that kind (null when neither buffer is given).
  mem::Backend* same_kind(const void* send, const void* recv) const {
    if (send == nullptr || recv == nullptr) return send ? &backend(send) : recv ? &backend(recv) : nullptr;
    mem::Backend& a = backend(send);
    mem::Backend& b = backend(recv);
    if (&a != &b)
      bad(std::string("sendbuff is ") + a.name() + " memory but recvbuff is " + b.name() +
          " memory; both must be the same kind");
    return &a;
  }
  // sendbuff and recvbuff may overlap only in the documented in-place form (dccl.h):
  // sendbuff at `in_place`. Any other overlap would read what the call already wrote.
  void overlap(const void* send, size_t sbytes, const void* recv, size_t rbytes, uintptr_t in_place) const {
    const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
    if (s == in_place || s >= r + rbytes || r >= s + sbytes || !send || !recv || !sbytes || !rbytes) return;
    overlap_refused(s, sbytes, r, rbytes, in_place);
  }
  [[gnu::cold, noreturn]] void overlap_refused(uintptr_t s, size_t sbytes, uintptr_t r, size_t rbytes,
                                               uintptr_t in_place) const {
    const bool after = s >= r;
    bad("sendbuff (" + std::to_string(sbytes) + " bytes) and recvbuff (" + std::to_string(rbytes) +
        " bytes) overlap, sendbuff " + std::to_string(after ? s - r : r - s) + " bytes " +
        (after ? "after" : "before") + " recvbuff's start, which is not the in-place position (" +
        (in_place >= r ? "recvbuff + " + std::to_string(in_place - r) : "recvbuff - " + std::to_string(r - in_place)) +
        " bytes); other overlaps are refused");
  }
  void rank(int r, int n, const char* name) const {
    if (r < 0 || r >= n)
      bad(std::string(name) + " " + std::to_string(r) + " is outside [0, " + std::to_string(n) + ")");
  }
};

void submit_checked(const char* fn, dcclComm_t comm, dcclStream_t stream, sched::Op& op,
                    void (*check)(const Check&, const sched::Op&, int nranks));

// `op` by reference: a by-value copy of the freshly built Op reads it back in 16-byte
// loads right after its narrow field stores, a store-forwarding stall per load.
dcclResult_t submit(const char* fn, dcclComm_t comm, dcclStream_t stream, sched::Op&& op,
                    void (*check)(const Check&, const sched::Op&, int nranks)) {
  return api::guard(fn, [&] {
    try {
      submit_checked(fn, comm, stream, op, check);
    } catch (const core::Error& e) {
      api::group_refused(e);  // inside a group, dcclGroupEnd reports it too
      throw;
    }
  });
}

void submit_checked(const char* fn, dcclComm_t comm, dcclStream_t stream, sched::Op& op,
                    void (*check)(const Check&, const sched::Op&, int nranks)) {
  {
    Check ck{fn};
    comm::Communicator& c = api::comm_of(comm, fn);
    api::CallScope scope(c, fn);
    ck.me = c.rank();
    sched::Stream* s = api::stream_of(stream, fn, ck.me);
    ck.dtype(op.dt);
    if (static_cast<int>(op.op) >= dcclNumOps && (op.coll == Coll::AllReduce || op.coll == Coll::Reduce ||
                                                  op.coll == Coll::ReduceScatter))
      c.resolve_premul(op, fn);  // a PreMulSum of this communicator: becomes a sum of scaled inputs
    else
      ck.redop(op.op);
    check(ck, op, c.nranks());
    op.backend = ck.same_kind(op.send, op.recv);
    // A blocking send or receive with itself has no partner call to meet: only
    // inside a group, next to its counterpart, can it complete.
    if (op.coll == Coll::SendRecv && op.peer == c.rank() && !api::in_group())
      ck.bad(std::string(op.is_send ? "send to" : "receive from") + " itself (peer " + std::to_string(op.peer) +
                 ") outside dcclGroupStart/dcclGroupEnd can never complete; put the send and the receive in one group",
             dcclInvalidUsage);
    // Outside a group the submission refuses it; a group's call is refused here, not
    // only at dcclGroupEnd (dccl.h: after finalize other calls return dcclInvalidUsage).
    if (api::in_group()) c.refuse_if_finalized(fn);
    if (op.coll == Coll::SendRecv)
      op.p2p_tag = c.next_p2p_tag(op.peer, op.is_send);
    else
      op.seq = c.next_seq();
    if (api::in_group())
      api::group_add(comm, c, stream, s, op);
    else
      c.submit_one(op, s);
    scope.leave();
  }
}

sched::Op make(Coll coll, const void* send, void* recv, size_t count, dcclDataType_t dt,
               dcclRedOp_t op, int root) {
  sched::Op o;
  o.coll = coll;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.dt = dt;
  o.op = op;
  o.root = root;
  return o;
}

}  // namespace

extern "C" {

dcclResult_t dcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, dcclDataType_t datatype,
                           dcclRedOp_t op, dcclComm_t comm, dcclStream_t stream) {
  return submit("dcclAllReduce", comm, stream, make(Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0),
                [](const Check& ck, const sched::Op& o, int) {
                  ck.count(o.count, o.dt, 1, "count");
                  ck.buf(o.send, o.count, "sendbuff");
                  ck.buf(o.recv, o.count, "recvbuff");
                  ck.mem(o.send, o.count, o.dt, 1, "sendbuff");
                  ck.mem(o.recv, o.count, o.dt, 1, "recvbuff");
                  const size_t b = o.count * core::dtype_size(o.dt);
                  ck.overlap(o.send, b, o.recv, b, reinterpret_cast<uintptr_t>(o.recv));
                });
}

dcclResult_t dcclReduce(const void* sendbuff, void* recvbuff, size_t count, dcclDataType_t datatype,
                        dcclRedOp_t op, int root, dcclComm_t comm, dcclStream_t stream) {
  int me = -1;
  if (comm) dcclCommUserRank(comm, &me);
  sched::Op o = make(Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root);
  o.peer = me;  // only the root needs recvbuff
  return submit("dcclReduce", comm, stream, std::move(o), [](const Check& ck, const sched::Op& o, int n) {
    ck.rank(o.root, n, "root");
    ck.count(o.count, o.dt, 1, "count");
    ck.buf(o.send, o.count, "sendbuff");
    if (o.peer == o.root) ck.buf(o.recv, o.count, "recvbuff (root)");
    ck.mem(o.send, o.count, o.dt, 1, "sendbuff");
    if (o.peer == o.root) ck.mem(o.recv, o.count, o.dt, 1, "recvbuff (root)");
    const size_t b = o.count * core::dtype_size(o.dt);
    if (o.peer == o.root) ck.overlap(o.send, b, o.recv, b, reinterpret_cast<uintptr_t>(o.recv));
  });
}

dcclResult_t dcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, dcclDataType_t datatype,
                           int root, dcclComm_t comm, dcclStream_t stream) {
  int me = -1;
  if (comm) dcclCommUserRank(comm, &me);
  sched::Op o = make(Coll::Broadcast, sendbuff, recvbuff, count, datatype, dcclSum, root);
  o.peer = me;
  return submit("dcclBroadcast", comm, stream, std::move(o), [](const Check& ck, const sched::Op& o, int n) {
    ck.rank(o.root, n, "root");
    ck.count(o.count, o.dt, 1, "count");
    if (o.peer == o.root) ck.buf(o.send, o.count, "sendbuff (root)");
    ck.buf(o.recv, o.count, "recvbuff");
    if (o.peer == o.root) ck.mem(o.send, o.count, o.dt, 1, "sendbuff (root)");
    ck.mem(o.recv, o.count, o.dt, 1, "recvbuff");
    const size_t b = o.count * core::dtype_size(o.dt);
    if (o.peer == o.root) ck.overlap(o.send, b, o.recv, b, reinterpret_cast<uintptr_t>(o.recv));
  });
}

// NCCL's in-place broadcast: buff is the root's source and every rank's destination.
dcclResult_t dcclBcast(void* buff, size_t count, dcclDataType_t datatype, int root, dcclComm_t comm,
                       dcclStream_t stream) {
  sched::Op o = make(Coll::Broadcast, buff, buff, count, datatype, dcclSum, root);
  return submit("dcclBcast", comm, stream, std::move(o), [](const Check& ck, const sched::Op& o, int n) {
    ck.rank(o.root, n, "root");
    ck.count(o.count, o.dt, 1, "count");
    ck.buf(o.recv, o.count, "buff");
    ck.mem(o.recv, o.count, o.dt, 1, "buff");
  });
}

dcclResult_t dcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, dcclDataType_t datatype,
                           dcclComm_t comm, dcclStream_t stream) {
  return submit("dcclAllGather", comm, stream, make(Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, dcclSum, 0),
                [](const Check& ck, const sched::Op& o, int n) {
                  ck.count(o.count, o.dt, static_cast<size_t>(n), "sendcount");
                  ck.buf(o.send, o.count, "sendbuff");
                  ck.buf(o.recv, o.count, "recvbuff");
                  ck.mem(o.send, o.count, o.dt, 1, "sendbuff");
                  ck.mem(o.recv, o.count, o.dt, static_cast<size_t>(n), "recvbuff");
                  const size_t b = o.count * core::dtype_size(o.dt);
                  ck.overlap(o.send, b, o.recv, b * static_cast<size_t>(n),
                             reinterpret_cast<uintptr_t>(o.recv) + b * static_cast<size_t>(ck.me));
                });
}

dcclResult_t dcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, dcclDataType_t datatype,
                               dcclRedOp_t op, dcclComm_t comm, dcclStream_t stream) {
  return submit("dcclReduceScatter", comm, stream,
                make(Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0),
                [](const Check& ck, const sched::Op& o, int n) {
                  ck.count(o.count, o.dt, static_cast<size_t>(n), "recvcount");
                  ck.buf(o.send, o.count, "sendbuff");
                  ck.buf(o.recv, o.count, "recvbuff");
                  ck.mem(o.send, o.count, o.dt, static_cast<size_t>(n), "sendbuff");
                  ck.mem(o.recv, o.count, o.dt, 1, "recvbuff");
                  const size_t b = o.count * core::dtype_size(o.dt);
                  ck.overlap(o.send, b * static_cast<size_t>(n), o.recv, b,
                             reinterpret_cast<uintptr_t>(o.recv) - b * static_cast<size_t>(ck.me));
                });
}

dcclResult_t dcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, dcclDataType_t datatype,
                          dcclComm_t comm, dcclStream_t stream) {
  return submit("dcclAlltoAll", comm, stream, make(Coll::AlltoAll, sendbuff, recvbuff, count, datatype, dcclSum, 0),
                [](const Check& ck, const sched::Op& o, int n) {
                  ck.count(o.count, o.dt, static_cast<size_t>(n), "count");
                  ck.buf(o.send, o.count, "sendbuff");
                  ck.buf(o.recv, o.count, "recvbuff");
                  ck.mem(o.send, o.count, o.dt, static_cast<size_t>(n), "sendbuff");
                  ck.mem(o.recv, o.count, o.dt, static_cast<size_t>(n), "recvbuff");
                  const size_t b = o.count * core::dtype_size(o.dt) * static_cast<size_t>(n);
                  ck.overlap(o.send, b, o.recv, b, reinterpret_cast<uintptr_t>(o.recv));
                });
}

dcclResult_t dcclSend(const void* sendbuff, size_t count, dcclDataType_t datatype, int peer, dcclComm_t comm,
                      dcclStream_t stream) {
  sched::Op o = make(Coll::SendRecv, sendbuff, nullptr, count, datatype, dcclSum, 0);
  o.peer = peer;
  o.is_send = true;
  return submit("dcclSend", comm, stream, std::move(o), [](const Check& ck, const sched::Op& o, int n) {
    ck.rank(o.peer, n, "peer");
    ck.count(o.count, o.dt, 1, "count");
    ck.buf(o.send, o.count, "sendbuff");
    ck.mem(o.send, o.count, o.dt, 1, "sendbuff");
  });
}

dcclResult_t dcclRecv(void* recvbuff, size_t count, dcclDataType_t datatype, int peer, dcclComm_t comm,
                      dcclStream_t stream) {
  sched::Op o = make(Coll::SendRecv, nullptr, recvbuff, count, datatype, dcclSum, 0);
  o.peer = peer;
  return submit("dcclRecv", comm, stream, std::move(o), [](const Check& ck, const sched::Op& o, int n) {
    ck.rank(o.peer, n, "peer");
    ck.count(o.count, o.dt, 1, "count");
    ck.buf(o.recv, o.count, "recvbuff");
    ck.mem(o.recv, o.count, o.dt, 1, "recvbuff");
  });
}

dcclResult_t dcclBarrier(dcclComm_t comm, dcclStream_t stream) {
  return submit("dcclBarrier", comm, stream, make(Coll::Barrier, nullptr, nullptr, 0, dcclUint8, dcclSum, 0),
                [](const Check&, const sched::Op&, int) {});
}

dcclResult_t dcclGroupStart(void) {
  return api::guard("dcclGroupStart", [] { api::group_start(); });
}

dcclResult_t dcclGroupEnd(void) {
  return api::guard("dcclGroupEnd", [] { api::group_end(); });
}

}  // extern "C"
