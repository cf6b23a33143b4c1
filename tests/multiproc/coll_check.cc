// Multi-process correctness sweep, run under dccl-run: every collective x dtype x
// op, in place and out of place, several counts and algorithm settings, each
// result compared with a float64 / exact-integer reference computed here.
//   coll_check [--suite small|mid|large] [--mem host|sim]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_data.hpp"
#include "dccl/dccl.h"

namespace {

int g_rank = 0, g_n = 1;
long g_wrong = 0, g_checked = 0, g_failed_calls = 0;
dcclMemType_t g_mem = dcclMemHost;
std::string g_label;

#define CALL(expr)                                                                             \
  do {                                                                                         \
    dcclResult_t rc_ = (expr);                                                                 \
    if (rc_ != dcclSuccess) {                                                                  \
      fprintf(stderr, "rank %d: %s failed: %s: %s [%s]\n", g_rank, #expr, dcclGetErrorString(rc_), \
              dcclGetLastError(nullptr), g_label.c_str());                                     \
      ++g_failed_calls;                                                                        \
      return;                                                                                  \
    }                                                                                          \
  } while (0)

// A buffer in the memory under test with a host mirror.
struct Buf {
  std::vector<char> host;
  void* dev = nullptr;
  explicit Buf(size_t bytes) : host(bytes ? bytes : 1) {
    if (g_mem == dcclMemHost) {
      dev = host.data();
    } else if (dcclMemAlloc(&dev, host.size(), g_mem) != dcclSuccess) {
      fprintf(stderr, "rank %d: dcclMemAlloc: %s\n", g_rank, dcclGetLastError(nullptr));
      exit(3);
    }
  }
  ~Buf() {
    if (g_mem != dcclMemHost) dcclMemFree(dev);
  }
  void up() {
    if (g_mem != dcclMemHost) dcclMemcpy(dev, host.data(), host.size());
  }
  void down() {
    if (g_mem != dcclMemHost) dcclMemcpy(host.data(), dev, host.size());
  }
  char* at(size_t byte_off) { return static_cast<char*>(dev) + byte_off; }
};

void expect(const Buf& b, size_t i, dcclDataType_t t, check::Ref ref, const char* what) {
  double got = check::get(b.host.data(), i, t);
  ++g_checked;
  double diff = got - ref.value;
  if (diff < 0) diff = -diff;
  if (!(diff <= ref.tol)) {
    if (g_wrong < 10)
      fprintf(stderr, "rank %d: WRONG %s [%s] element %zu: got %.17g expected %.17g (tol %.3g)\n", g_rank,
              what, g_label.c_str(), i, got, ref.value, ref.tol);
    ++g_wrong;
  }
}

void fill_reduce(Buf& b, size_t off, size_t count, dcclDataType_t t, dcclRedOp_t op, bool frac) {
  for (size_t i = 0; i < count; ++i) check::put(b.host.data(), off + i, t, check::input(g_rank, i, t, op, frac));
}

void t_allreduce(dcclComm_t comm, dcclStream_t s, size_t n, dcclDataType_t t, dcclRedOp_t op, bool inplace, bool frac) {
  size_t es = check::esize(t);
  Buf sb(n * es), rb(n * es);
  fill_reduce(sb, 0, n, t, op, frac);
  Buf& in = inplace ? rb : sb;
  if (inplace) rb.host = sb.host;
  in.up();
  CALL(dcclAllReduce(in.dev, rb.dev, n, t, op, comm, s));
  CALL(dcclStreamSynchronize(s));
  rb.down();
  for (size_t i = 0; i < n; ++i) expect(rb, i, t, check::reference(g_n, i, t, op, frac), "all_reduce");
}

void t_reduce(dcclComm_t comm, dcclStream_t s, size_t n, dcclDataType_t t, dcclRedOp_t op, bool inplace, int root) {
  size_t es = check::esize(t);
  Buf sb(n * es), rb(n * es);
  fill_reduce(sb, 0, n, t, op, false);
  Buf& in = inplace ? rb : sb;
  if (inplace) rb.host = sb.host;
  in.up();
  CALL(dcclReduce(in.dev, rb.dev, n, t, op, root, comm, s));
  CALL(dcclStreamSynchronize(s));
  if (g_rank != root) return;
  rb.down();
  for (size_t i = 0; i < n; ++i) expect(rb, i, t, check::reference(g_n, i, t, op, false), "reduce");
}

void t_reduce_scatter(dcclComm_t comm, dcclStream_t s, size_t n, dcclDataType_t t, dcclRedOp_t op, bool inplace) {
  size_t es = check::esize(t), total = n * static_cast<size_t>(g_n);
  Buf sb(total * es), rb(n * es);
  fill_reduce(sb, 0, total, t, op, false);
  sb.up();
  void* out = inplace ? sb.at(static_cast<size_t>(g_rank) * n * es) : rb.dev;
  CALL(dcclReduceScatter(sb.dev, out, n, t, op, comm, s));
  CALL(dcclStreamSynchronize(s));
  Buf& res = inplace ? sb : rb;
  size_t base = inplace ? static_cast<size_t>(g_rank) * n : 0;
  res.down();
  for (size_t i = 0; i < n; ++i) {
    check::Ref ref = check::reference(g_n, static_cast<size_t>(g_rank) * n + i, t, op, false);
    expect(res, base + i, t, ref, "reduce_scatter");
  }
}

void t_broadcast(dcclComm_t comm, dcclStream_t s, size_t n, dcclDataType_t t, bool inplace, int root) {
  size_t es = check::esize(t);
  Buf sb(n * es), rb(n * es);
  for (size_t i = 0; i < n; ++i) check::put(sb.host.data(), i, t, check::tag_value(g_rank, i, t));
  Buf& in = inplace ? rb : sb;
  if (inplace) rb.host = sb.host;
  in.up();
  CALL(dcclBroadcast(in.dev, rb.dev, n, t, root, comm, s));
  CALL(dcclStreamSynchronize(s));
  rb.down();
  for (size_t i = 0; i < n; ++i) expect(rb, i, t, {check::tag_value(root, i, t), 0}, "broadcast");
}

void t_allgather(dcclComm_t comm, dcclStream_t s, size_t n, dcclDataType_t t, bool inplace) {
  size_t es = check::esize(t), total = n * static_cast<size_t>(g_n);
  Buf sb(n * es), rb(total * es);
  size_t off = inplace ? static_cast<size_t>(g_rank) * n : 0;
  Buf& in = inplace ? rb : sb;
  for (size_t i = 0; i < n; ++i) check::put(in.host.data(), off + i, t, check::tag_value(g_rank, i, t));
  in.up();
  CALL(dcclAllGather(in.at(off * es), rb.dev, n, t, comm, s));
  CALL(dcclStreamSynchronize(s));
  rb.down();
  for (int r = 0; r < g_n; ++r)
    for (size_t i = 0; i < n; ++i)
      expect(rb, static_cast<size_t>(r) * n + i, t, {check::tag_value(r, i, t), 0}, "all_gather");
}

void t_alltoall(dcclComm_t comm, dcclStream_t s, size_t n, dcclDataType_t t, bool inplace) {
  size_t es = check::esize(t), total = n * static_cast<size_t>(g_n);
  Buf sb(total * es), rb(total * es);
  // Block j of rank r carries tag_value(r * g_n + j, i).
  for (int j = 0; j < g_n; ++j)
    for (size_t i = 0; i < n; ++i)
      check::put(sb.host.data(), static_cast<size_t>(j) * n + i, t, check::tag_value(g_rank * g_n + j, i, t));
  Buf& in = inplace ? rb : sb;
  if (inplace) rb.host = sb.host;
  in.up();
  CALL(dcclAlltoAll(in.dev, rb.dev, n, t, comm, s));
  CALL(dcclStreamSynchronize(s));
  rb.down();
  for (int r = 0; r < g_n; ++r)
    for (size_t i = 0; i < n; ++i)
      expect(rb, static_cast<size_t>(r) * n + i, t, {check::tag_value(r * g_n + g_rank, i, t), 0}, "alltoall");
}

void t_sendrecv(dcclComm_t comm, dcclStream_t s, size_t n, dcclDataType_t t) {
  // Everyone sends a distinct block to every rank (itself included) in one group.
  size_t es = check::esize(t), total = n * static_cast<size_t>(g_n);
  Buf sb(total * es), rb(total * es);
  for (int j = 0; j < g_n; ++j)
    for (size_t i = 0; i < n; ++i)
      check::put(sb.host.data(), static_cast<size_t>(j) * n + i, t, check::tag_value(g_rank * g_n + j, i, t));
  sb.up();
  CALL(dcclGroupStart());
  for (int p = 0; p < g_n; ++p) {
    CALL(dcclSend(sb.at(static_cast<size_t>(p) * n * es), n, t, p, comm, s));
    CALL(dcclRecv(rb.at(static_cast<size_t>(p) * n * es), n, t, p, comm, s));
  }
  CALL(dcclGroupEnd());
  CALL(dcclStreamSynchronize(s));
  rb.down();
  for (int r = 0; r < g_n; ++r)
    for (size_t i = 0; i < n; ++i)
      expect(rb, static_cast<size_t>(r) * n + i, t, {check::tag_value(r * g_n + g_rank, i, t), 0}, "send/recv");
}

const dcclDataType_t kTypes[] = {dcclInt8, dcclUint8, dcclInt32, dcclUint32, dcclInt64,
                                 dcclUint64, dcclFloat16, dcclBfloat16, dcclFloat32, dcclFloat64};
const dcclRedOp_t kOps[] = {dcclSum, dcclProd, dcclMax, dcclMin, dcclAvg};
const char* kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"};
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

void sweep(dcclComm_t comm, dcclStream_t stream, const std::string& algo, const std::vector<size_t>& counts,
           bool all_types) {
  int k = 0;
  for (dcclDataType_t t : kTypes) {
    if (!all_types && t != dcclFloat32 && t != dcclBfloat16 && t != dcclInt32) continue;
    for (size_t n : counts)
      for (int ip = 0; ip < 2; ++ip) {
        dcclStream_t s = (k++ % 2) ? stream : nullptr;  // alternate stream and blocking calls
        for (dcclRedOp_t op : kOps) {
          g_label = algo + " " + kTypeNames[t] + " " + kOpNames[op] + " count " + std::to_string(n) +
                    (ip ? " in-place" : " out-of-place");
          t_allreduce(comm, s, n, t, op, ip, false);
          if (check::is_float(t) && op == dcclSum) t_allreduce(comm, s, n, t, op, ip, true);
          t_reduce(comm, s, n, t, op, ip, static_cast<int>((n + static_cast<size_t>(ip)) % static_cast<size_t>(g_n)));
          t_reduce_scatter(comm, s, n, t, op, ip);
        }
        g_label = algo + " " + kTypeNames[t] + " count " + std::to_string(n) + (ip ? " in-place" : " out-of-place");
        t_broadcast(comm, s, n, t, ip, static_cast<int>((n + 1) % static_cast<size_t>(g_n)));
        t_allgather(comm, s, n, t, ip);
        t_alltoall(comm, s, n, t, ip);
        if (!ip) t_sendrecv(comm, s, n, t);
      }
  }
  g_label = algo + " barrier";
  CALL(dcclBarrier(comm, nullptr));
}

void large(dcclComm_t comm, dcclStream_t s, const std::string& algo) {
  const size_t n = (size_t{4} << 20) + 3;  // >= 4 Mi elements, odd
  g_label = algo + " large";
  t_allreduce(comm, s, n, dcclFloat32, dcclSum, false, true);
  t_allreduce(comm, s, n, dcclBfloat16, dcclSum, true, true);
  t_reduce_scatter(comm, s, n / static_cast<size_t>(g_n), dcclFloat32, dcclMax, false);
  t_allgather(comm, s, n / static_cast<size_t>(g_n), dcclFloat32, true);
  t_broadcast(comm, s, n, dcclInt32, false, g_n - 1);
  t_reduce(comm, s, n, dcclFloat32, dcclAvg, true, 0);
  t_alltoall(comm, s, n / static_cast<size_t>(g_n), dcclUint8, false);
}

}  // namespace

int main(int argc, char** argv) {
  std::string suite = "small";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--suite" && i + 1 < argc) suite = argv[++i];
    else if (a == "--mem" && i + 1 < argc) {
      std::string m = argv[++i];
      g_mem = m == "sim" ? dcclMemSim : m == "cuda" ? dcclMemCuda : dcclMemHost;
    } else {
      fprintf(stderr, "usage: coll_check [--suite small|mid|large] [--mem host|sim|cuda]\n");
      return 2;
    }
  }
  // Algorithm settings to sweep; each gets its own communicator.
  struct Setting {
    const char* algo;
    const char* chunk;
    bool all_types;
    const char* segment_chunk = "";  // DCCL_SEGMENT_CHUNK_BYTES; empty: default
  };
  std::vector<Setting> settings = {
      {"", "", true},  // the tuner's choice
      // 256-byte chunks: more chunks than the chain keeps in flight (8).
      {"allreduce:ring,broadcast:chain,reduce:chain,allgather:ring", "256", true},
      {"allreduce:rhd,broadcast:tree,reduce:tree,allgather:bruck", "", false},
      {"allreduce:rd", "", false},
      {"allreduce:segment", "", false},
      // 256-byte chunk slots: many chunks, parts of one cache line, empty parts above 4 ranks.
      {"allreduce:segment_rs,reduce_scatter:segment,allgather:segment", "", true, "256"},
      // 4-byte slots: too small for 8-byte types (and one element per rank): the
      // segment algorithms fall back to their message-based equivalents.
      {"allreduce:segment_rs,reduce_scatter:segment,allgather:segment", "", true, "4"},
  };
  if (suite == "large")
    settings = {{"", "", false},
                {"allreduce:ring,allgather:ring", "", false},  // blocks >= 1 MiB: the ring starts together
                {"allreduce:rhd,broadcast:tree,reduce:tree,allgather:bruck", "", false}};
  // mid: one count above the hierarchy's 64 KiB split for 4-byte types, the
  // tuner's choices only (run with a small DCCL_HIER_PIECE_BYTES: many pieces).
  if (suite == "mid") settings = {{"", "", false}};
  const std::vector<size_t> counts = suite == "mid" ? std::vector<size_t>{40009} : std::vector<size_t>{0, 1, 7, 1001};
  dcclStream_t stream;
  if (dcclStreamCreate(&stream) != dcclSuccess) return 3;
  for (const Setting& st : settings) {
    setenv("DCCL_ALGO", st.algo, 1);
    setenv("DCCL_CHUNK_BYTES", *st.chunk ? st.chunk : "0", 1);
    if (*st.segment_chunk)
      setenv("DCCL_SEGMENT_CHUNK_BYTES", st.segment_chunk, 1);
    else
      unsetenv("DCCL_SEGMENT_CHUNK_BYTES");
    dcclComm_t comm;
    if (dcclCommInitFromEnv(&comm) != dcclSuccess) {
      fprintf(stderr, "init failed: %s\n", dcclGetLastError(nullptr));
      return 3;
    }
    dcclCommUserRank(comm, &g_rank);
    dcclCommCount(comm, &g_n);
    std::string name = *st.algo ? st.algo : "tuned";
    if (suite == "large")
      large(comm, stream, name);
    else
      sweep(comm, stream, name, counts, st.all_types);
    // Agree on the outcome: every rank learns the total.
    long totals[3] = {g_wrong, g_failed_calls, g_checked};
    dcclAllReduce(totals, totals, 3, dcclInt64, dcclSum, comm, nullptr);
    if (g_rank == 0)
      printf("coll_check %s [%s]: %d ranks, %ld elements checked, %ld wrong, %ld failed calls\n", suite.c_str(),
             name.c_str(), g_n, totals[2], totals[0], totals[1]);
    dcclCommDestroy(comm);
    if (totals[0] || totals[1]) return 1;
  }
  dcclStreamDestroy(stream);
  return 0;
}
