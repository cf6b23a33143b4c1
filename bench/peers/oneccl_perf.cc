// oneccl-perf: dccl-perf's measurement on oneCCL (Intel's collective library,
// PyPI's oneccl-cpu-devel: the CPU build, linked statically) over libfabric.
// Launched by Intel MPI's mpirun (PyPI's impi-rt), whose MPI only starts the
// job: rank 0 opens oneCCL's key-value store and MPI_Bcast hands its address to
// the others; the timing, the result check's exchange and the barrier use MPI.
//   mpirun -n 4 -genv CCL_ATL_TRANSPORT ofi -genv FI_PROVIDER tcp
//       oneccl-perf all_reduce -b 8 -e 64M -f 4
// Calls: ccl::allreduce, allgather, reduce_scatter, broadcast, reduce,
// alltoall, each waited on at once (host memory, no stream), as MPI's calls
// block. oneCCL chooses the algorithm (CCL_ALLREDUCE=... overrides it; --algo
// is not accepted); the header reports CCL_ATL_TRANSPORT and FI_PROVIDER.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "harness.hpp"
#include "oneapi/ccl.hpp"

namespace {

constexpr const char* kProg = "oneccl-perf";
using peerbench::Case;
using peerbench::Coll;
using peerbench::Ptrs;

std::optional<ccl::datatype> ccl_type(dcclDataType_t t) {
  switch (t) {
    case dcclInt8: return ccl::datatype::int8;
    case dcclUint8: return ccl::datatype::uint8;
    case dcclInt32: return ccl::datatype::int32;
    case dcclUint32: return ccl::datatype::uint32;
    case dcclInt64: return ccl::datatype::int64;
    case dcclUint64: return ccl::datatype::uint64;
    case dcclFloat16: return ccl::datatype::float16;
    case dcclFloat32: return ccl::datatype::float32;
    case dcclFloat64: return ccl::datatype::float64;
    case dcclBfloat16: return ccl::datatype::bfloat16;
    default: return std::nullopt;
  }
}

std::optional<ccl::reduction> ccl_op(dcclRedOp_t op) {
  switch (op) {
    case dcclSum: return ccl::reduction::sum;
    case dcclProd: return ccl::reduction::prod;
    case dcclMax: return ccl::reduction::max;
    case dcclMin: return ccl::reduction::min;
    default: return std::nullopt;  // avg: not measured
  }
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "%s: %s: %s\n", kProg, what, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

class OneCclBackend : public peerbench::Backend {
 public:
  OneCclBackend(int rank, int size, const ccl::communicator& comm) : rank_(rank), size_(size), comm_(comm) {}
  int rank() const override { return rank_; }
  int nranks() const override { return size_; }
  std::string library() const override {
    const ccl::library_version v = ccl::get_library_version();
    return "oneCCL " + std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.update);
  }
  std::string transport() const override {
    return "CCL_ATL_TRANSPORT " + env_or("CCL_ATL_TRANSPORT", "default") + ", FI_PROVIDER " +
           env_or("FI_PROVIDER", "auto");
  }
  std::string algo() const override { return "default"; }

  std::string unsupported(const Case& k) const override {
    if (!ccl_type(k.type)) return std::string("oneCCL has no ") + dcclperf::dtype_label(k.type) + " datatype";
    if (dcclperf::coll_has_op(k.coll) && !ccl_op(k.op))
      return std::string(dcclperf::op_label(k.op)) + " is not measured with oneCCL";
    if (k.coll == Coll::SendRecv) return "sendrecv is not measured here";
    return "";
  }

  void launch(const Case& k, const Ptrs& p, bool in_place) override {
    const size_t n = k.lay.param_count;
    const ccl::datatype t = *ccl_type(k.type);
    const ccl::reduction op = ccl_op(k.op).value_or(ccl::reduction::sum);
    try {
      switch (k.coll) {
        case Coll::AllReduce:
          ccl::allreduce(p.send, p.recv, n, t, op, comm_).wait();
          break;
        case Coll::AllGather:  // in place: this rank's block already sits in the receive buffer
          ccl::allgather(p.send, in_place ? p.base : p.recv, n, t, comm_).wait();
          break;
        case Coll::ReduceScatter:
          ccl::reduce_scatter(p.send, p.recv, n, t, op, comm_).wait();
          break;
        case Coll::Broadcast:  // one buffer: out of place the root copies its data over first
          if (!in_place && rank_ == k.root) std::memcpy(p.recv, p.send, k.lay.bytes);
          ccl::broadcast(p.recv, n, t, k.root, comm_).wait();
          break;
        case Coll::Reduce:
          ccl::reduce(in_place ? p.recv : p.send, p.recv, n, t, op, k.root, comm_).wait();
          break;
        case Coll::AllToAll:
          ccl::alltoall(p.send, p.recv, n, t, comm_).wait();
          break;
        case Coll::SendRecv:
          break;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: rank %d: %s of %zu elements: %s\n", kProg, rank_, dcclperf::coll_name(k.coll), n,
                   e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }

  void combine(double v[4]) override {
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "combine");
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, v + 2, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "combine");
  }
  void barrier() override { mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  int rank_, size_;
  const ccl::communicator& comm_;
};

// oneCCL's communicator over the MPI job: rank 0's key-value store address
// reaches the others through MPI_Bcast.
int run(const dcclperf::Options& opt) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    ccl::shared_ptr_class<ccl::kvs> kvs;
    ccl::kvs::address_type addr{};
    if (rank == 0) {
      kvs = ccl::create_main_kvs();
      addr = kvs->get_address();
    }
    mpi_check(MPI_Bcast(addr.data(), static_cast<int>(addr.size()), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    if (rank != 0) kvs = ccl::create_kvs(addr);
    ccl::communicator comm = ccl::create_communicator(size, rank, kvs);
    OneCclBackend b(rank, size, comm);
    int rc = peerbench::run(b, opt, kProg);
    return rank != 0 && rc == 1 ? 0 : rc;  // rank 0 carries the verdict
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d of %d: oneCCL setup: %s\n", kProg, rank, size, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  dcclperf::Options opt;
  const int prc = peerbench::parse_fixed_algo(argc, argv, kProg,
                                              "oneCCL chooses its algorithm (CCL_ALLREDUCE=... overrides it)", &opt);
  if (prc == 1) return 0;
  if (prc != 0) return 2;
  ccl::init();
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rc = run(opt);  // oneCCL's objects are gone before MPI_Finalize
  MPI_Finalize();
  return rc;
}
