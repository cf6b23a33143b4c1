// Every hierarchical collective is handed to its algorithm tagged as itself
// (sched::sub_coll), and each algorithm refuses another collective's tag before it
// takes a step: a fake Hierarchy marks the first step reached.
#include <gtest/gtest.h>

#include "coll/hier.hpp"
#include "core/error.hpp"
#include "sched/executor.hpp"
#include "tune/algo_table.hpp"

using dccl::coll::SubColl;
using dccl::coll::SubOp;

namespace {
struct Reached {};  // a step (any call on the levels) was reached

class StepLevels final : public dccl::coll::Hierarchy {
 public:
  int host() const override { throw Reached{}; }
  int hosts() const override { throw Reached{}; }
  int local_rank() const override { throw Reached{}; }
  int local_size() const override { throw Reached{}; }
  int host_of(int) const override { throw Reached{}; }
  int local_of(int) const override { throw Reached{}; }
  bool ranks_by_host() const override { throw Reached{}; }
  void local(const SubOp&) override { throw Reached{}; }
  void cross(const SubOp&) override { throw Reached{}; }
  void cross_start(const SubOp&) override { throw Reached{}; }
  void cross_wait() override { throw Reached{}; }
  void cross_drain() noexcept override {}
  size_t piece_bytes() const override { throw Reached{}; }
  void divide(void*, size_t, dcclDataType_t, int) override { throw Reached{}; }
  void* temp(size_t, const void*) override { throw Reached{}; }
};

// 0: refused as another collective's; 1: reached a step; 2: returned.
int run(const dccl::tune::AlgoEntry& e, SubColl tag) {
  StepLevels lv;
  float buf[4] = {};
  try {
    e.hier(lv, SubOp{tag, buf, buf, 4, dcclFloat32, dcclSum, 0});
  } catch (const Reached&) {
    return 1;
  } catch (const dccl::core::Error& e) {
    EXPECT_EQ(e.code(), dcclInternalError);
    return 0;
  }
  return 2;
}
}  // namespace

TEST(HierTag, EachCollectiveTaggedAsItself) {
  const SubColl all[] = {SubColl::AllReduce, SubColl::ReduceScatter, SubColl::AllGather, SubColl::Broadcast,
                         SubColl::Reduce};
  int hier = 0;
  for (const auto& e : dccl::tune::algo_table()) {
    if (!e.hier) continue;
    ++hier;
    const SubColl own = dccl::sched::sub_coll(e.coll);
    SCOPED_TRACE(dccl::tune::coll_name(e.coll));
    EXPECT_EQ(run(e, own), 1);
    for (SubColl other : all) {
      if (other != own) {
        EXPECT_EQ(run(e, other), 0);
      }
    }
  }
  EXPECT_EQ(hier, 5);
  // Distinct tags for the five.
  EXPECT_EQ(dccl::sched::sub_coll(dccl::tune::Coll::AllGather), SubColl::AllGather);
  EXPECT_EQ(dccl::sched::sub_coll(dccl::tune::Coll::Broadcast), SubColl::Broadcast);
  EXPECT_THROW(dccl::sched::sub_coll(dccl::tune::Coll::AlltoAll), dccl::core::Error);
}
