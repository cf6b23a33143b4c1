// C++ ring exchange: each rank owns one block and passes blocks around the
// ring. In step s it sends the block it received in step s-1 to its right
// neighbour and receives the next one from its left; the send and the receive
// of a step go in one group (dccl::Group: dcclGroupStart ... dcclGroupEnd), so
// they run together and neither waits for the other to finish first. After
// n-1 steps every rank holds every block (an allgather by hand), checked
// against what each owner put in.
//   dccl-run -n 3 ./ring_exchange
// Exits 1 when a call fails or a block is wrong.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <dccl/dccl.hpp>

namespace {

int32_t value(int owner, size_t i) { return static_cast<int32_t>(owner * 1000003 + static_cast<int>(i % 1000)); }

}  // namespace

int main() {
  int rank = -1;
  try {
    dccl::Communicator comm;  // from dccl-run's (or torchrun's, mpirun's, srun's) environment
    rank = comm.rank();
    const int n = comm.size();
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    const size_t count = 64 * 1024;

    std::vector<std::vector<int32_t>> blocks(static_cast<size_t>(n), std::vector<int32_t>(count));
    for (size_t i = 0; i < count; ++i) blocks[static_cast<size_t>(rank)][i] = value(rank, i);

    for (int step = 0; step + 1 < n; ++step) {
      const auto out = static_cast<size_t>((rank + n - step) % n);     // the block to pass on
      const auto in = static_cast<size_t>((rank + n - step - 1) % n);  // the one arriving from the left
      dccl::Group group;
      comm.send(blocks[out], right);
      comm.recv(blocks[in], left);
      group.end();  // submits both; errors are thrown here
    }
    comm.barrier();

    size_t wrong = 0;
    for (int owner = 0; owner < n; ++owner)
      for (size_t i = 0; i < count; ++i)
        if (blocks[static_cast<size_t>(owner)][i] != value(owner, i)) {
          if (wrong == 0) std::fprintf(stderr, "rank %d: block %d element %zu is wrong\n", rank, owner, i);
          ++wrong;
        }
    std::printf("rank %d of %d: ring exchange of %d blocks of %zu int32 (%d grouped steps): %s\n", rank, n, n,
                count, n - 1, wrong ? "WRONG" : "ok");
    return wrong ? 1 : 0;
  } catch (const dccl::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
}
