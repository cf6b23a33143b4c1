// Topology from every rank's host id: hosts in order of their lowest rank, local
// ranks, leaders, uniform and host-by-host placements; host identity from the setting.
#include <gtest/gtest.h>
#include <sched.h>

#include "core/error.hpp"
#include "topo/topology.hpp"

using dccl::topo::make_topology;

TEST(Topology, BlockedUniform) {
  auto t = make_topology({"a", "a", "b", "b", "c", "c"}, 3);
  EXPECT_EQ(t.nhosts(), 3);
  EXPECT_EQ(t.host, 1);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_size, 2);
  EXPECT_EQ(t.leader(0), 0);
  EXPECT_EQ(t.leader(2), 4);
  EXPECT_TRUE(t.uniform());
  EXPECT_TRUE(t.ranks_by_host());
  EXPECT_EQ(t.summary(false), "3 hosts x 2 ranks: host0=[0,1] host1=[2,3] host2=[4,5]");
}

TEST(Topology, InterleavedAndUneven) {
  auto t = make_topology({"x", "y", "x", "y"}, 2);  // round-robin placement
  EXPECT_EQ(t.nhosts(), 2);
  EXPECT_EQ(t.host, 0);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_TRUE(t.uniform());
  EXPECT_FALSE(t.ranks_by_host());
  EXPECT_EQ(t.ranks_on[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(t.local_of[3], 1);

  auto u = make_topology({"h0", "h0", "h0", "h1"}, 3);  // 3 + 1
  EXPECT_FALSE(u.uniform());
  EXPECT_FALSE(u.ranks_by_host());
  EXPECT_EQ(u.local_size, 1);
  EXPECT_EQ(u.local_rank, 0);
  EXPECT_EQ(u.leader(1), 3);
  EXPECT_EQ(u.summary(false), "2 hosts (uneven): host0=[0,1,2] host1=[3]");
}

TEST(Topology, OneHostAndBadRank) {
  auto t = make_topology({"only"}, 0);
  EXPECT_EQ(t.nhosts(), 1);
  EXPECT_TRUE(t.ranks_by_host());
  EXPECT_THROW(make_topology({"a", "b"}, 2), dccl::core::Error);
  EXPECT_THROW(make_topology({"a", "b"}, -1), dccl::core::Error);
}

TEST(Topology, HostIdentity) {
  EXPECT_EQ(dccl::topo::host_identity("rack3-node7"), "rack3-node7");
  const std::string a = dccl::topo::host_identity("", "node-a"), b = dccl::topo::host_identity("", "node-b");
  EXPECT_EQ(a.rfind("node-a", 0), 0u) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(6), b.substr(6)) << "same machine, same boot id";
}

// The cores a host's ranks share: the union of their affinity lists, so that
// ranks bound to a core each are not taken for ranks crowding one core.
TEST(Affinity, UnionOfTheHostsRanks) {
  using dccl::topo::union_cpu_count;
  EXPECT_EQ(union_cpu_count({"0", "1"}), 2);
  EXPECT_EQ(union_cpu_count({"0", "0"}), 1);
  EXPECT_EQ(union_cpu_count({"0-3,8", "2-5", "10-11"}), 9);
  EXPECT_EQ(union_cpu_count({"", ""}), 0);
  EXPECT_EQ(union_cpu_count({"3-1", "x", "0-"}), 0);  // unreadable lists count nothing
  EXPECT_EQ(union_cpu_count({"7", "bogus"}), 1);
  const std::string mine = dccl::topo::affinity_text();
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(union_cpu_count({mine}), CPU_COUNT(&set)) << mine;
}
