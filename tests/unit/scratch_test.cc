// Scratch memory: reused in steady state, returned after a transient large
// operation, on host and sim (device) memory.
#include <gtest/gtest.h>

#include "coll/scratch.hpp"
#include "mem/backend.hpp"

namespace dccl::coll {
namespace {

void run_op(ScratchPool& p, size_t bytes) {
  if (bytes) {
    auto* q = static_cast<char*>(p.take(bytes));
    ASSERT_NE(q, nullptr);
    if (p.backend().kind() == mem::Kind::Host) q[bytes - 1] = 1;  // the memory is there
  }
  p.reset();
}

void check_pool(mem::Backend& be) {
  ScratchPool p(be);
  run_op(p, 1 << 20);
  const uint64_t allocs = p.allocations();
  for (int i = 0; i < 100; ++i) run_op(p, 1 << 20);  // steady state: nothing allocated
  EXPECT_EQ(p.allocations(), allocs);
  EXPECT_GE(p.held_bytes(), size_t{1} << 20);
  run_op(p, 64 << 20);  // one large operation
  EXPECT_GE(p.held_bytes(), size_t{64} << 20);
  // Small operations from now on: within two windows the large block is returned.
  for (int i = 0; i < 2 * ScratchPool::kWindow; ++i) run_op(p, 4096);
  EXPECT_LT(p.held_bytes(), size_t{2} << 20) << be.name();
  // Alternating large and small operations keep the large block (no churn).
  run_op(p, 8 << 20);
  const uint64_t before = p.allocations();
  for (int i = 0; i < 4 * ScratchPool::kWindow; ++i) run_op(p, i % 4 == 0 ? (8 << 20) : 4096);
  EXPECT_EQ(p.allocations(), before) << be.name();
  // Nothing used for a window: everything is returned.
  for (int i = 0; i < 2 * ScratchPool::kWindow; ++i) run_op(p, 0);
  EXPECT_EQ(p.held_bytes(), 0u);
  // Small operations (smaller than the page their block is rounded to) keep that
  // block: nothing is allocated after the first, whatever the number of windows.
  ScratchPool small(be);
  run_op(small, 8);
  const uint64_t first = small.allocations();
  EXPECT_EQ(first, 1u);
  for (int i = 0; i < 4 * ScratchPool::kWindow; ++i) run_op(small, i % 2 ? 8 : 64);
  EXPECT_EQ(small.allocations(), first) << be.name();
  for (int i = 0; i < 2 * ScratchPool::kWindow; ++i) run_op(small, 0);
  EXPECT_EQ(small.held_bytes(), 0u);
}

TEST(Scratch, ReturnedAfterTransientLargeOperationHost) { check_pool(mem::host_backend()); }

TEST(Scratch, ReturnedAfterTransientLargeOperationSim) {
  check_pool(mem::sim_backend());
}

}  // namespace
}  // namespace dccl::coll
