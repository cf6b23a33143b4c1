// dccl-perf's measurement; see bench.hpp.
#include "dccl-perf/bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace dcclperf {
namespace {

struct Ptrs {
  void* send;
  void* recv;
};

char* at(void* base, size_t elems, size_t elem) { return static_cast<char*>(base) + elems * elem; }

// nccl-tests' buffer use: in place, all_gather sends from its block of the
// receive buffer, reduce_scatter receives into its block of the send buffer,
// every other collective uses the receive buffer for both.
Ptrs pointers(const Ctx& c, const Layout& l, bool in_place) {
  if (!in_place) return {c.sendbuf, c.recvbuf};
  const size_t r = static_cast<size_t>(c.rank);
  void* base = c.opt.coll == Coll::ReduceScatter ? c.sendbuf : c.recvbuf;
  return {at(base, l.send_inplace_off * r, c.elem), at(base, l.recv_inplace_off * r, c.elem)};
}

dcclResult_t launch(const Ctx& c, const Case& k, const Ptrs& p) {
  const size_t n = k.lay.param_count;
  const dcclDataType_t t = k.type;
  switch (k.coll) {
    case Coll::AllReduce: return dcclAllReduce(p.send, p.recv, n, t, k.op, c.comm, c.stream);
    case Coll::AllGather: return dcclAllGather(p.send, p.recv, n, t, c.comm, c.stream);
    case Coll::ReduceScatter: return dcclReduceScatter(p.send, p.recv, n, t, k.op, c.comm, c.stream);
    case Coll::Broadcast: return dcclBroadcast(p.send, p.recv, n, t, k.root, c.comm, c.stream);
    case Coll::Reduce: return dcclReduce(p.send, p.recv, n, t, k.op, k.root, c.comm, c.stream);
    case Coll::AllToAll: return dcclAlltoAll(p.send, p.recv, n, t, c.comm, c.stream);
    case Coll::SendRecv: {
      const int to = (c.rank + 1) % c.nranks, from = (c.rank - 1 + c.nranks) % c.nranks;
      dcclResult_t r = dcclGroupStart();
      if (r != dcclSuccess) return r;
      dcclResult_t rs = dcclSend(p.send, n, t, to, c.comm, c.stream);
      dcclResult_t rr = rs == dcclSuccess ? dcclRecv(p.recv, n, t, from, c.comm, c.stream) : rs;
      r = dcclGroupEnd();  // always close the group
      return rs != dcclSuccess ? rs : rr != dcclSuccess ? rr : r;
    }
  }
  return dcclInvalidArgument;
}

void sync(Ctx& c) {
  if (c.stream) PERF_CHECK(c, dcclStreamSynchronize(c.stream));
}

// Zero-fills the receive region (no expected value is 0), then writes this
// rank's input into the send region (which in place may overlap it).
void init_buffers(Ctx& c, const Case& k, const Ptrs& p) {
  if (k.lay.recv_count) PERF_CHECK(c, dcclMemset(p.recv, 0, k.lay.recv_count * c.elem));
  if (k.lay.send_count) {
    fill_input(k, c.rank, c.stage.data());
    PERF_CHECK(c, dcclMemcpy(p.send, c.stage.data(), k.lay.send_count * c.elem));
  }
}

size_t check(Ctx& c, const Case& k, const Ptrs& p) {
  if (!k.lay.recv_count) return 0;
  PERF_CHECK(c, dcclMemcpy(c.stage.data(), p.recv, k.lay.recv_count * c.elem));
  return count_wrong(k, c.rank, c.stage.data());
}

uint64_t staged_bytes(Ctx& c) {
  dcclStats_t s{};
  PERF_CHECK(c, dcclCommGetStats(c.comm, &s));
  return s.bytesRelayedHost;
}

void check_launch(Ctx& c, const Case& k, bool in_place, dcclResult_t r) {
  if (r == dcclSuccess) return;
  char what[160];
  std::snprintf(what, sizeof what, "%s %s (count %zu, %s, %s, root %d)", coll_name(k.coll),
                in_place ? "in place" : "out of place", k.lay.param_count, dtype_label(k.type),
                coll_has_op(k.coll) ? op_label(k.op) : "no op", coll_has_root(k.coll) ? k.root : -1);
  fail(c, what, r);
}

// Returns this rank's time per iteration (us), wrong elements and staged ratio.
Result measure(Ctx& c, const Case& k, bool in_place) {
  Result res;
  const Ptrs p = pointers(c, k.lay, in_place);
  init_buffers(c, k, p);
  for (int i = 0; i < c.opt.warmup; ++i) check_launch(c, k, in_place, launch(c, k, p));
  sync(c);
  const uint64_t staged0 = staged_bytes(c);
  const auto t0 = std::chrono::steady_clock::now();
  const int ops = c.opt.iters * c.opt.agg;  // -m: agg operations per timed iteration
  for (int i = 0; i < ops; ++i) check_launch(c, k, in_place, launch(c, k, p));
  sync(c);
  const auto t1 = std::chrono::steady_clock::now();
  const uint64_t staged1 = staged_bytes(c);
  res.time_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / ops;
  if (c.opt.mem != dcclMemHost) {
    const double moved = static_cast<double>(ops) * static_cast<double>(k.lay.bytes);
    res.staged = moved > 0 ? static_cast<double>(staged1 - staged0) / moved : 0.0;
  }
  if (c.opt.check && (!in_place || in_place_checked(k.coll))) {  // untimed, on fresh data
    init_buffers(c, k, p);
    check_launch(c, k, in_place, launch(c, k, p));
    sync(c);
    res.wrong = static_cast<double>(check(c, k, p));
  }
  return res;
}

}  // namespace

void fail(const Ctx& c, const char* what, dcclResult_t r) {
  const char* last = dcclGetLastError(c.comm);
  // Before init the rank is not known here (the library's text names it when it can).
  const std::string who = c.comm ? "rank " + std::to_string(c.rank) + ": " : "";
  std::fprintf(stderr, "dccl-perf: %s%s: %s (%s)\n", who.c_str(), what, dcclGetErrorString(r),
               last && *last ? last : "no details");
  std::fflush(stderr);
  if (c.comm) dcclCommAbort(c.comm);
  std::exit(1);
}

void alloc_buffers(Ctx& c) {
  const Layout l = layout(c.opt.coll, c.opt.max_bytes, c.elem, c.nranks);
  c.buf_bytes = std::max({l.send_count, l.recv_count, size_t{1}}) * c.elem;
  PERF_CHECK(c, dcclMemAlloc(&c.sendbuf, c.buf_bytes, c.opt.mem));
  PERF_CHECK(c, dcclMemAlloc(&c.recvbuf, c.buf_bytes, c.opt.mem));
  c.stage.assign(c.buf_bytes, 0);
}

void free_buffers(Ctx& c) {
  if (c.sendbuf) PERF_CHECK(c, dcclMemFree(c.sendbuf));
  if (c.recvbuf) PERF_CHECK(c, dcclMemFree(c.recvbuf));
  c.sendbuf = c.recvbuf = nullptr;
}

Row run_size(Ctx& c, size_t bytes) {
  Case k;
  k.coll = c.opt.coll;
  k.type = c.opt.type;
  k.op = c.opt.op;
  k.nranks = c.nranks;
  k.root = c.opt.root;
  k.lay = layout(k.coll, bytes, c.elem, c.nranks);
  Row row;
  row.bytes = k.lay.bytes;
  row.count = k.lay.param_count;
  row.out_of_place = measure(c, k, false);
  row.in_place = measure(c, k, true);

  // Combine over ranks: the time as -a asks (default the slowest rank's); wrong
  // counts and staged summed.
  double tmax[2] = {row.out_of_place.time_us, row.in_place.time_us};
  double sums[4] = {row.out_of_place.wrong, row.in_place.wrong, row.out_of_place.staged,
                    row.in_place.staged};
  if (c.opt.average == 0 && c.rank != 0) tmax[0] = tmax[1] = 0;  // rank 0's, by a sum
  const dcclRedOp_t how = c.opt.average == 2 ? dcclMin : c.opt.average == 3 ? dcclMax : dcclSum;
  PERF_CHECK(c, dcclAllReduce(tmax, tmax, 2, dcclFloat64, how, c.comm, nullptr));
  if (c.opt.average == 1)
    for (double& t : tmax) t /= c.nranks;
  PERF_CHECK(c, dcclAllReduce(sums, sums, 4, dcclFloat64, dcclSum, c.comm, nullptr));
  Result* rs[2] = {&row.out_of_place, &row.in_place};
  for (int v = 0; v < 2; ++v) {
    Result& r = *rs[v];
    r.time_us = tmax[v];
    const double sec = r.time_us * 1e-6;
    r.algbw = sec > 0 ? static_cast<double>(k.lay.bytes) / 1e9 / sec : 0.0;
    r.busbw = r.algbw * bus_factor(k.coll, c.nranks);
    if (r.wrong >= 0) r.wrong = sums[v];  // checked on every rank alike
    if (c.opt.mem != dcclMemHost) r.staged = sums[2 + v] / c.nranks;
  }
  return row;
}

}  // namespace dcclperf
