// A dccl::Communicator left by an exception (stack unwinding) is aborted, not
// destroyed: the other ranks, waiting for it in a call it will not make, fail at
// once naming it. A destroy would meet them, and each side would wait the whole
// timeout (DCCL_TIMEOUT_S, 60 s here) for the other.
//   dccl-run -n 3 unwind_check     the last rank throws after one all_reduce; the
//                                  others' next all_reduce must fail within 10 s
//                                  naming it; every rank exits 0 when it saw that.
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "dccl/dccl.hpp"

namespace {

// One all_reduce of `rank + 1` checked against n(n+1)/2, then the last rank throws.
void work(dccl::Communicator& c, int rank, int n) {
  std::vector<double> v(1024, rank + 1.0);
  c.all_reduce(std::span<double>(v));
  for (double x : v)
    if (x != n * (n + 1) / 2.0) throw std::logic_error("all_reduce gave " + std::to_string(x));
  if (rank == n - 1) throw std::runtime_error("an error in the user's code");
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.all_reduce(std::span<double>(v));
    throw std::logic_error("the all_reduce after the last rank left returned success");
  } catch (const dccl::Error& e) {
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string msg = e.what(), who = "rank " + std::to_string(n - 1) + " aborted";
    std::printf("rank %d: failed after %.2f s: %s\n", rank, took, msg.c_str());
    if (took > 10 || msg.find(who) == std::string::npos)
      throw std::logic_error("expected a failure within 10 s naming '" + who + "'");
  }
}

}  // namespace

int main() {
  int rank = -1;
  try {
    dccl::Communicator c;
    rank = c.rank();
    work(c, rank, c.size());
  } catch (const std::runtime_error& e) {  // the thrown error, after c was aborted
    std::printf("rank %d: left on '%s'\n", rank, e.what());
  } catch (const std::exception& e) {
    std::printf("rank %d: FAILED: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
