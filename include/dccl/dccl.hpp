// DirectCCL C++ API: RAII handles over the C API, std::span buffers, dccl::Error.
#pragma once
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "dccl/dccl.h"

namespace dccl {

class Error : public std::runtime_error {
 public:
  Error(dcclResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  dcclResult_t code() const noexcept { return code_; }

 private:
  dcclResult_t code_;
};

inline void check(dcclResult_t r) {
  if (r != dcclSuccess && r != dcclInProgress) {
    const char* last = dcclGetLastError(nullptr);
    throw Error(r, std::string(dcclGetErrorString(r)) + (last && *last ? std::string(": ") + last : ""));
  }
}

template <class T>
constexpr dcclDataType_t datatype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, int8_t>) return dcclInt8;
  else if constexpr (std::is_same_v<U, uint8_t>) return dcclUint8;
  else if constexpr (std::is_same_v<U, int32_t>) return dcclInt32;
  else if constexpr (std::is_same_v<U, uint32_t>) return dcclUint32;
  else if constexpr (std::is_same_v<U, int64_t>) return dcclInt64;
  else if constexpr (std::is_same_v<U, uint64_t>) return dcclUint64;
  else if constexpr (std::is_same_v<U, float>) return dcclFloat32;
  else if constexpr (std::is_same_v<U, double>) return dcclFloat64;
  else static_assert(sizeof(T) == 0, "no dccl datatype for this type; use the untyped overloads");
}

class Stream {
 public:
  Stream() { check(dcclStreamCreate(&s_)); }
  ~Stream() {
    if (s_) dcclStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  void synchronize() { check(dcclStreamSynchronize(s_)); }
  bool done() {
    dcclResult_t r = dcclStreamQuery(s_);
    check(r);
    return r == dcclSuccess;
  }
  dcclStream_t get() const { return s_; }

 private:
  dcclStream_t s_ = nullptr;
};

class Communicator {
 public:
  // From the launcher's environment (dccl-run, torchrun, mpirun, srun).
  Communicator() { check(dcclCommInitFromEnv(&c_)); }
  Communicator(int nranks, const dcclUniqueId& id, int rank) { check(dcclCommInitRank(&c_, nranks, id, rank)); }
  ~Communicator() {
    if (c_) dcclCommDestroy(c_);
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    if (this != &o) {
      if (c_) dcclCommDestroy(c_);
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  // Takes ownership of a C handle (may be NULL: an empty communicator).
  explicit Communicator(dcclComm_t c) : c_(c) {}

  static dcclUniqueId unique_id() {
    dcclUniqueId id;
    check(dcclGetUniqueId(&id));
    return id;
  }
  int rank() const {
    int r;
    check(dcclCommUserRank(c_, &r));
    return r;
  }
  int size() const {
    int n;
    check(dcclCommCount(c_, &n));
    return n;
  }
  dcclStats_t stats() const {
    dcclStats_t s;
    check(dcclCommGetStats(c_, &s));
    return s;
  }
  void abort() { check(dcclCommAbort(std::exchange(c_, nullptr))); }
  // Collective (dcclCommSplit): ranks with the same color >= 0 form a new
  // communicator ranked by key; with DCCL_SPLIT_NOCOLOR the result is empty.
  Communicator split(int color, int key) const {
    dcclComm_t n = nullptr;
    check(dcclCommSplit(c_, color, key, &n, nullptr));
    return Communicator(n);
  }
  // False for an empty communicator (split with DCCL_SPLIT_NOCOLOR, moved from, aborted).
  explicit operator bool() const { return c_ != nullptr; }
  dcclComm_t get() const { return c_; }
  // Gives up ownership of the C handle without destroying it.
  [[nodiscard]] dcclComm_t release() { return std::exchange(c_, nullptr); }

  template <class T>
  void all_reduce(std::span<const T> send, std::span<T> recv, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    need(recv.size() == send.size(), "all_reduce: send and recv sizes differ");
    check(dcclAllReduce(send.data(), recv.data(), send.size(), datatype_of<T>(), op, c_, sget(s)));
  }
  template <class T>
  void all_reduce(std::span<T> buf, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    check(dcclAllReduce(buf.data(), buf.data(), buf.size(), datatype_of<T>(), op, c_, sget(s)));
  }
  template <class T>
  void reduce(std::span<const T> send, std::span<T> recv, int root, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    check(dcclReduce(send.data(), recv.data(), send.size(), datatype_of<T>(), op, root, c_, sget(s)));
  }
  template <class T>
  void broadcast(std::span<T> buf, int root, Stream* s = nullptr) {
    check(dcclBroadcast(buf.data(), buf.data(), buf.size(), datatype_of<T>(), root, c_, sget(s)));
  }
  template <class T>
  void all_gather(std::span<const T> send, std::span<T> recv, Stream* s = nullptr) {
    need(recv.size() == send.size() * static_cast<size_t>(size()), "all_gather: recv must hold size()*send elements");
    check(dcclAllGather(send.data(), recv.data(), send.size(), datatype_of<T>(), c_, sget(s)));
  }
  template <class T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    need(send.size() == recv.size() * static_cast<size_t>(size()), "reduce_scatter: send must hold size()*recv elements");
    check(dcclReduceScatter(send.data(), recv.data(), recv.size(), datatype_of<T>(), op, c_, sget(s)));
  }
  template <class T>
  void all_to_all(std::span<const T> send, std::span<T> recv, Stream* s = nullptr) {
    size_t n = static_cast<size_t>(size());
    need(send.size() == recv.size() && send.size() % n == 0, "all_to_all: sizes must match and divide by size()");
    check(dcclAlltoAll(send.data(), recv.data(), send.size() / n, datatype_of<T>(), c_, sget(s)));
  }
  template <class T>
  void send(std::span<const T> buf, int peer, Stream* s = nullptr) {
    check(dcclSend(buf.data(), buf.size(), datatype_of<T>(), peer, c_, sget(s)));
  }
  template <class T>
  void recv(std::span<T> buf, int peer, Stream* s = nullptr) {
    check(dcclRecv(buf.data(), buf.size(), datatype_of<T>(), peer, c_, sget(s)));
  }
  void barrier(Stream* s = nullptr) { check(dcclBarrier(c_, sget(s))); }

 private:
  static dcclStream_t sget(Stream* s) { return s ? s->get() : nullptr; }
  static void need(bool ok, const char* what) {
    if (!ok) throw Error(dcclInvalidArgument, what);
  }
  dcclComm_t c_ = nullptr;
};

// Batches calls (dcclGroupStart/End). Call end() to submit and see errors; the
// destructor ends a group still open (errors then go to dcclGetLastError only).
class Group {
 public:
  Group() { check(dcclGroupStart()); }
  ~Group() {
    if (open_) dcclGroupEnd();
  }
  void end() {
    open_ = false;
    check(dcclGroupEnd());
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

 private:
  bool open_ = true;
};

}  // namespace dccl
