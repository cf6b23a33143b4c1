// gloo-perf: dccl-perf's measurement on Gloo (Debian's libgloo-dev) over its
// TCP transport (gloo::transport::tcp, loopback by default).
//   dccl-run -n 4 gloo-perf all_reduce -b 8 -e 64M -f 4 --algo halving_doubling
// Ranks: DCCL_RANK/DCCL_WORLD_SIZE (dccl-run), or OMPI_COMM_WORLD_*, PMI_*,
// RANK/WORLD_SIZE. Rendezvous: Gloo's FileStore in a directory private to
// this launch ($GLOO_PERF_STORE, else /tmp/gloo-perf-<hash of DCCL_ID, or of
// the parent pid>), removed by rank 0 at the end. $GLOO_PERF_HOST chooses the
// address to bind (default 127.0.0.1).
//
// all_reduce algorithms (--algo):
//   ring              gloo::allreduce, AllreduceOptions::RING (what PyTorch's
//                     ProcessGroupGloo calls; out of place when given an input)
//   bcube             gloo::allreduce, AllreduceOptions::BCUBE
//   halving_doubling  gloo::AllreduceHalvingDoubling (in place only)
//   ring_chunked      gloo::AllreduceRingChunked (in place only)
// The in-place-only algorithms are built once per size and buffer (as their
// users do); out of place they first copy the input into the output buffer
// (included in the time). all_gather, broadcast, reduce, alltoall use Gloo's
// gloo::allgather/broadcast/reduce/alltoall; reduce_scatter uses
// gloo::ReduceScatterHalvingDoubling (in place; out of place it runs on the
// send buffer, then copies this rank's block out).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/config.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"
#include "harness.hpp"

namespace {

constexpr const char* kProg = "gloo-perf";
constexpr const char* kAlgos = "ring (default), bcube, halving_doubling, ring_chunked (all_reduce only)";
using peerbench::Case;
using peerbench::Coll;
using peerbench::Ptrs;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v && *v) return std::atoi(v);
  }
  return fallback;
}

template <typename T>
ReduceFn reduce_fn(dcclRedOp_t op) {
  switch (op) {
    case dcclSum: return static_cast<ReduceFn>(&gloo::sum<T>);
    case dcclProd: return static_cast<ReduceFn>(&gloo::product<T>);
    case dcclMax: return static_cast<ReduceFn>(&gloo::max<T>);
    case dcclMin: return static_cast<ReduceFn>(&gloo::min<T>);
    default: return nullptr;
  }
}

template <typename T>
const gloo::ReductionFunction<T>* reduction(dcclRedOp_t op) {
  switch (op) {
    case dcclProd: return gloo::ReductionFunction<T>::product;
    case dcclMax: return gloo::ReductionFunction<T>::max;
    case dcclMin: return gloo::ReductionFunction<T>::min;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

class GlooBackend : public peerbench::Backend {
 public:
  GlooBackend(std::string algo, std::shared_ptr<gloo::rendezvous::Context> ctx, std::string host)
      : algo_(std::move(algo)), ctx_(std::move(ctx)), host_(std::move(host)) {}

  int rank() const override { return ctx_->rank; }
  int nranks() const override { return ctx_->size; }
  std::string library() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
           "." + std::to_string(GLOO_VERSION_PATCH);
  }
  std::string transport() const override { return "gloo::transport::tcp on " + host_; }
  std::string algo() const override { return algo_; }

  std::string unsupported(const Case& k) const override { return why_unsupported(algo_, k); }

  static std::string why_unsupported(const std::string& algo_, const Case& k) {
    if (k.type != dcclFloat32 && k.type != dcclFloat64 && k.type != dcclInt32 && k.type != dcclInt64)
      return std::string("gloo-perf measures float, double, int32, int64; not ") +
             dcclperf::dtype_label(k.type);
    if (dcclperf::coll_has_op(k.coll) && k.op == dcclAvg) return "Gloo has no avg reduction";
    if (k.coll == Coll::SendRecv) return "sendrecv is not measured here";
    if (k.coll != Coll::AllReduce && algo_ != "ring")
      return "--algo " + algo_ + " applies to all_reduce only";
    if (algo_ != "ring" && algo_ != "bcube" && algo_ != "halving_doubling" && algo_ != "ring_chunked")
      return "unknown --algo '" + algo_ + "' (" + kAlgos + ")";
    return "";
  }

  void launch(const Case& k, const Ptrs& p, bool in_place) override {
    switch (k.type) {
      case dcclFloat64: return launch_t<double>(k, p, in_place);
      case dcclInt32: return launch_t<int32_t>(k, p, in_place);
      case dcclInt64: return launch_t<int64_t>(k, p, in_place);
      default: return launch_t<float>(k, p, in_place);
    }
  }

  const void* in_place_result(const Case& k, const Ptrs& p) const override {
    return k.coll == Coll::ReduceScatter ? p.base : p.recv;
  }

  void combine(double v[4]) override {
    for (int half = 0; half < 2; ++half) {
      gloo::AllreduceOptions o(ctx_);
      o.setOutput(v + 2 * half, 2);
      o.setReduceFunction(half == 0 ? reduce_fn<double>(dcclMax) : reduce_fn<double>(dcclSum));
      o.setTag(next_tag());
      gloo::allreduce(o);
    }
  }

  void barrier() override {
    gloo::BarrierOptions o(ctx_);
    o.setTag(next_tag());
    gloo::barrier(o);
  }

 private:
  uint32_t next_tag() { return tag_++; }

  // A built legacy algorithm stays valid for as long as its pointers and
  // count do; the harness calls launch() many times with the same ones.
  struct Cached {
    const void* ptr = nullptr;
    size_t count = 0;
    std::unique_ptr<gloo::Algorithm> algo;
  };

  template <typename T>
  gloo::Algorithm& legacy(const Case& k, T* ptr, size_t count) {
    if (cached_.algo && cached_.ptr == ptr && cached_.count == count) return *cached_.algo;
    cached_.algo.reset();  // free the previous size's buffers first
    const std::vector<T*> ptrs = {ptr};
    const int n = static_cast<int>(count);
    if (k.coll == Coll::ReduceScatter) {
      std::vector<int> recv_elems(size_t(nranks()), int(k.lay.param_count));
      cached_.algo = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(ctx_, ptrs, n, recv_elems,
                                                                             reduction<T>(k.op));
    } else if (algo_ == "halving_doubling") {
      cached_.algo = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx_, ptrs, n, reduction<T>(k.op));
    } else {
      cached_.algo = std::make_unique<gloo::AllreduceRingChunked<T>>(ctx_, ptrs, n, reduction<T>(k.op));
    }
    cached_.ptr = ptr;
    cached_.count = count;
    return *cached_.algo;
  }

  template <typename T>
  void launch_t(const Case& k, const Ptrs& p, bool in_place) {
    const size_t n = k.lay.param_count;
    const size_t bytes = n * sizeof(T);
    T* send = static_cast<T*>(p.send);
    T* recv = static_cast<T*>(p.recv);
    if (n == 0) return;  // nothing to move (Gloo's allgather divides by the count)
    switch (k.coll) {
      case Coll::AllReduce: {
        if (algo_ == "halving_doubling" || algo_ == "ring_chunked") {
          if (!in_place) std::memcpy(recv, send, bytes);
          legacy<T>(k, recv, n).run();
          return;
        }
        gloo::AllreduceOptions o(ctx_);
        o.setAlgorithm(algo_ == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                        : gloo::AllreduceOptions::Algorithm::RING);
        if (!in_place) o.setInput(send, n);
        o.setOutput(recv, n);
        o.setReduceFunction(reduce_fn<T>(k.op));
        o.setTag(next_tag());
        gloo::allreduce(o);
        return;
      }
      case Coll::AllGather: {
        gloo::AllgatherOptions o(ctx_);
        if (!in_place) o.setInput(send, n);
        o.setOutput(in_place ? static_cast<T*>(p.base) : recv, n * size_t(nranks()));
        o.setTag(next_tag());
        gloo::allgather(o);
        return;
      }
      case Coll::ReduceScatter: {
        T* base = in_place ? static_cast<T*>(p.base) : send;
        legacy<T>(k, base, n * size_t(nranks())).run();
        if (!in_place) std::memcpy(recv, base, bytes);
        return;
      }
      case Coll::Broadcast: {
        gloo::BroadcastOptions o(ctx_);
        if (!in_place && rank() == k.root) o.setInput(send, n);
        o.setOutput(recv, n);
        o.setRoot(k.root);
        o.setTag(next_tag());
        gloo::broadcast(o);
        return;
      }
      case Coll::Reduce: {
        gloo::ReduceOptions o(ctx_);
        if (!in_place) o.setInput(send, n);
        o.setOutput(recv, n);
        o.setRoot(k.root);
        o.setReduceFunction(reduce_fn<T>(k.op));
        o.setTag(next_tag());
        gloo::reduce(o);
        return;
      }
      case Coll::AllToAll: {  // in place: one buffer for both (timed, not checked, as dccl-perf)
        gloo::AlltoallOptions o(ctx_);
        o.setInput(send, n * size_t(nranks()));
        o.setOutput(recv, n * size_t(nranks()));
        o.setTag(next_tag());
        gloo::alltoall(o);
        return;
      }
      case Coll::SendRecv:
        return;
    }
  }

  std::string algo_;
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::string host_;
  uint32_t tag_ = 1;
  Cached cached_;
};

std::string store_dir() {
  if (const char* d = std::getenv("GLOO_PERF_STORE"); d && *d) return d;
  // Every rank of one launch sees the same DCCL_ID (dccl-run) or parent (a shell
  // loop or launcher); only a hash of the id reaches the file system.
  const char* id = std::getenv("DCCL_ID");
  const std::string key = id && *id ? std::string(id) : "ppid" + std::to_string(getppid());
  char name[64];
  std::snprintf(name, sizeof name, "/tmp/gloo-perf-%016zx", std::hash<std::string>{}(key));
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  dcclperf::Options opt;
  std::string algo = "ring";
  const int prc = peerbench::parse(argc, argv, kProg, kAlgos, &opt, &algo);
  if (prc == 1) return 0;
  if (prc != 0) return 2;
  const int rank = env_int({"DCCL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"}, -1);
  const int size = env_int({"DCCL_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}, -1);
  if (rank < 0 || size < 1 || rank >= size) {
    std::fprintf(stderr, "%s: no rank/size in the environment; start it with dccl-run -n N\n", kProg);
    return 2;
  }
  {  // refuse what cannot run before any rendezvous (no store left behind)
    Case k;
    k.coll = opt.coll;
    k.type = opt.type;
    k.op = opt.op;
    k.nranks = size;
    const std::string why = GlooBackend::why_unsupported(algo, k);
    if (!why.empty()) {
      if (rank == 0) std::fprintf(stderr, "%s: %s\n", kProg, why.c_str());
      return 2;
    }
  }
  const char* host_env = std::getenv("GLOO_PERF_HOST");
  const std::string host = host_env && *host_env ? host_env : "127.0.0.1";
  const std::string dir = store_dir();
  int rc = 0;
  try {
    std::filesystem::create_directories(dir);
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::seconds(600));
    ctx->connectFullMesh(store, dev);
    GlooBackend b(algo, ctx, host);
    rc = peerbench::run(b, opt, kProg);  // ends with a barrier
    if (rank != 0 && rc == 1) rc = 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kProg, rank, e.what());
    rc = 1;
  }
  if (rank == 0 && !std::getenv("GLOO_PERF_STORE")) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return rc;
}
