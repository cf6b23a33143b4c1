// A rank for the soak (bench/soak): checked collectives in a loop until told to
// stop or until a call fails.   soak_rank DIR SECONDS
//
// Waits (up to 60 s) for DIR/go before init, so that the driver can start
// watching the job's network first. Then loops all_reduce (sum, max),
// all_gather, reduce_scatter and broadcast over float32 and int32, 8 B to 4 MiB,
// the choice and the values depending on the iteration (the same on every rank)
// and on the rank; each result is compared, element by element, with a
// reference computed here in float64 / int64. Every 8th call is an agreement:
// a max all_reduce of "DIR/stop exists or SECONDS are over", so that every rank
// ends after the same call.
// Files: DIR/pid.<rank>; DIR/ready.<rank> after the first good call;
// DIR/result.<rank> "<epoch ms> <error text>" at the first failed call (then
// abort and exit 1); DIR/summary.<rank> "calls C wrong W" at the end, also
// printed. Exit 0 when every call succeeded and every element was right.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "dccl/dccl.h"
#include "rank_files.hpp"

namespace {
bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A mixer of (iteration, salt): the same on every rank.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Rank r's element j in iteration i. Small integers, so that float32 sums of a
// few ranks are exact and the float64 reference must match bit for bit; int32
// values use most of the range (their int64 sums are truncated like int32's).
double fval(int r, long i, size_t j) { return static_cast<double>(static_cast<int>(mix(i * 131 + r * 7 + j) % 257) - 128); }
int64_t ival(int r, long i, size_t j) { return static_cast<int64_t>(static_cast<int32_t>(mix(i * 977 + r * 13 + j))) / 4; }

enum Kind { kAllReduceSum, kAllReduceMax, kAllGather, kReduceScatter, kBroadcast, kKinds };
const char* kKindName[] = {"all_reduce(sum)", "all_reduce(max)", "all_gather", "reduce_scatter", "broadcast"};

struct Soak {
  dcclComm_t comm;
  int rank, n;
  long calls = 0, wrong = 0;
  std::string dir, me, failed_text;

  // Runs one call of kind k over `count` elements per rank of type T (float or
  // int32_t); false when the call failed (failed_text set).
  template <typename T>
  bool one(Kind k, size_t count, long i) {
    constexpr bool is_f = std::is_floating_point_v<T>;
    const dcclDataType_t dt = is_f ? dcclFloat32 : dcclInt32;
    auto val = [&](int r, size_t j) -> double { return is_f ? fval(r, i, j) : static_cast<double>(ival(r, i, j)); };
    auto ref_i = [&](int r, size_t j) { return ival(r, i, j); };
    const size_t nn = static_cast<size_t>(n);
    size_t in_count = count, out_count = count;
    if (k == kAllGather) out_count = count * nn;
    if (k == kReduceScatter) in_count = count * nn;
    std::vector<T> in(in_count), out(out_count, T(-1));
    for (size_t j = 0; j < in_count; ++j) in[j] = static_cast<T>(is_f ? fval(rank, i, j) : ref_i(rank, j));
    const int root = static_cast<int>(i % n);
    dcclResult_t rc = dcclSuccess;
    switch (k) {
      case kAllReduceSum: rc = dcclAllReduce(in.data(), out.data(), count, dt, dcclSum, comm, nullptr); break;
      case kAllReduceMax: rc = dcclAllReduce(in.data(), out.data(), count, dt, dcclMax, comm, nullptr); break;
      case kAllGather: rc = dcclAllGather(in.data(), out.data(), count, dt, comm, nullptr); break;
      case kReduceScatter: rc = dcclReduceScatter(in.data(), out.data(), count, dt, dcclSum, comm, nullptr); break;
      case kBroadcast: rc = dcclBroadcast(in.data(), out.data(), count, dt, root, comm, nullptr); break;
      default: break;
    }
    if (rc != dcclSuccess) {
      failed_text = std::to_string(now_ms()) + " " + dcclGetLastError(nullptr);
      return false;
    }
    ++calls;
    long bad = 0;
    for (size_t j = 0; j < out_count; ++j) {
      // The reference, in float64 for float32 and in int64 for int32.
      double fr = 0;
      int64_t ir = 0;
      if (k == kAllReduceSum || k == kReduceScatter) {
        const size_t src = k == kReduceScatter ? static_cast<size_t>(rank) * count + j : j;
        for (int r = 0; r < n; ++r) {
          fr += val(r, src);
          if (!is_f) ir += ref_i(r, src);
        }
      } else if (k == kAllReduceMax) {
        fr = val(0, j);
        ir = ref_i(0, j);
        for (int r = 1; r < n; ++r) {
          fr = std::fmax(fr, val(r, j));
          if (!is_f && ref_i(r, j) > ir) ir = ref_i(r, j);
        }
      } else if (k == kAllGather) {
        fr = val(static_cast<int>(j / count), j % count);
        ir = ref_i(static_cast<int>(j / count), j % count);
      } else {
        fr = val(root, j);
        ir = ref_i(root, j);
      }
      const bool ok = is_f ? static_cast<double>(out[j]) == fr
                           : static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(ir))) ==
                                 static_cast<int32_t>(out[j]);
      if (!ok) {
        if (bad < 3)
          fprintf(stderr, "rank %d: WRONG %s %s count %zu iteration %ld: element %zu is %.17g, expected %.17g\n", rank,
                  kKindName[k], is_f ? "float32" : "int32", count, i, j, static_cast<double>(out[j]),
                  is_f ? fr : static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(ir))));
        ++bad;
      }
    }
    wrong += bad;
    return true;
  }

  void summary() const {
    const std::string s = "calls " + std::to_string(calls) + " wrong " + std::to_string(wrong) + "\n";
    put(dir + "/summary." + me, s);
    printf("rank %d: %s", rank, s.c_str());
    fflush(stdout);
  }

  int fail() {
    put(dir + "/result." + me, failed_text + "\n");
    summary();
    dcclCommAbort(comm);
    return 1;
  }
};
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: soak_rank DIR SECONDS\n");
    return 2;
  }
  Soak s;
  s.dir = argv[1];
  const long seconds = std::stol(argv[2]);
  for (int t = 0; t < 600 && !exists(s.dir + "/go"); ++t) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (dcclCommInitFromEnv(&s.comm) != dcclSuccess) {
    fprintf(stderr, "init: %s\n", dcclGetLastError(nullptr));
    return 1;
  }
  dcclCommUserRank(s.comm, &s.rank);
  dcclCommCount(s.comm, &s.n);
  s.me = std::to_string(s.rank);
  put(s.dir + "/pid." + s.me, std::to_string(getpid()) + "\n");
  static const size_t kBytes[] = {8, 64, 1024, 16384, 262144, 1 << 20, 4 << 20};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (long i = 0;; ++i) {
    if (i % 8 == 7) {  // the agreement to stop
      int32_t want = exists(s.dir + "/stop") || std::chrono::steady_clock::now() >= end, all = -1;
      if (dcclAllReduce(&want, &all, 1, dcclInt32, dcclMax, s.comm, nullptr) != dcclSuccess) {
        s.failed_text = std::to_string(now_ms()) + " " + dcclGetLastError(nullptr);
        return s.fail();
      }
      ++s.calls;
      if (all != 0 && all != 1) ++s.wrong;
      if (all != 0) break;
      continue;
    }
    const uint64_t h = mix(static_cast<uint64_t>(i) * 0x51ed27ull);
    const Kind k = static_cast<Kind>(h % kKinds);
    // Large sizes less often: 4 MiB calls take most of the time on a small machine.
    const size_t bytes = kBytes[(h >> 8) % 7 < 5 ? (h >> 16) % 5 : 5 + (h >> 24) % 2];
    size_t count = bytes / 4;
    if (k == kAllGather || k == kReduceScatter) count = std::max<size_t>(1, count / static_cast<size_t>(s.n));
    const bool ok = (h >> 32) & 1 ? s.one<float>(k, count, i) : s.one<int32_t>(k, count, i);
    if (!ok) return s.fail();
    if (i == 0) put(s.dir + "/ready." + s.me, "1\n");
  }
  s.summary();
  dcclCommDestroy(s.comm);
  return s.wrong == 0 ? 0 : 3;
}
