// The tuner's choices: which algorithm each collective gets by size, rank count and
// what the host offers (the shared segment's one-shot slots and chunk slots), and
// DCCL_ALGO overrides, including the ones that must be refused.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tune/algo_table.hpp"
#include "tune/link_model.hpp"
#include "tune/plan.hpp"
#include "tune/tuner.hpp"

using dccl::tune::Algo;
using dccl::tune::Coll;
using dccl::tune::Tuner;
using dccl::tune::link_model_for;
using dccl::tune::segment_chunk_bytes;

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * 1024;
Algo pick(const Tuner& t, Coll c, size_t bytes, int n) { return t.choose(c, bytes, n).algo; }
// A tuner made from the plan of 4 ranks on one host (same_host) or on 2, with the
// shared segment's one-shot up to segment_bytes (0: off) and its chunk slots (or not).
Tuner make(const char* algo, size_t chunk, bool same_host, size_t segment_bytes = 0, bool segment_chunks = false,
           const char* provider = "tcp") {
  dccl::core::Config cfg;
  cfg.algo = algo;
  cfg.chunk_bytes = chunk;
  cfg.segment_bytes = segment_bytes;
  cfg.segment_chunk_bytes = segment_chunks ? 256 * KiB : 0;
  cfg.hier = true;
  cfg.spin_us = 50;
  return Tuner(dccl::tune::make_plan(
      {.nranks = 4, .nhosts = same_host ? 1 : 2, .local_size = same_host ? 4 : 2, .provider = provider}, cfg));
}
}  // namespace

TEST(Tuner, AllreduceAcrossHostsByMessages) {
  Tuner t = make("", 0, /*same_host=*/false, /*segment_bytes=*/0, /*segment_chunks=*/false);
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 4), Algo::Rd);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * KiB, 2), Algo::Rd);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * KiB, 4), Algo::Rhd);
  EXPECT_EQ(pick(t, Coll::AllReduce, 1 * MiB, 4), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::ReduceScatter, 64 * MiB, 4), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::AllGather, 16 * MiB, 4), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::AllGather, 1 * KiB, 4), Algo::Bruck);
  EXPECT_EQ(t.choose(Coll::AllReduce, 1 * MiB, 4).chunk_bytes, 256 * KiB);
}

TEST(Tuner, OneHostUsesTheSegment) {
  Tuner t = make("", 0, /*same_host=*/true, /*segment_bytes=*/64 * KiB, /*segment_chunks=*/true);
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 2), Algo::Segment);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * KiB, 8), Algo::Segment);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * KiB + 4, 2), Algo::SegmentRs);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * MiB, 4), Algo::SegmentRs);
  // Reduce-scatter (bytes: the whole input) and allgather (bytes: one rank's block)
  // from 4 MiB in total; below, libfabric shm's single copy wins.
  EXPECT_EQ(pick(t, Coll::ReduceScatter, 4 * MiB, 4), Algo::Segment);
  EXPECT_EQ(pick(t, Coll::ReduceScatter, 4 * MiB - 4, 4), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::AllGather, 1 * MiB, 4), Algo::Segment);
  EXPECT_EQ(pick(t, Coll::AllGather, 1 * MiB - 4, 4), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::Broadcast, 64 * MiB, 4), Algo::Chain);
}

TEST(Tuner, ChunkByLinkAndMemory) {
  // One host: host memory takes the link's chunk (512 KiB on shared memory, 1 MiB over
  // TCP), device memory 2 MiB (each chunk's reduction is a hand-off to the device);
  // across hosts 256 KiB; DCCL_CHUNK_BYTES wins.
  Tuner one = make("", 0, /*same_host=*/true, 64 * KiB, true, "shm");
  EXPECT_EQ(one.choose(Coll::AllReduce, 16 * MiB, 4, /*device=*/false).chunk_bytes, 512 * KiB);
  Tuner one_tcp = make("", 0, /*same_host=*/true, 0, false, "tcp;ofi_rxm");
  EXPECT_EQ(one_tcp.choose(Coll::AllReduce, 16 * MiB, 4, false).chunk_bytes, 1 * MiB);
  EXPECT_EQ(one_tcp.choose(Coll::AllReduce, 16 * MiB, 4, true).chunk_bytes, 2 * MiB);
  EXPECT_EQ(one.choose(Coll::AllReduce, 16 * MiB, 4, /*device=*/true).chunk_bytes, 2 * MiB);
  EXPECT_EQ(one.choose(Coll::AllReduce, 16 * MiB, 4, true).algo, Algo::Ring);
  Tuner across = make("", 0, /*same_host=*/false);
  EXPECT_EQ(across.choose(Coll::AllReduce, 16 * MiB, 4, true).chunk_bytes, 256 * KiB);
  Tuner forced = make("", 1 * MiB, true, 64 * KiB, true);
  EXPECT_EQ(forced.choose(Coll::AllReduce, 16 * MiB, 4, true).chunk_bytes, 1 * MiB);
}

TEST(Tuner, SegmentPartsSwitchedOffSeparately) {
  Tuner no_chunks = make("", 0, true, 64 * KiB, false);
  EXPECT_EQ(pick(no_chunks, Coll::AllReduce, 32 * KiB, 2), Algo::Segment);
  EXPECT_EQ(pick(no_chunks, Coll::AllReduce, 16 * MiB, 2), Algo::Ring);
  EXPECT_EQ(pick(no_chunks, Coll::ReduceScatter, 16 * MiB, 2), Algo::Ring);
  Tuner no_oneshot = make("", 0, true, 0, true);
  EXPECT_EQ(pick(no_oneshot, Coll::AllReduce, 8, 2), Algo::SegmentRs);
}

TEST(Tuner, ForcedAlgorithmsFallBackWhenTheSegmentLacksThem) {
  // A forced algorithm the communicator cannot run gives way to the default choice.
  Tuner t = make("allreduce:segment,reduce_scatter:segment,allgather:segment", 0, false, 0, false);
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 4), Algo::Rd);
  EXPECT_EQ(pick(t, Coll::AllReduce, 1 * MiB, 4), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::ReduceScatter, 8, 4), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::AllGather, 8, 4), Algo::Bruck);
  EXPECT_EQ(pick(t, Coll::AllGather, 1 * MiB, 4), Algo::Ring);
  Tuner rs = make("allreduce:segment_rs", 0, true, 64 * KiB, false);
  EXPECT_EQ(pick(rs, Coll::AllReduce, 8, 4), Algo::Segment);
  EXPECT_EQ(pick(rs, Coll::AllReduce, 1 * MiB, 4), Algo::Ring);
  Tuner seg = make("allreduce:segment_rs,allgather:segment", 0, true, 64 * KiB, true);
  EXPECT_EQ(pick(seg, Coll::AllReduce, 8, 4), Algo::SegmentRs);
  EXPECT_EQ(pick(seg, Coll::AllGather, 8, 4), Algo::Segment);
}

TEST(Tuner, OverridesAreChecked) {
  EXPECT_EQ(pick(make("ring", 0, true, 64 * KiB, true), Coll::AllReduce, 8, 2), Algo::Ring);
  EXPECT_EQ(pick(make("ring", 0, true, 64 * KiB, true), Coll::AllGather, 64 * MiB, 2), Algo::Ring);
  EXPECT_EQ(make("", 128 * KiB, false).choose(Coll::AllReduce, 1 * MiB, 4).chunk_bytes, 128 * KiB);
  auto refused = [](const char* spec) {
    try {
      Tuner t = make(spec, 0, true, 64 * KiB, true);
    } catch (const dccl::core::Error& e) {
      return e.code() == dcclInvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(refused("broadcast:segment"));
  EXPECT_TRUE(refused("reduce:segment_rs"));
  EXPECT_TRUE(refused("allreduce:bruck"));
  EXPECT_TRUE(refused("warp"));
  EXPECT_TRUE(refused("allgatherx:ring"));
  EXPECT_FALSE(refused("allreduce:segment_rs,reducescatter:segment,all_gather:segment"));
}

TEST(Tuner, DeviceMemoryNeverTakesTheSegment) {
  Tuner t = make("", 0, true, 64 * KiB, true);
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 4), Algo::Segment);
  EXPECT_EQ(t.choose(Coll::AllReduce, 8, 4, /*device=*/true).algo, Algo::Rd);
  EXPECT_EQ(t.choose(Coll::AllReduce, 1 * MiB, 4, true).algo, Algo::Ring);
  EXPECT_EQ(t.choose(Coll::AllGather, 4 * MiB, 4, true).algo, Algo::Ring);
  Tuner forced = make("allreduce:segment_rs", 0, true, 64 * KiB, true);
  EXPECT_EQ(forced.choose(Coll::AllReduce, 100 * KiB, 4, true).algo, Algo::Rhd);
}

TEST(Tuner, HierarchyAcrossHosts) {
  Tuner t = make("", 0, false);
  t.set_levels(true, /*ranks_by_host=*/true);
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 8), Algo::Hier);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * MiB, 8), Algo::Hier);
  EXPECT_EQ(pick(t, Coll::Broadcast, 8, 8), Algo::Hier);
  EXPECT_EQ(pick(t, Coll::AllGather, 1 * MiB, 8), Algo::Hier);
  EXPECT_EQ(pick(t, Coll::ReduceScatter, 1 * MiB, 8), Algo::Hier);
  EXPECT_EQ(pick(t, Coll::Reduce, 8, 8), Algo::Hier);
  EXPECT_EQ(pick(t, Coll::AlltoAll, 1 * MiB, 8), Algo::Pairwise);
  t.set_levels(true, /*ranks_by_host=*/false);  // interleaved placement: no hierarchical allgather
  EXPECT_EQ(pick(t, Coll::AllGather, 1 * MiB, 8), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::ReduceScatter, 1 * MiB, 8), Algo::Ring);
  EXPECT_EQ(pick(t, Coll::AllReduce, 1 * MiB, 8), Algo::Hier);
  EXPECT_EQ(pick(t, Coll::Reduce, 1 * MiB, 8), Algo::Hier);
  Tuner flat = make("allreduce:ring", 0, false);
  flat.set_levels(true, true);
  EXPECT_EQ(pick(flat, Coll::AllReduce, 1 * MiB, 8), Algo::Ring);
  Tuner none = make("hier", 0, false);  // forced, but one host: the default
  EXPECT_EQ(pick(none, Coll::AllReduce, 1 * MiB, 4), Algo::Ring);
}

TEST(Tuner, TableNamesEveryAlgorithm) {
  const std::string list = dccl::tune::algo_list_text();
  for (const char* n : {"allreduce: segment, segment_rs, hier, rd, rhd, ring", "broadcast: hier, tree, chain",
                        "allgather: hier, segment, bruck, ring", "reducescatter: hier, segment, ring",
                        "reduce: hier, tree, chain"})
    EXPECT_NE(list.find(n), std::string::npos) << list;
  for (const auto& e : dccl::tune::algo_table()) EXPECT_TRUE((e.flat != nullptr) != (e.hier != nullptr) || e.coll == Coll::SendRecv);
}

// The settings help (dccl-info, docs/env.md) lists the algorithms from the table;
// the core settings table itself knows nothing of the tuner above it.
TEST(Tuner, SettingsHelpListsTheTable) {
  bool found = false;
  for (const auto& e : dccl::tune::settings()) {
    if (std::string(e.name) != "DCCL_ALGO") continue;
    found = true;
    EXPECT_NE(std::string(e.help).find(dccl::tune::algo_list_text()), std::string::npos) << e.help;
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(dccl::tune::settings().size(), dccl::core::config_entries().size());
}

namespace {
// Costs summed step by step as the two algorithms run (power-of-two n), in us.
double rd_cost(int n, double s, const dccl::tune::LinkModel& m) {
  double t = 0;
  for (int d = 1; d < n; d *= 2) t += m.alpha_us + s / (m.gbps * 1e3) + s / (m.reduce_gbps * 1e3);
  return t;
}
double rhd_cost(int n, double s, const dccl::tune::LinkModel& m) {
  double t = 0, part = s;
  for (int d = 1; d < n; d *= 2) {
    part /= 2;  // halving: send one half, reduce the other
    t += m.alpha_us + part / (m.gbps * 1e3) + part / (m.reduce_gbps * 1e3);
  }
  for (int d = 1; d < n; d *= 2) {
    t += m.alpha_us + part / (m.gbps * 1e3);  // doubling: the parts come back
    part *= 2;
  }
  return t;
}
}  // namespace

TEST(Tuner, RecursiveDoublingBoundComesFromTheLinkModel) {
  using dccl::tune::link_model_for;
  using dccl::tune::rd_allreduce_max_bytes;
  for (const char* prov : {"shm", "tcp;ofi_rxm", "efa"}) {
    const auto m = link_model_for(prov);
    size_t prev = SIZE_MAX;
    for (int n : {2, 4, 8, 16, 64, 1024}) {
      const size_t b = rd_allreduce_max_bytes(n, m);
      SCOPED_TRACE(std::string(prov) + " n=" + std::to_string(n) + " bound=" + std::to_string(b));
      EXPECT_LE(b, prev);  // more ranks: halving-doubling pays off sooner
      prev = b;
      if (b > dccl::tune::kRdMinBytes && b < dccl::tune::kRdMaxBytes) {
        // The crossover: recursive doubling no dearer just below, dearer just above.
        EXPECT_LE(rd_cost(n, 0.99 * b, m), rhd_cost(n, 0.99 * b, m));
        EXPECT_GT(rd_cost(n, 1.01 * b, m), rhd_cost(n, 1.01 * b, m));
      }
    }
  }
  // The slowest class of a mixed summary; TCP's ~7 us per message puts 4 ranks'
  // bound between 32 and 64 KiB, where dccl-perf measured the two algorithms cross.
  EXPECT_EQ(rd_allreduce_max_bytes(4, link_model_for("shm+tcp;ofi_rxm")),
            rd_allreduce_max_bytes(4, link_model_for("tcp;ofi_rxm")));
  const size_t tcp4 = rd_allreduce_max_bytes(4, link_model_for("tcp;ofi_rxm"));
  EXPECT_GT(tcp4, 32 * KiB);
  EXPECT_LT(tcp4, 64 * KiB);
  Tuner t = make("", 0, false, 0, false, "tcp;ofi_rxm");
  EXPECT_EQ(pick(t, Coll::AllReduce, 32 * KiB, 4), Algo::Rd);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * KiB, 4), Algo::Rhd);
  EXPECT_EQ(pick(t, Coll::AllReduce, 64 * KiB, 2), Algo::Rd);
  EXPECT_EQ(pick(t, Coll::AllReduce, 512 * KiB, 2), Algo::Ring);
  // Every rank count uses its own bound, non-powers of two included.
  for (int n : {3, 4, 5, 7, 8, 9, 100, 1024, 1025}) {
    const size_t b = rd_allreduce_max_bytes(n, link_model_for("tcp;ofi_rxm"));
    EXPECT_EQ(pick(t, Coll::AllReduce, b, n), Algo::Rd) << n;
    EXPECT_EQ(pick(t, Coll::AllReduce, b + 4, n), Algo::Rhd) << n;
  }
}

// The segment's chunk: the setting when the environment gave it (the default's
// value included), else 512 KiB for 2 ranks and the setting's default above.
TEST(Tuner, SegmentChunkByRankCount) {
  constexpr size_t k256 = size_t{256} << 10, k512 = size_t{512} << 10;
  EXPECT_EQ(segment_chunk_bytes(k256, false, 2), k512);
  EXPECT_EQ(segment_chunk_bytes(k256, true, 2), k256);
  EXPECT_EQ(segment_chunk_bytes(k256, false, 4), k256);
  EXPECT_EQ(segment_chunk_bytes(k256, false, 8), k256);
  EXPECT_EQ(segment_chunk_bytes(0, true, 2), size_t{0});  // 0 still switches it off
  EXPECT_EQ(segment_chunk_bytes(size_t{1} << 20, true, 4), size_t{1} << 20);
}

// choose() keeps its last answer: asking the same question again, a different one,
// or the same after set_levels() gives what a new tuner (nothing kept) says for that
// one question, never a stale choice.
TEST(Tuner, RememberedChoiceNeverStale) {
  Tuner t = make("", 0, false);
  const size_t sizes[] = {8, 8, 64 * KiB, 8, 1 * MiB, 1 * MiB, 8};
  for (size_t b : sizes)
    for (int n : {2, 8, 2})
      for (bool dev : {false, true, false}) {
        const auto got = t.choose(Coll::AllReduce, b, n, dev);
        const auto want = make("", 0, false).choose(Coll::AllReduce, b, n, dev);
        EXPECT_EQ(got.algo, want.algo) << b << " " << n;
        EXPECT_EQ(got.chunk_bytes, want.chunk_bytes) << b << " " << n;
        EXPECT_EQ(t.choose(Coll::Broadcast, b, n, dev).algo, make("", 0, false).choose(Coll::Broadcast, b, n, dev).algo);
      }
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 8), Algo::Rd);
  t.set_levels(true, true);  // the same question now has another answer
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 8), Algo::Hier);
  t.set_levels(false, true);
  EXPECT_EQ(pick(t, Coll::AllReduce, 8, 8), Algo::Rd);
}
