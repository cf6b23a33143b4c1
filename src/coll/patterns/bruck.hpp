// Bruck allgather: ceil(log2 n) steps; at step k a rank sends its first min(2^k, n-2^k)
// gathered blocks to rank - 2^k and receives as many from rank + 2^k.
#pragma once
#include "coll/patterns/ring.hpp"

namespace dccl::coll::patterns {

struct Bruck {
  int rank, n;
  int steps() const {
    int s = 0;
    while ((1 << s) < n) ++s;
    return s;
  }
  int send_to(int k) const { return mod(rank - (1 << k), n); }
  int recv_from(int k) const { return mod(rank + (1 << k), n); }
  // Number of blocks exchanged at step k.
  int blocks(int k) const {
    int d = 1 << k;
    return d < n - d ? d : n - d;
  }
  // After all steps, local slot j holds the block of rank (rank + j) mod n.
  int slot_owner(int j) const { return mod(rank + j, n); }
};

}  // namespace dccl::coll::patterns
