// Bad input to the C API is refused with the documented code and a
// dcclGetLastError text naming the argument. Refusals are decided locally,
// before any communication, so one rank alone may make a bad call and the
// communicator still works afterwards. Ranks are threads of this process.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dccl/dccl.h"
#include "rank_threads.hpp"

namespace {

// How a C caller passes a value outside an enum's range.
template <class E>
E as_enum(int v) {
  static_assert(sizeof(E) == sizeof(int));
  E e;
  std::memcpy(&e, &v, sizeof(e));
  return e;
}

// Rank 0 makes the id; then every rank joins at once from its own thread.
std::vector<dcclComm_t> make_comms(int n) {
  dcclUniqueId id;
  EXPECT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
  std::vector<dcclComm_t> comms(static_cast<size_t>(n), nullptr);
  on_ranks(n, [&](int r) {
    dcclResult_t rc = dcclCommInitRank(&comms[static_cast<size_t>(r)], n, id, r);
    EXPECT_EQ(rc, dcclSuccess) << "rank " << r << ": " << last_error();
  });
  return comms;
}

// Communicators shared by the tests of one world size (made once).
std::map<int, std::vector<dcclComm_t>> g_comms;
const std::vector<dcclComm_t>& comms(int n) {
  if (!g_comms.count(n)) g_comms.emplace(n, make_comms(n));
  return g_comms.at(n);
}

class Env : public ShmApiEnv {
 public:
  Env() : ShmApiEnv("10") {}
  void TearDown() override {
    for (auto& [n, cs] : g_comms)
      on_ranks(n, [&](int r) { EXPECT_EQ(dcclCommDestroy(cs[static_cast<size_t>(r)]), dcclSuccess) << last_error(); });
    g_comms.clear();
  }
};
[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new Env);

enum Fn { kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter, kAlltoAll, kSend, kRecv, kNumFns };
const char* const kFnName[] = {"dcclAllReduce", "dcclReduce",   "dcclBroadcast", "dcclAllGather",
                               "dcclReduceScatter", "dcclAlltoAll", "dcclSend",   "dcclRecv"};

// One C API call; `root` is the peer for send/recv.
struct Call {
  Fn fn;
  const void* send;
  void* recv;
  size_t count;
  dcclDataType_t dt = dcclFloat32;
  dcclRedOp_t op = dcclSum;
  int root = 0;
  dcclComm_t comm = nullptr;
  dcclStream_t stream = nullptr;
  dcclResult_t run() const {
    switch (fn) {
      case kAllReduce: return dcclAllReduce(send, recv, count, dt, op, comm, stream);
      case kReduce: return dcclReduce(send, recv, count, dt, op, root, comm, stream);
      case kBroadcast: return dcclBroadcast(send, recv, count, dt, root, comm, stream);
      case kAllGather: return dcclAllGather(send, recv, count, dt, comm, stream);
      case kReduceScatter: return dcclReduceScatter(send, recv, count, dt, op, comm, stream);
      case kAlltoAll: return dcclAlltoAll(send, recv, count, dt, comm, stream);
      case kSend: return dcclSend(send, count, dt, root, comm, stream);
      case kRecv: return dcclRecv(recv, count, dt, root, comm, stream);
      default: return dcclInternalError;
    }
  }
};

struct Case {
  std::string name;
  Call call;
  dcclResult_t want;
  std::string word;  // the last error must contain it
};

// Calls that differ from a valid one (on rank `rank` of `n`) in exactly one argument.
std::vector<Case> bad_calls(dcclComm_t comm, int rank, int n, void* buf, dcclStream_t stream) {
  std::vector<Case> v;
  for (int f = 0; f < kNumFns; ++f) {
    const Fn fn = static_cast<Fn>(f);
    const Call base{fn, buf, buf, 4, dcclFloat32, dcclSum, rank, comm, stream};
    auto add = [&](const std::string& what, dcclResult_t want, const std::string& word, auto mutate) {
      Call c = base;
      mutate(c);
      v.push_back({std::string(kFnName[f]) + " with " + what, c, want, word});
    };
    if (fn != kRecv) add("NULL sendbuff", dcclInvalidArgument, "sendbuff", [](Call& c) { c.send = nullptr; });
    if (fn != kSend) add("NULL recvbuff", dcclInvalidArgument, "recvbuff", [](Call& c) { c.recv = nullptr; });
    for (size_t cnt : {static_cast<size_t>(-1), static_cast<size_t>(-5), SIZE_MAX / 4 + 1, size_t{1} << 62})
      add("count " + std::to_string(cnt), dcclInvalidArgument, "count", [cnt](Call& c) { c.count = cnt; });
    for (int dt : {10, -1, 1000})
      add("datatype " + std::to_string(dt), dcclInvalidArgument, "datatype",
          [dt](Call& c) { c.dt = as_enum<dcclDataType_t>(dt); });
    if (fn == kAllReduce || fn == kReduce || fn == kReduceScatter)
      for (int op : {5, -1})
        add("op " + std::to_string(op), dcclInvalidArgument, "op " + std::to_string(op),
            [op](Call& c) { c.op = as_enum<dcclRedOp_t>(op); });
    if (fn == kReduce || fn == kBroadcast)
      for (int root : {-1, n, n + 100})
        add("root " + std::to_string(root), dcclInvalidArgument, "root", [root](Call& c) { c.root = root; });
    if (fn == kSend || fn == kRecv)
      for (int peer : {-1, n})
        add("peer " + std::to_string(peer), dcclInvalidArgument, "peer", [peer](Call& c) { c.root = peer; });
    add("NULL comm", dcclInvalidArgument, "comm", [](Call& c) { c.comm = nullptr; });
  }
  return v;
}

void expect_refused(const Case& k) {
  SCOPED_TRACE(k.name);
  EXPECT_EQ(k.call.run(), k.want);
  const std::string text = last_error(k.call.comm);
  EXPECT_NE(text.find(k.word), std::string::npos) << "last error '" << text << "' does not name " << k.word;
  EXPECT_NE(text.find(kFnName[k.call.fn]), std::string::npos) << "last error '" << text << "' does not name the call";
  int me = -1;
  if (k.call.comm && dcclCommUserRank(k.call.comm, &me) == dcclSuccess) {
    const std::string who = "rank " + std::to_string(me) + ": ";
    EXPECT_EQ(text.rfind(who, 0), 0u) << "last error '" << text << "' does not begin with '" << who << "'";
  }
}

// Runs the whole table of bad calls on rank r's communicator.
void refuse_all(const std::vector<dcclComm_t>& cs, int r) {
  const int n = static_cast<int>(cs.size());
  std::vector<float> buf(64 * static_cast<size_t>(n));
  dcclStream_t s = nullptr;
  ASSERT_EQ(dcclStreamCreate(&s), dcclSuccess) << last_error();
  for (dcclStream_t st : {static_cast<dcclStream_t>(nullptr), s})
    for (const Case& k : bad_calls(cs[static_cast<size_t>(r)], r, n, buf.data(), st)) expect_refused(k);
  EXPECT_EQ(dcclStreamQuery(s), dcclSuccess) << "a refused call left work on the stream";
  EXPECT_EQ(dcclStreamDestroy(s), dcclSuccess) << last_error();
}

class ApiArgs : public ::testing::TestWithParam<int> {};

TEST_P(ApiArgs, OneRankRefusedAloneThenAllReduceWorks) {
  const auto& cs = comms(GetParam());
  ASSERT_EQ(cs.size(), static_cast<size_t>(GetParam()));
  refuse_all(cs, GetParam() - 1);  // the other ranks do nothing meanwhile
  refuse_all(cs, 0);
  expect_allreduce_works(cs);
}

TEST_P(ApiArgs, EveryRankRefusedConcurrentlyThenAllReduceWorks) {
  const auto& cs = comms(GetParam());
  on_ranks(GetParam(), [&](int r) { refuse_all(cs, r); });
  expect_allreduce_works(cs, /*on_stream=*/true);
}

TEST_P(ApiArgs, CountZeroSucceedsWithNullBuffers) {
  const auto& cs = comms(GetParam());
  const int n = GetParam();
  on_ranks(n, [&](int r) {
    dcclComm_t c = cs[static_cast<size_t>(r)];
    for (int f = 0; f < kNumFns; ++f) {
      if (f == kSend || f == kRecv) continue;
      Call k{static_cast<Fn>(f), nullptr, nullptr, 0, dcclFloat32, dcclSum, n - 1, c, nullptr};
      EXPECT_EQ(k.run(), dcclSuccess) << kFnName[f] << " count 0 on rank " << r << ": " << last_error(c);
    }
    ASSERT_EQ(dcclGroupStart(), dcclSuccess);
    EXPECT_EQ(dcclSend(nullptr, 0, dcclInt32, (r + 1) % n, c, nullptr), dcclSuccess) << last_error(c);
    EXPECT_EQ(dcclRecv(nullptr, 0, dcclInt32, (r + n - 1) % n, c, nullptr), dcclSuccess) << last_error(c);
    EXPECT_EQ(dcclGroupEnd(), dcclSuccess) << last_error(c);
    EXPECT_EQ(dcclBarrier(c, nullptr), dcclSuccess) << last_error(c);
  });
  expect_allreduce_works(cs);
}

// Buffers the root does not use may be NULL elsewhere (as in NCCL).
TEST_P(ApiArgs, NonRootMayPassNullForUnusedBuffers) {
  const auto& cs = comms(GetParam());
  const int n = GetParam(), root = n - 1;
  on_ranks(n, [&](int r) {
    dcclComm_t c = cs[static_cast<size_t>(r)];
    std::vector<int64_t> in(33), out(33, -1);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(i) * (r + 1);
    EXPECT_EQ(dcclReduce(in.data(), r == root ? out.data() : nullptr, in.size(), dcclInt64, dcclSum, root, c, nullptr),
              dcclSuccess) << last_error(c);
    for (size_t i = 0; r == root && i < in.size(); ++i) EXPECT_EQ(out[i], static_cast<int64_t>(i) * n * (n + 1) / 2);
    std::vector<int64_t> b(17, r == root ? 42 : 0);
    EXPECT_EQ(dcclBroadcast(r == root ? b.data() : nullptr, b.data(), b.size(), dcclInt64, root, c, nullptr),
              dcclSuccess) << last_error(c);
    for (int64_t x : b) EXPECT_EQ(x, 42);
  });
}

// A refused call inside a group is not queued; the group still ends cleanly, and
// dcclGroupEnd returns the first refused call's error (as NCCL's does).
TEST_P(ApiArgs, RefusedCallInsideGroupIsNotQueued) {
  const auto& cs = comms(GetParam());
  const int n = GetParam();
  dcclComm_t c = cs[static_cast<size_t>(n - 1)];
  float x = 1;
  ASSERT_EQ(dcclGroupStart(), dcclSuccess);
  EXPECT_EQ(dcclAllReduce(&x, &x, 1, as_enum<dcclDataType_t>(42), dcclSum, c, nullptr), dcclInvalidArgument);
  EXPECT_EQ(dcclSend(&x, 1, dcclFloat32, n, c, nullptr), dcclInvalidArgument);
  EXPECT_NE(last_error(c).find("peer"), std::string::npos) << last_error(c);
  EXPECT_EQ(dcclGroupEnd(), dcclInvalidArgument);
  EXPECT_NE(last_error(c).find("datatype 42"), std::string::npos) << last_error(c);
  expect_allreduce_works(cs);
}

// A send to or receive from itself outside a group has no partner call and could
// never complete (before: 16 B succeeded through the eager path, 64 MiB waited out
// the timeout). Refused at once, on a stream too; inside a group it works.
TEST_P(ApiArgs, SendToSelfOutsideGroupIsRefused) {
  const auto& cs = comms(GetParam());
  const int n = GetParam();
  on_ranks(n, [&](int r) {
    dcclComm_t c = cs[static_cast<size_t>(r)];
    dcclStream_t s = nullptr;
    ASSERT_EQ(dcclStreamCreate(&s), dcclSuccess) << last_error();
    std::vector<int32_t> out(1 << 20), in(1 << 20, -1);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(i) * 3 + r;
    for (dcclStream_t st : {static_cast<dcclStream_t>(nullptr), s})
      for (size_t count : {size_t{4}, out.size()}) {
        EXPECT_EQ(dcclSend(out.data(), count, dcclInt32, r, c, st), dcclInvalidUsage);
        std::string text = last_error(c);
        EXPECT_NE(text.find("rank " + std::to_string(r) + ": dcclSend: send to itself"), std::string::npos) << text;
        EXPECT_NE(text.find("group"), std::string::npos) << text;
        EXPECT_EQ(dcclRecv(in.data(), count, dcclInt32, r, c, st), dcclInvalidUsage);
        text = last_error(c);
        EXPECT_NE(text.find("dcclRecv: receive from itself"), std::string::npos) << text;
      }
    EXPECT_EQ(dcclStreamQuery(s), dcclSuccess) << "a refused call left work on the stream";
    EXPECT_EQ(dcclStreamDestroy(s), dcclSuccess) << last_error();
    ASSERT_EQ(dcclGroupStart(), dcclSuccess);
    EXPECT_EQ(dcclSend(out.data(), out.size(), dcclInt32, r, c, nullptr), dcclSuccess) << last_error(c);
    EXPECT_EQ(dcclRecv(in.data(), in.size(), dcclInt32, r, c, nullptr), dcclSuccess) << last_error(c);
    EXPECT_EQ(dcclGroupEnd(), dcclSuccess) << last_error(c);
    EXPECT_EQ(in, out) << "rank " << r << ": the grouped send to itself delivered wrong data";
  });
  expect_allreduce_works(cs);
}

// dcclBcast, NCCL's in-place broadcast: every root, checked data; bad input
// refused with the rank, the call and the argument named.
TEST_P(ApiArgs, BcastInPlaceFromEveryRoot) {
  const auto& cs = comms(GetParam());
  const int n = GetParam();
  on_ranks(n, [&](int r) {
    dcclComm_t c = cs[static_cast<size_t>(r)];
    for (int root = 0; root < n; ++root) {
      std::vector<double> b(4099, -1.0);
      if (r == root)
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i) * 0.5 + root;
      ASSERT_EQ(dcclBcast(b.data(), b.size(), dcclFloat64, root, c, nullptr), dcclSuccess) << last_error(c);
      for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], static_cast<double>(i) * 0.5 + root) << "root " << root;
    }
    double x = 0;
    EXPECT_EQ(dcclBcast(nullptr, 4, dcclFloat64, 0, c, nullptr), dcclInvalidArgument);
    EXPECT_NE(last_error(c).find("rank " + std::to_string(r) + ": dcclBcast: buff is NULL"), std::string::npos)
        << last_error(c);
    EXPECT_EQ(dcclBcast(&x, 1, dcclFloat64, n, c, nullptr), dcclInvalidArgument);
    EXPECT_NE(last_error(c).find("root " + std::to_string(n)), std::string::npos) << last_error(c);
    EXPECT_EQ(dcclBcast(&x, 1, as_enum<dcclDataType_t>(77), 0, c, nullptr), dcclInvalidArgument);
    EXPECT_EQ(dcclBcast(&x, 1, dcclFloat64, 0, nullptr, nullptr), dcclInvalidArgument);
  });
  expect_allreduce_works(cs);
}

// Mixed memory kinds and device buffers that overrun their allocation are
// refused before running: found while running, they would fail the communicator.
TEST_P(ApiArgs, BadDeviceBuffersRefusedBeforeRunning) {
  const auto& cs = comms(GetParam());
  const int n = GetParam();
  dcclComm_t c = cs[static_cast<size_t>(n - 1)];
  void *d = nullptr, *e = nullptr, *gone = nullptr;
  ASSERT_EQ(dcclMemAlloc(&d, 64, dcclMemSim), dcclSuccess) << last_error();
  ASSERT_EQ(dcclMemAlloc(&e, 64, dcclMemSim), dcclSuccess) << last_error();
  ASSERT_EQ(dcclMemAlloc(&gone, 64, dcclMemSim), dcclSuccess) << last_error();
  ASSERT_EQ(dcclMemFree(gone), dcclSuccess) << last_error();
  float h[16] = {0};
  auto refused = [&](const char* what, Fn fn, const void* send, void* recv, size_t count, const char* word) {
    expect_refused({what, {fn, send, recv, count, dcclFloat32, dcclSum, n - 1, c}, dcclInvalidArgument, word});
  };
  refused("host send, sim recv", kAllReduce, h, e, 16, "memory");
  refused("sim send, host recv", kReduceScatter, d, h, 1, "memory");
  refused("send overruns", kAllReduce, d, e, 17, "sendbuff");
  refused("interior send overruns", kSend, static_cast<char*>(d) + 8, nullptr, 15, "sendbuff");
  refused("freed recv", kRecv, nullptr, gone, 4, "recvbuff");
  refused("freed recv", kBroadcast, d, gone, 4, "recvbuff");
  refused("alltoall overruns", kAlltoAll, d, e, 16 / static_cast<size_t>(n) + 1, "sendbuff");
  EXPECT_TRUE(dcclMemFree(d) == dcclSuccess && dcclMemFree(e) == dcclSuccess) << last_error();
  dcclResult_t ae = dcclInternalError;
  EXPECT_EQ(dcclCommGetAsyncError(c, &ae), dcclSuccess);
  EXPECT_EQ(ae, dcclSuccess) << last_error(c);
  expect_allreduce_works(cs);
  // Valid sim buffers, at an offset inside the allocation, are accepted.
  on_ranks(n, [&](int r) {
    dcclComm_t cr = cs[static_cast<size_t>(r)];
    void* buf = nullptr;
    ASSERT_EQ(dcclMemAlloc(&buf, 256, dcclMemSim), dcclSuccess) << last_error();
    std::vector<int32_t> in(16, r + 1), out(16, 0);
    char* at = static_cast<char*>(buf) + 192;
    ASSERT_EQ(dcclMemcpy(at, in.data(), 64), dcclSuccess) << last_error();
    EXPECT_EQ(dcclAllReduce(at, at, 16, dcclInt32, dcclSum, cr, nullptr), dcclSuccess) << last_error(cr);
    ASSERT_EQ(dcclMemcpy(out.data(), at, 64), dcclSuccess) << last_error();
    for (int32_t x : out) EXPECT_EQ(x, n * (n + 1) / 2);
    EXPECT_EQ(dcclMemFree(buf), dcclSuccess);
  });
}

// sendbuff and recvbuff may overlap only in the documented in-place forms; any other
// overlap (before: undefined results) is refused naming both, and the in-place forms run.
TEST_P(ApiArgs, OverlapOtherThanInPlaceRefused) {
  const auto& cs = comms(GetParam());
  const int n = GetParam();
  const int me = n - 1;
  dcclComm_t c = cs[static_cast<size_t>(me)];
  std::vector<float> b(16 * static_cast<size_t>(n) + 16);
  float* p = b.data();
  auto refused = [&](const char* what, Fn fn, const void* send, void* recv, size_t count) {
    expect_refused({what, {fn, send, recv, count, dcclFloat32, dcclSum, me, c}, dcclInvalidArgument, "overlap"});
  };
  refused("allreduce, send one element in", kAllReduce, p + 1, p, 8);
  refused("allreduce, recv one element in", kAllReduce, p, p + 1, 8);
  refused("reduce at the root", kReduce, p + 2, p, 8);
  refused("broadcast from the root", kBroadcast, p, p + 3, 8);
  refused("alltoall shifted", kAlltoAll, p + 1, p, 4);
  if (n > 1) {
    refused("allgather at recvbuff's start on rank > 0", kAllGather, p, p, 4);
    refused("reduce_scatter with recvbuff at sendbuff's start on rank > 0", kReduceScatter, p, p, 4);
  } else {
    refused("allgather one element off its block", kAllGather, p + 1, p, 4);
  }
  expect_allreduce_works(cs);
  // The in-place forms still run, on every rank.
  on_ranks(n, [&](int r) {
    dcclComm_t cr = cs[static_cast<size_t>(r)];
    const size_t k = 4, nn = static_cast<size_t>(n);
    std::vector<int32_t> ag(k * nn, -1);
    for (size_t i = 0; i < k; ++i) ag[static_cast<size_t>(r) * k + i] = r * 10 + static_cast<int32_t>(i);
    EXPECT_EQ(dcclAllGather(ag.data() + static_cast<size_t>(r) * k, ag.data(), k, dcclInt32, cr, nullptr), dcclSuccess)
        << last_error(cr);
    for (size_t q = 0; q < nn; ++q)
      for (size_t i = 0; i < k; ++i) EXPECT_EQ(ag[q * k + i], static_cast<int32_t>(q) * 10 + static_cast<int32_t>(i));
    std::vector<int32_t> rs(k * nn);
    for (size_t i = 0; i < rs.size(); ++i) rs[i] = static_cast<int32_t>(i) + r;
    EXPECT_EQ(dcclReduceScatter(rs.data(), rs.data() + static_cast<size_t>(r) * k, k, dcclInt32, dcclSum, cr, nullptr),
              dcclSuccess)
        << last_error(cr);
    for (size_t i = 0; i < k; ++i) {
      const size_t at = static_cast<size_t>(r) * k + i;
      EXPECT_EQ(rs[at], static_cast<int32_t>(nn * at) + n * (n - 1) / 2);
    }
  });
}

std::string world_name(const ::testing::TestParamInfo<int>& i) {
  std::string name = "n";
  return name += std::to_string(i.param);
}
INSTANTIATE_TEST_SUITE_P(Ranks, ApiArgs, ::testing::Values(1, 2, 3), world_name);


TEST(ApiArgsInit, InitRankRefusesBadArguments) {
  dcclUniqueId id;
  ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
  dcclComm_t c = reinterpret_cast<dcclComm_t>(0x1);
  expect_code(dcclCommInitRank(&c, 0, id, 0), dcclInvalidArgument, "nranks", "nranks 0");
  EXPECT_EQ(c, nullptr) << "a failed init must leave *comm NULL";
  expect_code(dcclCommInitRank(&c, -3, id, 0), dcclInvalidArgument, "nranks", "nranks -3");
  expect_code(dcclCommInitRank(&c, 2, id, -1), dcclInvalidArgument, "rank -1", "rank -1");
  expect_code(dcclCommInitRank(&c, 2, id, 2), dcclInvalidArgument, "rank 2", "rank == nranks");
  expect_code(dcclCommInitRank(&c, 2, id, 5), dcclInvalidArgument, "rank 5", "rank > nranks");
  expect_code(dcclCommInitRank(nullptr, 1, id, 0), dcclInvalidArgument, "comm", "NULL comm pointer");
  expect_code(dcclGetUniqueId(nullptr), dcclInvalidArgument, "uniqueId", "dcclGetUniqueId(NULL)");

  std::mt19937 rng(12345);
  for (int trial = 0; trial < 4; ++trial) {
    dcclUniqueId junk;
    for (char& b : junk.internal) b = static_cast<char>(rng());
    expect_code(dcclCommInitRank(&c, 1, junk, 0), dcclInvalidArgument, "unique id", "random bytes as id");
  }
  dcclUniqueId zero{};
  expect_code(dcclCommInitRank(&c, 1, zero, 0), dcclInvalidArgument, "unique id", "all-zero id");
  for (size_t at : {size_t{5}, size_t{9}, size_t{30}, size_t{126}}) {
    dcclUniqueId bent = id;
    bent.internal[at] = static_cast<char>(bent.internal[at] ^ 0x40);
    expect_code(dcclCommInitRank(&c, 1, bent, 0), dcclInvalidArgument, "unique id", "one flipped bit");
  }
  // The refusals did not consume the store parked for the real id.
  ASSERT_EQ(dcclCommInitRank(&c, 1, id, 0), dcclSuccess) << last_error();
  expect_allreduce_works({c});
  EXPECT_EQ(dcclCommDestroy(c), dcclSuccess) << last_error();
}

// Destroyed and aborted handles are caught by the registry, without a crash.
TEST(ApiArgsInit, DestroyedOrAbortedCommunicatorIsCaught) {
  dcclComm_t gone[2] = {nullptr, nullptr};
  for (dcclComm_t& g : gone) {
    dcclUniqueId id;
    ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
    ASSERT_EQ(dcclCommInitRank(&g, 1, id, 0), dcclSuccess) << last_error();
  }
  ASSERT_EQ(dcclCommDestroy(gone[0]), dcclSuccess) << last_error();
  ASSERT_EQ(dcclCommAbort(gone[1]), dcclSuccess) << last_error();
  float x = 1;
  int v = 0;
  dcclStats_t st;
  dcclResult_t ae;
  for (dcclComm_t dead : gone) {
    expect_code(dcclAllReduce(&x, &x, 1, dcclFloat32, dcclSum, dead, nullptr), dcclInvalidUsage, "comm", "allreduce");
    expect_code(dcclReduce(&x, &x, 1, dcclFloat32, dcclSum, 0, dead, nullptr), dcclInvalidUsage, "comm", "reduce");
    expect_code(dcclBroadcast(&x, &x, 1, dcclFloat32, 0, dead, nullptr), dcclInvalidUsage, "comm", "broadcast");
    expect_code(dcclSend(&x, 1, dcclFloat32, 0, dead, nullptr), dcclInvalidUsage, "comm", "send");
    expect_code(dcclBarrier(dead, nullptr), dcclInvalidUsage, "comm", "barrier");
    expect_code(dcclCommCount(dead, &v), dcclInvalidUsage, "comm", "count");
    expect_code(dcclCommUserRank(dead, &v), dcclInvalidUsage, "comm", "user rank");
    expect_code(dcclCommGetStats(dead, &st), dcclInvalidUsage, "comm", "stats");
    expect_code(dcclCommGetAsyncError(dead, &ae), dcclInvalidUsage, "comm", "async error");
    expect_code(dcclCommAbort(dead), dcclInvalidUsage, "comm", "abort");
    expect_code(dcclCommDestroy(dead), dcclInvalidUsage, "destroyed twice", "destroy twice");
  }
  expect_code(dcclCommDestroy(nullptr), dcclInvalidArgument, "comm", "destroy NULL");
  expect_code(dcclBarrier(nullptr, nullptr), dcclInvalidArgument, "comm", "barrier on NULL");
  // A live communicator's queries refuse NULL outputs.
  dcclComm_t c = comms(1)[0];
  expect_code(dcclCommCount(c, nullptr), dcclInvalidArgument, "count", "count NULL");
  expect_code(dcclCommUserRank(c, nullptr), dcclInvalidArgument, "rank", "rank NULL");
  expect_code(dcclCommGetStats(c, nullptr), dcclInvalidArgument, "stats", "stats NULL");
  expect_code(dcclCommGetAsyncError(c, nullptr), dcclInvalidArgument, "asyncError", "async NULL");
  EXPECT_TRUE(dcclCommGetAsyncError(c, &ae) == dcclSuccess && ae == dcclSuccess) << last_error();
  expect_allreduce_works(comms(1));
}

// A thread that used a handle skips the registry lookup while no handle was
// unregistered since: destroying it must still be seen by that same thread, and a
// new handle at the same address must work.
TEST(ApiArgsInit, HandleUsedThenDestroyedOnTheSameThreadIsCaught) {
  float x = 2, y = 0;
  for (int round = 0; round < 3; ++round) {
    dcclUniqueId id;
    dcclComm_t c = nullptr;
    dcclStream_t s = nullptr;
    ASSERT_EQ(dcclGetUniqueId(&id), dcclSuccess) << last_error();
    ASSERT_EQ(dcclCommInitRank(&c, 1, id, 0), dcclSuccess) << last_error();
    ASSERT_EQ(dcclStreamCreate(&s), dcclSuccess) << last_error();
    ASSERT_EQ(dcclAllReduce(&x, &y, 1, dcclFloat32, dcclSum, c, s), dcclSuccess) << last_error(c);
    ASSERT_EQ(dcclStreamSynchronize(s), dcclSuccess) << last_error(c);
    EXPECT_EQ(y, 2.0f);
    ASSERT_EQ(dcclStreamDestroy(s), dcclSuccess) << last_error();
    expect_code(dcclAllReduce(&x, &y, 1, dcclFloat32, dcclSum, c, s), dcclInvalidUsage, "stream", "stream used, destroyed");
    y = 0;
    ASSERT_EQ(dcclAllReduce(&x, &y, 1, dcclFloat32, dcclSum, c, nullptr), dcclSuccess) << last_error(c);
    EXPECT_EQ(y, 2.0f);
    ASSERT_EQ(dcclCommDestroy(c), dcclSuccess) << last_error();
    expect_code(dcclAllReduce(&x, &y, 1, dcclFloat32, dcclSum, c, nullptr), dcclInvalidUsage, "comm", "comm used, destroyed");
    expect_code(dcclBarrier(c, nullptr), dcclInvalidUsage, "comm", "barrier after destroy");
  }
}

TEST(ApiArgsStream, DestroyedStreamIsCaught) {
  dcclComm_t c = comms(1)[0];
  dcclStream_t s = nullptr;
  ASSERT_EQ(dcclStreamCreate(&s), dcclSuccess) << last_error();
  ASSERT_EQ(dcclStreamDestroy(s), dcclSuccess) << last_error();
  float x = 1;
  expect_code(dcclAllReduce(&x, &x, 1, dcclFloat32, dcclSum, c, s), dcclInvalidUsage, "stream", "allreduce");
  expect_code(dcclBroadcast(&x, &x, 1, dcclFloat32, 0, c, s), dcclInvalidUsage, "stream", "broadcast");
  expect_code(dcclBarrier(c, s), dcclInvalidUsage, "stream", "barrier");
  expect_code(dcclStreamSynchronize(s), dcclInvalidUsage, "stream", "synchronize");
  expect_code(dcclStreamQuery(s), dcclInvalidUsage, "stream", "query");
  expect_code(dcclStreamDestroy(s), dcclInvalidUsage, "stream", "destroy twice");
  expect_code(dcclStreamDestroy(nullptr), dcclInvalidArgument, "stream", "destroy NULL");
  expect_code(dcclStreamCreate(nullptr), dcclInvalidArgument, "stream", "create into NULL");
  EXPECT_EQ(dcclStreamSynchronize(nullptr), dcclSuccess);
  EXPECT_EQ(dcclStreamQuery(nullptr), dcclSuccess);
  expect_allreduce_works(comms(1), /*on_stream=*/true);
}

TEST(ApiArgsGroup, GroupEndWithoutStartIsRefused) {
  expect_code(dcclGroupEnd(), dcclInvalidUsage, "dcclGroupStart", "end without start");
  ASSERT_EQ(dcclGroupStart(), dcclSuccess);
  ASSERT_EQ(dcclGroupStart(), dcclSuccess);
  EXPECT_EQ(dcclGroupEnd(), dcclSuccess);
  EXPECT_EQ(dcclGroupEnd(), dcclSuccess);
  expect_code(dcclGroupEnd(), dcclInvalidUsage, "dcclGroupStart", "one end too many");
}

TEST(ApiArgsMem, AllocAndFreeRefuseBadInput) {
  void* p = reinterpret_cast<void*>(0x1);
  expect_code(dcclMemAlloc(&p, 0, dcclMemHost), dcclInvalidArgument, "bytes", "0 host bytes");
  EXPECT_EQ(p, nullptr);
  expect_code(dcclMemAlloc(&p, 0, dcclMemSim), dcclInvalidArgument, "bytes", "0 sim bytes");
  expect_code(dcclMemAlloc(&p, 64, as_enum<dcclMemType_t>(7)), dcclInvalidArgument, "type", "type 7");
  expect_code(dcclMemAlloc(&p, 64, as_enum<dcclMemType_t>(-1)), dcclInvalidArgument, "type", "type -1");
  expect_code(dcclMemAlloc(nullptr, 64, dcclMemHost), dcclInvalidArgument, "ptr", "NULL ptr");
  expect_code(dcclMemAlloc(&p, SIZE_MAX, dcclMemHost), dcclInvalidArgument, "bytes", "SIZE_MAX bytes");
  const dcclResult_t cuda = dcclMemAlloc(&p, 64, dcclMemCuda);
  EXPECT_TRUE(cuda == dcclUnavailable || (cuda == dcclSuccess && dcclMemFree(p) == dcclSuccess)) << last_error();
  void* foreign = std::malloc(64);
  int on_stack = 0;
  expect_code(dcclMemFree(foreign), dcclInvalidArgument, "dcclMemAlloc", "malloc'd pointer");
  expect_code(dcclMemFree(&on_stack), dcclInvalidArgument, "dcclMemAlloc", "stack pointer");
  std::free(foreign);
  EXPECT_EQ(dcclMemFree(nullptr), dcclSuccess);

  for (dcclMemType_t t : {dcclMemHost, dcclMemSim}) {
    SCOPED_TRACE(t == dcclMemHost ? "host" : "sim");
    void* q = nullptr;
    ASSERT_EQ(dcclMemAlloc(&q, 4096, t), dcclSuccess) << last_error();
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(dcclMemFree(static_cast<char*>(q) + 64), dcclInvalidArgument) << "interior pointer";
    unsigned char back[16] = {0};
    EXPECT_EQ(dcclMemset(q, 7, 4096), dcclSuccess) << last_error();
    EXPECT_EQ(dcclMemcpy(back, q, sizeof(back)), dcclSuccess) << last_error();
    EXPECT_EQ(back[15], 7);
    expect_code(dcclMemcpy(nullptr, q, 16), dcclInvalidArgument, "dst", "memcpy to NULL");
    expect_code(dcclMemcpy(q, nullptr, 16), dcclInvalidArgument, "src", "memcpy from NULL");
    expect_code(dcclMemset(nullptr, 0, 16), dcclInvalidArgument, "dst", "memset NULL");
    EXPECT_EQ(dcclMemFree(q), dcclSuccess) << last_error();
    EXPECT_EQ(dcclMemFree(q), dcclInvalidArgument) << "double free";
  }
}

TEST(ApiArgsErrors, EveryCodeHasText) {
  std::vector<std::string> seen;
  for (int code = 0; code < dcclNumResults; ++code) {
    const char* t = dcclGetErrorString(static_cast<dcclResult_t>(code));
    ASSERT_NE(t, nullptr) << code;
    EXPECT_GT(std::strlen(t), 3u) << code;
    for (const auto& s : seen) EXPECT_NE(s, t) << "code " << code << " shares its text";
    seen.push_back(t);
  }
  for (int code : {static_cast<int>(dcclNumResults), 11, 99, -1, 1 << 30}) {
    const char* t = dcclGetErrorString(as_enum<dcclResult_t>(code));
    ASSERT_NE(t, nullptr) << code;
    EXPECT_NE(std::string(t).find("unknown"), std::string::npos) << code << ": " << t;
  }
  int version = 0;
  expect_code(dcclGetVersion(nullptr), dcclInvalidArgument, "version", "version NULL");
  EXPECT_EQ(dcclGetVersion(&version), dcclSuccess);
  EXPECT_EQ(version, DCCL_VERSION_CODE);
  EXPECT_EQ(version, DCCL_VERSION(DCCL_MAJOR, DCCL_MINOR, DCCL_PATCH));
  EXPECT_EQ(DCCL_VERSION(1, 2, 3), 10203);
  EXPECT_GT(DCCL_VERSION(0, 10, 0), DCCL_VERSION(0, 9, 99));
  EXPECT_GE(version, DCCL_VERSION(0, 1, 0));
}

// The last error belongs to the thread that made the failing call.
TEST(ApiArgsErrors, LastErrorIsPerThread) {
  EXPECT_EQ(dcclGroupEnd(), dcclInvalidUsage);
  const std::string mine = last_error();
  std::thread other([] {
    float x = 0;
    EXPECT_EQ(dcclAllReduce(&x, &x, 1, dcclFloat32, dcclSum, nullptr, nullptr), dcclInvalidArgument);
    EXPECT_NE(last_error().find("comm"), std::string::npos);
  });
  other.join();
  EXPECT_EQ(last_error(), mine);
}

}  // namespace
