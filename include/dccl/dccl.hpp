// DirectCCL C++ API: RAII handles over the C API, dccl::Error, and collectives
// on any contiguous range (std::vector, std::array, std::span, const or not for
// the source) of int8..uint64, float, double, dccl::half or dccl::bfloat16, plus
// untyped overloads (pointers, count, dcclDataType_t) for everything else.
#pragma once
#if __cplusplus < 202002L
#error "dccl/dccl.hpp needs C++20 (-std=c++20 or later); the C API, dccl/dccl.h, builds as C99 or C++11 and later"
#endif
#include <cstdint>
#include <cstring>
#include <exception>
#include <ranges>
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

// IEEE 754 binary16 (dcclFloat16): storage with round-to-nearest-even
// conversions from and to float.
struct half {
  uint16_t bits = 0;
  half() = default;
  explicit half(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static half from_bits(uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN stays NaN
    const int e = static_cast<int>(ax >> 23);
    uint32_t mant = ax & 0x7fffffu;
    if (e >= 143) return static_cast<uint16_t>(sign | 0x7c00u);  // beyond the range: infinity
    uint32_t h, rest, halfway;
    if (e >= 113) {  // a normal half
      h = (static_cast<uint32_t>(e - 112) << 10) | (mant >> 13);
      rest = mant & 0x1fffu;
      halfway = 0x1000u;
    } else {  // a subnormal half or zero
      if (e < 102) return static_cast<uint16_t>(sign);
      mant |= 0x800000u;
      const int shift = 126 - e;
      h = mant >> shift;
      rest = mant & ((1u << shift) - 1u);
      halfway = 1u << (shift - 1);
    }
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;  // a carry may reach infinity: correct
    return static_cast<uint16_t>(sign | h);
  }
  static float to_float(uint16_t b) {
    const uint32_t sign = (b & 0x8000u) << 16, e = (b >> 10) & 0x1fu, m = b & 0x3ffu;
    if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
      const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
      return sign ? -v : v;
    }
    const uint32_t x = sign | (e == 0x1fu ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13));
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
  }
};

// bfloat16 (dcclBfloat16): the top half of a float, rounded to nearest even.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  static float to_float(uint16_t b) {
    const uint32_t x = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
  }
};
static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);

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
  else if constexpr (std::is_same_v<U, half>) return dcclFloat16;
  else if constexpr (std::is_same_v<U, bfloat16>) return dcclBfloat16;
  else static_assert(sizeof(T) == 0, "no dccl datatype for this type; use the untyped overloads");
}

// A buffer the collectives read: any contiguous, sized range (const or not).
template <class R>
concept Source = std::ranges::contiguous_range<R> && std::ranges::sized_range<R>;
// A buffer they write: the same, with writable elements.
template <class R>
concept Dest = Source<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
template <class R>
using element_t = std::remove_cv_t<std::ranges::range_value_t<R>>;

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
  // Destroyed while an exception leaves its scope (stack unwinding): aborted, so that
  // ranks waiting for this one in a call it will not make fail at once (a destroy
  // would meet them, and each side would wait the whole timeout for the other).
  // Otherwise destroyed: the other ranks' last calls with this one end first.
  ~Communicator() {
    if (c_) std::uncaught_exceptions() > unwinding_ ? dcclCommAbort(c_) : dcclCommDestroy(c_);
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

  // ---- typed: element type and count from the ranges ----
  template <Source S, Dest R>
  void all_reduce(const S& send, R&& recv, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    same<S, R>();
    need(std::ranges::size(recv) == std::ranges::size(send), "all_reduce: send and recv sizes differ");
    all_reduce(std::ranges::data(send), std::ranges::data(recv), std::ranges::size(send), datatype_of<element_t<S>>(), op, s);
  }
  template <Dest R>
  void all_reduce(R&& buf, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    all_reduce(std::ranges::data(buf), std::ranges::data(buf), std::ranges::size(buf), datatype_of<element_t<R>>(), op, s);
  }
  // recv is used on the root only (it may be empty elsewhere).
  template <Source S, Dest R>
  void reduce(const S& send, R&& recv, int root, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    same<S, R>();
    need(rank() != root || std::ranges::size(recv) == std::ranges::size(send), "reduce: recv on the root must match send");
    reduce(std::ranges::data(send), std::ranges::data(recv), std::ranges::size(send), datatype_of<element_t<S>>(), op, root, s);
  }
  template <Dest R>
  void broadcast(R&& buf, int root, Stream* s = nullptr) {
    broadcast(std::ranges::data(buf), std::ranges::data(buf), std::ranges::size(buf), datatype_of<element_t<R>>(), root, s);
  }
  template <Source S, Dest R>
  void all_gather(const S& send, R&& recv, Stream* s = nullptr) {
    same<S, R>();
    need(std::ranges::size(recv) == std::ranges::size(send) * static_cast<size_t>(size()),
         "all_gather: recv must hold size()*send elements");
    all_gather(std::ranges::data(send), std::ranges::data(recv), std::ranges::size(send), datatype_of<element_t<S>>(), s);
  }
  template <Source S, Dest R>
  void reduce_scatter(const S& send, R&& recv, dcclRedOp_t op = dcclSum, Stream* s = nullptr) {
    same<S, R>();
    need(std::ranges::size(send) == std::ranges::size(recv) * static_cast<size_t>(size()),
         "reduce_scatter: send must hold size()*recv elements");
    reduce_scatter(std::ranges::data(send), std::ranges::data(recv), std::ranges::size(recv), datatype_of<element_t<S>>(), op, s);
  }
  template <Source S, Dest R>
  void all_to_all(const S& send, R&& recv, Stream* s = nullptr) {
    same<S, R>();
    const size_t n = static_cast<size_t>(size());
    need(std::ranges::size(send) == std::ranges::size(recv) && std::ranges::size(send) % n == 0,
         "all_to_all: sizes must match and divide by size()");
    all_to_all(std::ranges::data(send), std::ranges::data(recv), std::ranges::size(send) / n, datatype_of<element_t<S>>(), s);
  }
  template <Source S>
  void send(const S& buf, int peer, Stream* s = nullptr) {
    send(std::ranges::data(buf), std::ranges::size(buf), datatype_of<element_t<S>>(), peer, s);
  }
  template <Dest R>
  void recv(R&& buf, int peer, Stream* s = nullptr) {
    recv(std::ranges::data(buf), std::ranges::size(buf), datatype_of<element_t<R>>(), peer, s);
  }

  // ---- untyped: the C API's arguments, for types the templates do not know ----
  void all_reduce(const void* send, void* recv, size_t count, dcclDataType_t t, dcclRedOp_t op = dcclSum,
                  Stream* s = nullptr) {
    check(dcclAllReduce(send, recv, count, t, op, c_, sget(s)));
  }
  void reduce(const void* send, void* recv, size_t count, dcclDataType_t t, dcclRedOp_t op, int root,
              Stream* s = nullptr) {
    check(dcclReduce(send, recv, count, t, op, root, c_, sget(s)));
  }
  void broadcast(const void* send, void* recv, size_t count, dcclDataType_t t, int root, Stream* s = nullptr) {
    check(dcclBroadcast(send, recv, count, t, root, c_, sget(s)));
  }
  void all_gather(const void* send, void* recv, size_t sendcount, dcclDataType_t t, Stream* s = nullptr) {
    check(dcclAllGather(send, recv, sendcount, t, c_, sget(s)));
  }
  void reduce_scatter(const void* send, void* recv, size_t recvcount, dcclDataType_t t, dcclRedOp_t op = dcclSum,
                      Stream* s = nullptr) {
    check(dcclReduceScatter(send, recv, recvcount, t, op, c_, sget(s)));
  }
  void all_to_all(const void* send, void* recv, size_t count, dcclDataType_t t, Stream* s = nullptr) {
    check(dcclAlltoAll(send, recv, count, t, c_, sget(s)));
  }
  void send(const void* buf, size_t count, dcclDataType_t t, int peer, Stream* s = nullptr) {
    check(dcclSend(buf, count, t, peer, c_, sget(s)));
  }
  void recv(void* buf, size_t count, dcclDataType_t t, int peer, Stream* s = nullptr) {
    check(dcclRecv(buf, count, t, peer, c_, sget(s)));
  }
  void barrier(Stream* s = nullptr) { check(dcclBarrier(c_, sget(s))); }

 private:
  static dcclStream_t sget(Stream* s) { return s ? s->get() : nullptr; }
  template <class S, class R>
  static constexpr void same() {
    static_assert(std::is_same_v<element_t<S>, element_t<R>>, "send and recv element types differ");
  }
  static void need(bool ok, const char* what) {
    if (!ok) throw Error(dcclInvalidArgument, what);
  }
  dcclComm_t c_ = nullptr;
  int unwinding_ = std::uncaught_exceptions();  // exceptions in flight when this was made
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
