#include "tune/tuner.hpp"

#include <sstream>

#include "core/error.hpp"

namespace dccl::tune {

const char* coll_name(Coll c) {
  static const char* n[] = {"all_reduce", "reduce", "broadcast", "all_gather",
                            "reduce_scatter", "alltoall", "barrier", "sendrecv"};
  return n[static_cast<int>(c)];
}

const char* algo_name(Algo a) {
  static const char* n[] = {"ring", "rhd", "rd", "tree", "chain", "bruck", "pairwise", "dissemination", "direct", "smem", "smem_rs", "hier"};
  return n[static_cast<int>(a)];
}

namespace {
bool parse_algo(const std::string& s, Algo* out) {
  for (int i = 0; i < kNumAlgos; ++i)
    if (s == algo_name(static_cast<Algo>(i))) {
      *out = static_cast<Algo>(i);
      return true;
    }
  return false;
}
bool parse_coll(const std::string& s, Coll* out) {
  for (int i = 0; i <= static_cast<int>(Coll::SendRecv); ++i) {
    std::string name = coll_name(static_cast<Coll>(i));
    std::string bare;
    for (char ch : name)
      if (ch != '_') bare += ch;
    if (s == name || s == bare) {
      *out = static_cast<Coll>(i);
      return true;
    }
  }
  return false;
}
}  // namespace

bool Tuner::valid_for(Coll c, Algo a) const {
  switch (c) {
    case Coll::AllReduce:
      return a == Algo::Ring || a == Algo::Rhd || a == Algo::Rd || a == Algo::Smem || a == Algo::SmemRs || a == Algo::Hier;
    case Coll::Reduce: return a == Algo::Tree || a == Algo::Chain;
    case Coll::Broadcast: return a == Algo::Tree || a == Algo::Chain || a == Algo::Hier;
    case Coll::AllGather: return a == Algo::Ring || a == Algo::Bruck || a == Algo::Smem || a == Algo::Hier;
    case Coll::ReduceScatter: return a == Algo::Ring || a == Algo::Smem;
    case Coll::AlltoAll: return a == Algo::Pairwise;
    case Coll::Barrier: return a == Algo::Dissemination;
    case Coll::SendRecv: return a == Algo::Direct;
  }
  return false;
}

Tuner::Tuner(const std::string& spec, size_t chunk_override, bool same_host, size_t smem_bytes, bool smem_chunks)
    : chunk_override_(chunk_override), same_host_(same_host), smem_bytes_(smem_bytes), smem_chunks_(smem_chunks) {
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto colon = item.find(':');
    Algo a;
    if (colon == std::string::npos) {
      if (!parse_algo(item, &a))
        core::raise(dcclInvalidArgument, "DCCL_ALGO: unknown algorithm '" + item + "'");
      bool any = false;
      for (int i = 0; i < 8; ++i)
        if (valid_for(static_cast<Coll>(i), a)) {
          forced_[i] = a;
          has_forced_[i] = true;
          any = true;
        }
      if (!any) core::raise(dcclInvalidArgument, "DCCL_ALGO: '" + item + "' applies to no collective");
    } else {
      Coll c;
      if (!parse_coll(item.substr(0, colon), &c))
        core::raise(dcclInvalidArgument, "DCCL_ALGO: unknown collective '" + item.substr(0, colon) + "'");
      if (!parse_algo(item.substr(colon + 1), &a) || !valid_for(c, a))
        core::raise(dcclInvalidArgument, "DCCL_ALGO: '" + item.substr(colon + 1) +
                                             "' is not an algorithm for " + coll_name(c));
      forced_[static_cast<int>(c)] = a;
      has_forced_[static_cast<int>(c)] = true;
    }
  }
}

Choice Tuner::choose(Coll c, size_t bytes, int n) const {
  Choice ch{Algo::Direct, 0};
  switch (c) {
    case Coll::AllReduce:
      ch.algo = bytes <= (16u << 10) || (n <= 2 && bytes <= (64u << 10)) ? Algo::Rd
                : bytes <= (256u << 10)                              ? Algo::Rhd
                                                                     : Algo::Ring;
      if (smem_chunks_ && bytes > smem_bytes_) ch.algo = Algo::SmemRs;
      if (smem_bytes_ > 0 && bytes <= smem_bytes_) ch.algo = Algo::Smem;
      break;
    case Coll::Reduce: ch.algo = bytes <= (64u << 10) ? Algo::Tree : Algo::Chain; break;
    case Coll::Broadcast: ch.algo = bytes <= (64u << 10) ? Algo::Tree : Algo::Chain; break;
    case Coll::AllGather:
      ch.algo = bytes * static_cast<size_t>(n) <= (64u << 10) ? Algo::Bruck : Algo::Ring;
      // Through the segment every byte is copied twice (in, out); libfabric shm's
      // single CMA copy wins while the buffers sit in cache (measured: 64 KiB-1 MiB),
      // the segment from 4 MiB (1.3-2.2x). Same for reduce-scatter.
      if (smem_chunks_ && bytes * static_cast<size_t>(n) >= (4u << 20)) ch.algo = Algo::Smem;
      break;
    case Coll::ReduceScatter: ch.algo = smem_chunks_ && bytes >= (4u << 20) ? Algo::Smem : Algo::Ring; break;
    case Coll::AlltoAll: ch.algo = Algo::Pairwise; break;
    case Coll::Barrier: ch.algo = Algo::Dissemination; break;
    case Coll::SendRecv: ch.algo = Algo::Direct; break;
  }
  // Several hosts with the same number of ranks each: two levels of sub-communicators.
  const Algo flat = ch.algo;
  if (levels_ && (c == Coll::AllReduce || c == Coll::Broadcast || (c == Coll::AllGather && levels_blocked_)))
    ch.algo = Algo::Hier;
  if (has_forced_[static_cast<int>(c)]) ch.algo = forced_[static_cast<int>(c)];
  if (ch.algo == Algo::Hier && !(levels_ && (c != Coll::AllGather || levels_blocked_))) ch.algo = flat;
  // The one-shot needs the segment and a message that fits a slot.
  if (c == Coll::AllReduce && ch.algo == Algo::Smem && (smem_bytes_ == 0 || bytes > smem_bytes_))
    ch.algo = bytes <= (256u << 10) ? Algo::Rd : Algo::Ring;
  // Reduce-scatter and allgather through the segment need its chunk slots.
  if (c != Coll::AllReduce && ch.algo == Algo::Smem && !smem_chunks_) ch.algo = Algo::Ring;
  if (ch.algo == Algo::SmemRs && !smem_chunks_) ch.algo = Algo::Ring;
  // Larger chunks amortise per-message cost on shared memory; TCP prefers smaller ones
  // so that reduction overlaps the wire.
  ch.chunk_bytes = chunk_override_ ? chunk_override_ : same_host_ ? (512u << 10) : (256u << 10);
  return ch;
}

}  // namespace dccl::tune
