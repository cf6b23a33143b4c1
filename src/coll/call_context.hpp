// What an algorithm sees: tagged point-to-point on the operation's buffers, local
// reduce/copy in the buffers' memory, scratch space and the error context.
// Algorithms are pure orchestration; the data path (direct or staged) and the
// memory backend sit behind this interface.
#pragma once
#include <cstddef>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "coll/comm_state.hpp"
#include "dccl/dccl.h"
#include "mem/datapath.hpp"
#include "net/transport.hpp"

namespace dccl::mem {
class Backend;
}
namespace dccl::net {
class SharedSegment;
}

namespace dccl::coll {

using mem::Xfer;

class ScratchPool;

// The one tag layout ([63:58] are the transport's length mark, net/transport.hpp).
// [57:56] kind. Collectives: [55:40] the call's mark (sched::call_mark: a 16-bit hash
// of collective, count, datatype, op, root), [39:24] operation sequence (wrapping;
// a call's messages are all taken before it ends), [23:0] step.
// Checks: [55:24] operation sequence, [23:0] step. Send/recv: [55:32] sender rank,
// [31:24] the message's size mark (net::size_mark, or'ed in where the length is
// known), [23:0] the pair's count of messages from the sender, wrapping (tags are
// seen from the receiver; a pair's messages match in order).
enum class TagKind : uint64_t { Coll = 1, P2P = 2, Check = 3 };
inline uint64_t make_tag(TagKind k, uint64_t seq, uint32_t step) {
  return (static_cast<uint64_t>(k) << 56) | ((seq & 0xffffffffULL) << 24) | (step & 0xffffffu);
}
inline uint64_t make_coll_tag(uint64_t seq, uint32_t mark, uint32_t step) {
  return (static_cast<uint64_t>(TagKind::Coll) << 56) | (static_cast<uint64_t>(mark & 0xffff) << 40) |
         ((seq & 0xffffULL) << 24) | (step & 0xffffffu);
}
inline uint64_t make_p2p_tag(int sender, uint64_t count) {
  return (static_cast<uint64_t>(TagKind::P2P) << 56) | (static_cast<uint64_t>(sender & 0xffffff) << 32) |
         (count & 0xffffffULL);
}

// What an operation is called in errors and traces, e.g. "all_reduce #12 (segment, 2 x
// float32)". Kept as parts and spelled out only when needed: building the string
// on every call cost more than a small allreduce itself.
struct Label {
  const char* coll = nullptr;  // null: `text` is the whole name
  const char* algo = "";
  uint64_t seq = 0;
  size_t count = 0;
  dcclDataType_t dt = dcclFloat32;
  std::string text;
  std::string str() const;
};

struct CallContextInit {
  const CommState* comm = nullptr;  // the communicator's shared state (never null)
  mem::DataPath* path = nullptr;  // null: buffers are host memory, sent directly
  // Host memory only (path null): bytes posted to the transport straight from
  // and into the user's buffers, counted as direct (null: not counted).
  std::atomic<uint64_t>* host_sent = nullptr;
  std::atomic<uint64_t>* host_recv = nullptr;
  mem::Backend* backend = nullptr;  // memory of the operation's buffers
  ScratchPool* scratch = nullptr;
  uint64_t seq = 0;
  uint32_t call_mark = 0;  // sched::call_mark of the operation (collective tags)
  uint32_t parent_mark = 0;  // a hierarchical call's step: sched::Op::parent_mark (segment call words)
  dcclDataType_t dt = dcclFloat32;
  dcclRedOp_t op = dcclSum;
  bool premul = false;  // a PreMulSum (op is dcclSum): told apart from a sum in segment call words
  size_t chunk_bytes = 1 << 20;
  // The call's deadline (zero: none): no wait goes past it, so a call with several
  // waits, or steps on several sub-communicators, ends within its timeout overall.
  std::chrono::steady_clock::time_point deadline{};
  Label name;
};

class CallContext {
 public:
  explicit CallContext(const CallContextInit& init);
  explicit CallContext(CallContextInit&& init);  // takes the name's text instead of copying it
  ~CallContext();
  CallContext(const CallContext&) = delete;
  CallContext& operator=(const CallContext&) = delete;

  int rank() const { return in_.comm->rank; }
  int nranks() const { return in_.comm->nranks; }
  dcclDataType_t dt() const { return in_.dt; }
  dcclRedOp_t op() const { return in_.op; }
  size_t esize() const { return esize_; }
  size_t chunk_bytes() const { return in_.chunk_bytes; }
  uint32_t parent_mark() const { return in_.parent_mark; }
  bool premul() const { return in_.premul; }
  std::string name() const { return in_.name.str(); }

  void send(int peer, const void* p, size_t bytes, uint32_t step, Xfer& x);
  void recv(int peer, void* p, size_t bytes, uint32_t step, Xfer& x);
  // p2p (dcclSend/dcclRecv) uses its own tag space.
  void send_tagged(int peer, const void* p, size_t bytes, uint64_t tag, Xfer& x);
  void recv_tagged(int peer, void* p, size_t bytes, uint64_t tag, Xfer& x);
  // Blocks until x completes; throws core::Error naming the step and the peer.
  void wait(Xfer& x);
  void wait_all(Xfer* xs, size_t n);
  // Blocks until one active transfer among xs completes; marks it inactive and returns its index.
  size_t wait_any(Xfer* const* xs, size_t n);

  // Local work in the buffers' memory; complete on return.
  void reduce(void* dst, const void* a, const void* b, size_t count);
  void copy(void* dst, const void* src, size_t bytes);
  void finish_avg(void* buf, size_t count);
  // dst[i] = src[i] * scalar (one element of this operation's datatype, in host
  // memory) for i < count: a PreMulSum's input. dst is scratch of src's memory kind.
  void scale(void* dst, const void* src, size_t count, const void* scalar);
  // Scratch of the buffers' memory kind, valid until the operation ends.
  void* scratch(size_t bytes);

  // For algorithms that wait on shared memory rather than transfers.
  net::SharedSegment* segment() const { return in_.comm->segment; }
  int64_t spin_us() const { return in_.comm->spin_us; }
  void start_deadline();
  // Throws (failed communicator, or timeout naming `what` from `peer`).
  void check_deadline(const char* what, int peer);
  std::string peer_name(int peer) const;
  void check_failed() const;
  // Ends the operation with `code`, naming this rank, the operation and `why`.
  [[noreturn]] void refuse(dcclResult_t code, const std::string& why) const;

 private:
  bool poll(Xfer& x);  // progress the data path; true when complete
  [[noreturn]] void fail(const Xfer& x, const std::string& cause);
  // Every error leaves through here: transfers in flight are cancelled first, so
  // the transport never touches a Request after the algorithm's frames unwind.
  [[noreturn]] void stop(dcclResult_t code, const std::string& what) const;
  std::string where(const Xfer& x) const;
  // A wait starting at `start` ends by the earlier of start + timeout and the call's deadline.
  std::chrono::steady_clock::time_point wait_deadline(std::chrono::steady_clock::time_point start) const;

  CallContextInit in_;
  size_t esize_;
  uint64_t coll_tag_;
  size_t scratch_used_ = 0;
  std::chrono::steady_clock::time_point deadline_{};
};

}  // namespace dccl::coll
