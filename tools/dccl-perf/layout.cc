// nccl-tests' buffer layout per collective and its bus-bandwidth factors; see expect.hpp.
#include "expect.hpp"

namespace dcclperf {

Layout layout(Coll c, size_t bytes, size_t elem_size, int nranks) {
  Layout l;
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  const size_t count = elem_size ? bytes / elem_size : 0;
  const size_t per_rank = count / n;
  switch (c) {
    case Coll::AllGather:
      l.send_count = per_rank;
      l.recv_count = per_rank * n;
      l.param_count = per_rank;
      l.send_inplace_off = per_rank;
      break;
    case Coll::ReduceScatter:
      l.send_count = per_rank * n;
      l.recv_count = per_rank;
      l.param_count = per_rank;
      l.recv_inplace_off = per_rank;
      break;
    case Coll::AllToAll:
      l.send_count = l.recv_count = per_rank * n;
      l.param_count = per_rank;
      break;
    default:  // all_reduce, broadcast, reduce, sendrecv
      l.send_count = l.recv_count = l.param_count = count;
      break;
  }
  l.bytes = std::max(l.send_count, l.recv_count) * elem_size;
  return l;
}

double bus_factor(Coll c, int nranks) {
  const double n = std::max(nranks, 1);
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather: case Coll::ReduceScatter: case Coll::AllToAll: return (n - 1) / n;
    default: return 1.0;
  }
}

}  // namespace dcclperf
