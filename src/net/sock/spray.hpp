// Several flows per peer on the socket path: the rules that do not touch a socket
// (how many flows a pair gets, how a message is cut, which flow takes the next
// chunk, the chunk header), kept apart so that they are tested alone
// (tests/unit/spray_test.cc). The socket path applies them (net/sock/sock_spray.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dccl::net::spray {

// DCCL_NET_FLOWS=0 (automatic): one flow to a peer on the same host (loopback has
// no per-flow cap and no paths to spread over), kRemoteFlows across hosts. Measured
// on a fabric whose per-flow cap is a quarter of the link (bench/results/2026-12-04-flows):
// four flows often hash two onto one cap or path and reach ~70 % of the link, eight
// reach it more often (allgather 16 MiB 1.55x four's); one gets a quarter.
inline constexpr int kRemoteFlows = 8;
inline constexpr int kMaxFlows = 64;
// Messages below this stay on the lead flow whole (their latency does not change).
inline constexpr size_t kSprayMinBytes = size_t{256} << 10;
// A flow takes a new chunk while fewer than this many of its bytes wait (in the
// path's queue and in the kernel's send buffer, SIOCOUTQ): a flow that drains
// slowly (capped, or sharing a path) is handed fewer chunks. Whatever waits is
// ahead of a call's last chunk: on the capped fabric (4 hosts, 1 Gbit/s links, a
// quarter of that per flow, 8 flows, a quiet machine) 16 MiB allreduce reached 0.91-0.92
// of the link with 128 KiB, 0.88-0.91 with 256 KiB, 0.80-0.83 with 512 KiB; allgather
// 0.88-0.90, 0.85-0.86, 0.68-0.85 (bench/results/2026-12-05-fabric-window). A flow
// carries at most this much per round trip: DCCL_NET_FLOW_WINDOW_BYTES raises it
// where one flow's rate times the round trip is larger.
inline constexpr size_t kWindowBytes = size_t{128} << 10;

// The pair's flows: each end's wish (0: automatic) resolved for the pair, the smaller.
inline int pair_flows(int mine, int theirs, bool local) {
  auto resolve = [&](int f) { return f > 0 ? f : (local ? 1 : kRemoteFlows); };
  const int a = resolve(mine), b = resolve(theirs);
  return a < b ? a : b;
}

// Chunk size for a sprayed message of `len` bytes over `flows` flows: about eight
// chunks per flow, between 64 KiB and 1 MiB, a multiple of 4 KiB.
inline size_t chunk_bytes(size_t len, int flows) {
  size_t c = len / (size_t(8) * static_cast<size_t>(flows > 0 ? flows : 1));
  c = (c + 4095) & ~size_t{4095};
  if (c < (size_t{64} << 10)) c = size_t{64} << 10;
  if (c > (size_t{1} << 20)) c = size_t{1} << 20;
  return c;
}

// The flow with the fewest queued bytes, if it has fewer than `window`; -1 when every
// flow is full or dead (queued[i] == SIZE_MAX). Ties go to the lowest index.
inline int pick_flow(const std::vector<size_t>& queued, size_t window) {
  int best = -1;
  for (size_t i = 0; i < queued.size(); ++i)
    if (queued[i] < window && (best < 0 || queued[i] < queued[static_cast<size_t>(best)])) best = static_cast<int>(i);
  return best;
}

// The 16-byte header of a message is (tag, length); the length's top bits say what
// the frame is (none: a whole message). An announcement: kAnnounce | length, no
// payload follows. A chunk: (offset, kChunk | seq << 32 | chunk length) and the
// chunk's bytes; seq numbers the pair's sprayed messages in call order (30 bits,
// wrapping).
inline constexpr uint64_t kAnnounce = uint64_t{1} << 63;
inline constexpr uint64_t kChunk = uint64_t{1} << 62;
// The end frame (both bits, no payload): the last frame of every flow, written by the
// sender's close (net/sock/sock_close.cc). A flow that ends without it was lost.
inline constexpr uint64_t kEnd = kAnnounce | kChunk;
inline constexpr uint32_t kSeqMask = (uint32_t{1} << 30) - 1;
inline uint64_t chunk_word(uint32_t seq, uint32_t len) {
  return kChunk | (uint64_t{seq & kSeqMask} << 32) | len;
}
inline uint32_t chunk_seq(uint64_t word) { return static_cast<uint32_t>(word >> 32) & kSeqMask; }
inline uint32_t chunk_len(uint64_t word) { return static_cast<uint32_t>(word); }
// Whether seq `s` is announced after `next` (the number the lead expects next):
// within half the number space ahead of it.
inline bool seq_ahead(uint32_t s, uint32_t next) { return ((s - next) & kSeqMask) < (kSeqMask >> 1); }

}  // namespace dccl::net::spray
