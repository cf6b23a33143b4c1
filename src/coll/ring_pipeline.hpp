// Chunk-pipelined ring engine shared by ring allreduce, reduce-scatter and allgather.
// The message is split into blocks (one per rank) and each block into C chunks.
// Chunk ch of step t+1 is sent as soon as chunk ch of step t has arrived and been
// processed, so chunks flow around the ring back to back.
#pragma once
#include <functional>

#include "coll/call_context.hpp"

namespace dccl::coll {

struct RingPipeline {
  int steps = 0;   // ring steps
  int chunks = 1;  // chunks per block
  // Bytes of chunk ch this rank sends / receives at step t (the receiver's recv_bytes
  // equals the sender's bytes for the same step and chunk).
  std::function<size_t(int t, int ch)> bytes;
  std::function<size_t(int t, int ch)> recv_bytes;  // empty: same as bytes
  std::function<const void*(int t, int ch)> send_ptr;
  std::function<void*(int t, int ch)> recv_ptr;
  // Called when chunk ch of step t has arrived (e.g. reduce it). May be empty.
  std::function<void(int t, int ch)> on_recv;
  // Step whose send of chunk ch must be complete before recv/on_recv of (t, ch) may
  // write memory that send reads; -1 when none.
  std::function<int(int t)> recv_after_send_of;
  std::function<int(int t)> on_recv_after_send_of;
  // Start together: a barrier of the communicator's ranks first (its tags below the
  // ring's). Ranks that start a ring out of phase keep it out of phase: each link
  // idles while its rank waits for a predecessor that began later, and the lag
  // travels round the ring from call to call. Worth its log2(n) empty messages on
  // large blocks only (see kAlignBlockBytes).
  bool align = false;
  // Per-rank block size from which a ring starts together (allgather, reduce-scatter,
  // allreduce): on 4 emulated hosts behind a capped leaf-spine fabric, 16 MiB calls took
  // allgather 108 against 114 ms, reduce-scatter 107-108 against 112-116, allreduce 214
  // against 218 (bench/results/2026-12-06-ring-align), where a barrier costs ~0.2 ms.
  static constexpr size_t kAlignBlockBytes = size_t{1} << 20;

  void run(CallContext& c, int next, int prev) const;
};

// Number of chunks so that each is about chunk_bytes (at least one).
int chunks_for(size_t block_elems, size_t esize, size_t chunk_bytes);
// Element range of chunk ch when a block of block_elems is cut into `chunks`
// pieces of ceil(max_block_elems / chunks) elements.
void chunk_range(size_t max_block_elems, size_t block_elems, int chunks, int ch, size_t* off,
                 size_t* len);

}  // namespace dccl::coll
