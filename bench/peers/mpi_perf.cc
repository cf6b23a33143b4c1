// ompi-perf / mpich-perf / impi-perf: dccl-perf's measurement on MPI's collectives.
// The same source is built three times, against Open MPI (pkg-config ompi-c),
// MPICH (pkg-config mpich) and Intel MPI (PyPI's impi-devel, on libfabric);
// run each with its own launcher:
//   mpirun.openmpi --allow-run-as-root --oversubscribe -np 4
//       --mca pml ob1 --mca btl vader,self   ompi-perf all_reduce -b 8 -e 64M -f 4
//   mpirun.mpich -np 4                       mpich-perf all_reduce -b 8 -e 64M -f 4
//   .peers/bin/mpirun -n 4                   impi-perf all_reduce -b 8 -e 64M -f 4
// Calls: MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast,
// MPI_Reduce, MPI_Alltoall; MPI_IN_PLACE for the in-place columns. The library
// picks the algorithm (--algo is not accepted); its transport is whatever the
// launcher's settings select, and the header reports those settings.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"

#ifndef PEER_PROG
#define PEER_PROG "mpi-perf"
#endif

namespace {

using peerbench::Case;
using peerbench::Coll;
using peerbench::Ptrs;

MPI_Datatype mpi_type(dcclDataType_t t) {
  switch (t) {
    case dcclInt8: return MPI_INT8_T;
    case dcclUint8: return MPI_UINT8_T;
    case dcclInt32: return MPI_INT32_T;
    case dcclUint32: return MPI_UINT32_T;
    case dcclInt64: return MPI_INT64_T;
    case dcclUint64: return MPI_UINT64_T;
    case dcclFloat32: return MPI_FLOAT;
    case dcclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;  // float16, bfloat16: not MPI types
  }
}

MPI_Op mpi_op(dcclRedOp_t op) {
  switch (op) {
    case dcclSum: return MPI_SUM;
    case dcclProd: return MPI_PROD;
    case dcclMax: return MPI_MAX;
    case dcclMin: return MPI_MIN;
    default: return MPI_OP_NULL;  // avg has no MPI op
  }
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "%s: %s: %s\n", PEER_PROG, what, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

class MpiBackend : public peerbench::Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int nranks() const override { return size_; }

  std::string library() const override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(v, &len);
    std::string s(v, strnlen(v, sizeof v));
    const size_t nl = s.find_first_of("\n,");
    if (nl != std::string::npos) s.resize(nl);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
    return s;
  }

  // The launcher passes its settings as environment variables: Open MPI's
  // --mca X Y becomes OMPI_MCA_X=Y in every rank.
  std::string transport() const override {
#if defined(OPEN_MPI)
    return "pml " + env_or("OMPI_MCA_pml", "auto") + ", btl " + env_or("OMPI_MCA_btl", "auto");
#elif defined(I_MPI_VERSION)
    return "I_MPI_FABRICS " + env_or("I_MPI_FABRICS", "shm:ofi") + ", FI_PROVIDER " + env_or("FI_PROVIDER", "auto");
#else
    std::string t = env_or("MPIR_CVAR_NOLOCAL", "0") == "1" ? "netmod for local peers (NOLOCAL=1)"
                                                            : "ch4 shm for local peers";
    return t + ", UCX_TLS " + env_or("UCX_TLS", "auto");
#endif
  }
  std::string algo() const override { return "default"; }

  std::string unsupported(const Case& k) const override {
    if (mpi_type(k.type) == MPI_DATATYPE_NULL)
      return std::string("MPI has no ") + dcclperf::dtype_label(k.type) + " datatype";
    if (dcclperf::coll_has_op(k.coll) && mpi_op(k.op) == MPI_OP_NULL)
      return std::string("MPI has no ") + dcclperf::op_label(k.op) + " operation";
    if (k.coll == Coll::SendRecv) return "sendrecv is not measured here";
    return "";
  }

  void launch(const Case& k, const Ptrs& p, bool in_place) override {
    const int n = static_cast<int>(k.lay.param_count);
    const MPI_Datatype t = mpi_type(k.type);
    const MPI_Op op = mpi_op(k.op);
    const void* send = in_place ? MPI_IN_PLACE : p.send;
    switch (k.coll) {
      case Coll::AllReduce:
        check(MPI_Allreduce(send, p.recv, n, t, op, MPI_COMM_WORLD), "MPI_Allreduce");
        break;
      case Coll::AllGather:  // in place: this rank's block already sits in the receive buffer
        check(MPI_Allgather(send, n, t, in_place ? p.base : p.recv, n, t, MPI_COMM_WORLD),
              "MPI_Allgather");
        break;
      case Coll::ReduceScatter:  // in place: the input is the whole buffer, the result its start
        check(MPI_Reduce_scatter_block(send, in_place ? p.base : p.recv, n, t, op, MPI_COMM_WORLD),
              "MPI_Reduce_scatter_block");
        break;
      case Coll::Broadcast:
        // Out of place the root's data starts in the send buffer (nccl-tests'
        // ncclBroadcast(send, recv)); MPI broadcasts one buffer, so the root
        // copies it over first.
        if (!in_place && rank_ == k.root) std::memcpy(p.recv, p.send, k.lay.bytes);
        check(MPI_Bcast(p.recv, n, t, k.root, MPI_COMM_WORLD), "MPI_Bcast");
        break;
      case Coll::Reduce:
#ifndef OPEN_MPI
        // MPICH 4.0.2 reads MPI_IN_PLACE as a buffer at a non-zero root (a segfault
        // from 32 KiB up; pmodels/mpich#6540, fixed after 4.1.1 by copying the root's
        // data first). Do what the fix does: the root passes a copy of its data.
        if (in_place && rank_ == k.root && k.root != 0) {
          scratch_.resize(k.lay.bytes);
          std::memcpy(scratch_.data(), p.recv, k.lay.bytes);
          check(MPI_Reduce(scratch_.data(), p.recv, n, t, op, k.root, MPI_COMM_WORLD), "MPI_Reduce");
          break;
        }
#endif
        check(MPI_Reduce(in_place && rank_ != k.root ? p.recv : send, p.recv, n, t, op, k.root,
                         MPI_COMM_WORLD),
              "MPI_Reduce");
        break;
      case Coll::AllToAll:
        check(MPI_Alltoall(send, n, t, p.recv, n, t, MPI_COMM_WORLD), "MPI_Alltoall");
        break;
      case Coll::SendRecv:
        break;
    }
  }

  const void* in_place_result(const Case& k, const Ptrs& p) const override {
    return k.coll == Coll::ReduceScatter ? p.base : p.recv;
  }

  void combine(double v[4]) override {
    check(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "combine");
    check(MPI_Allreduce(MPI_IN_PLACE, v + 2, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "combine");
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  int rank_ = 0, size_ = 1;
  std::vector<char> scratch_;
};

}  // namespace

int main(int argc, char** argv) {
  dcclperf::Options opt;
  const int prc = peerbench::parse_fixed_algo(argc, argv, PEER_PROG, "the MPI library chooses its algorithm", &opt);
  if (prc == 1) return 0;
  if (prc != 0) return 2;
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = 0;
  {
    MpiBackend b;
    rc = peerbench::run(b, opt, PEER_PROG);
    // Rank 0 carries the verdict (a launcher may stop the others early otherwise).
    if (b.rank() != 0 && rc == 1) rc = 0;
  }
  MPI_Finalize();
  return rc;
}
