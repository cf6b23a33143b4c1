// Groups that span several streams or communicators (under dccl-run, except initall):
//   group_check streams    a ring's send on one stream and its receive on another, a
//                          rank's send to itself and its receive on two streams, a
//                          send on the NULL stream and its receive on a stream (4 KiB
//                          to 4 MiB: above the eager size the receive must be posted
//                          while the send waits); work queued on either stream before
//                          and after the group sees it in order
//   group_check comms      one group with an allreduce on the world and on a split
//                          copy of it, listed in another order on odd ranks: on the
//                          NULL stream, on one shared stream, on a stream per copy
//   group_check refused    a group whose second call every rank gets refused:
//                          dcclGroupEnd returns that error, the first call ran
//   group_check initall N  one process, dcclCommInitAll(N), one group with an
//                          allreduce on every communicator on the NULL stream
// Every value is checked against exact integer arithmetic.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dccl/dccl.h"

namespace {

int g_rank = 0, g_n = 1, g_wrong = 0, g_checks = 0;

void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_wrong;
    fprintf(stderr, "rank %d: WRONG: %s\n", g_rank, what.c_str());
  }
}

bool call(dcclResult_t rc, const char* what, dcclComm_t c = nullptr) {
  if (rc == dcclSuccess) return true;
  ++g_wrong;
  fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, what, dcclGetErrorString(rc), dcclGetLastError(c));
  return false;
}

int32_t value(int rank, size_t i) { return static_cast<int32_t>(rank * 1000003 + static_cast<int64_t>(i % 9973)); }

// Send and receive of one group on two streams (or the NULL stream and one).
void streams_case(dcclComm_t comm, size_t count, bool self, bool null_send) {
  dcclStream_t a = nullptr, b = nullptr;
  call(dcclStreamCreate(&a), "dcclStreamCreate");
  call(dcclStreamCreate(&b), "dcclStreamCreate");
  const int to = self ? g_rank : (g_rank + 1) % g_n, from = self ? g_rank : (g_rank + g_n - 1) % g_n;
  std::vector<int32_t> sb(count), rb(count, -1), before(count, 1), after(count, 0);
  for (size_t i = 0; i < count; ++i) sb[i] = value(g_rank, i);
  // Queued before the group on the receive's stream: it must finish first (the
  // group's receive overwrites nothing of it, but the ticket order must hold).
  call(dcclAllReduce(before.data(), before.data(), count, dcclInt32, dcclSum, comm, b), "allreduce before", comm);
  call(dcclGroupStart(), "dcclGroupStart");
  call(dcclSend(sb.data(), count, dcclInt32, to, comm, null_send ? nullptr : a), "dcclSend", comm);
  call(dcclRecv(rb.data(), count, dcclInt32, from, comm, b), "dcclRecv", comm);
  const std::string label = std::string(self ? "self" : "ring") + (null_send ? " null+stream " : " two streams ") +
                            std::to_string(count);
  if (!call(dcclGroupEnd(), ("dcclGroupEnd " + label).c_str(), comm)) return;
  // Queued after the group on the send's stream: it reads what the group received.
  call(dcclAllReduce(rb.data(), after.data(), count, dcclInt32, dcclSum, comm, a), "allreduce after", comm);
  call(dcclStreamSynchronize(a), "dcclStreamSynchronize", comm);
  call(dcclStreamSynchronize(b), "dcclStreamSynchronize", comm);
  size_t bad = 0, bad_after = 0, bad_before = 0;
  for (size_t i = 0; i < count; ++i) {
    bad += rb[i] != value(from, i);
    int64_t sum = 0;  // every rank's received block, summed: every rank's value (wrapping as int32)
    for (int r = 0; r < g_n; ++r) sum += value(self ? r : (r + g_n - 1) % g_n, i);
    bad_after += after[i] != static_cast<int32_t>(static_cast<uint32_t>(sum));
    bad_before += before[i] != g_n;
  }
  expect(bad == 0, label + ": " + std::to_string(bad) + " elements received wrong");
  expect(bad_after == 0, label + ": the allreduce after the group saw " + std::to_string(bad_after) + " wrong elements");
  expect(bad_before == 0, label + ": the allreduce before the group: " + std::to_string(bad_before) + " wrong");
  dcclStreamDestroy(a);
  dcclStreamDestroy(b);
}

// Allreduce on two communicators in one group, in another order on odd ranks.
void comms_case(dcclComm_t world, dcclComm_t copy, int streams) {
  dcclStream_t s[2] = {nullptr, nullptr};
  if (streams >= 1) call(dcclStreamCreate(&s[0]), "dcclStreamCreate");
  if (streams == 2) call(dcclStreamCreate(&s[1]), "dcclStreamCreate");
  if (streams == 1) s[1] = s[0];
  const size_t count = 100003;
  std::vector<int32_t> x(count), y(count);
  for (size_t i = 0; i < count; ++i) {
    x[i] = value(g_rank, i);
    y[i] = -value(g_rank, i + 7);
  }
  dcclComm_t comm[2] = {world, copy};
  int32_t* buf[2] = {x.data(), y.data()};
  call(dcclGroupStart(), "dcclGroupStart");
  for (int k = 0; k < 2; ++k) {
    const int j = g_rank % 2 ? 1 - k : k;
    call(dcclAllReduce(buf[j], buf[j], count, dcclInt32, dcclSum, comm[j], s[j]), "dcclAllReduce", comm[j]);
  }
  const std::string label = "two communicators, " + std::to_string(streams) + " stream(s)";
  if (!call(dcclGroupEnd(), ("dcclGroupEnd " + label).c_str(), world)) return;
  for (int k = 0; k < streams; ++k) call(dcclStreamSynchronize(s[k]), "dcclStreamSynchronize", world);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t sx = 0, sy = 0;
    for (int r = 0; r < g_n; ++r) {
      sx += value(r, i);
      sy -= value(r, i + 7);
    }
    bad += x[i] != static_cast<int32_t>(sx) || y[i] != static_cast<int32_t>(sy);
  }
  expect(bad == 0, label + ": " + std::to_string(bad) + " wrong elements");
  for (int k = 0; k < streams; ++k) dcclStreamDestroy(s[k]);
}

void refused_case(dcclComm_t comm) {
  std::vector<int32_t> v(1000, g_rank + 1);
  call(dcclGroupStart(), "dcclGroupStart");
  call(dcclAllReduce(v.data(), v.data(), v.size(), dcclInt32, dcclSum, comm, nullptr), "dcclAllReduce", comm);
  const dcclResult_t bad = dcclAllReduce(v.data(), v.data(), v.size(), static_cast<dcclDataType_t>(42), dcclSum, comm, nullptr);
  expect(bad == dcclInvalidArgument, "the bad call itself is refused");
  const dcclResult_t rc = dcclGroupEnd();
  const char* msg = dcclGetLastError(comm);
  expect(rc == dcclInvalidArgument && msg && strstr(msg, "refused") && strstr(msg, "datatype 42"),
         std::string("dcclGroupEnd returns the refused call's error: ") + dcclGetErrorString(rc) + ": " + (msg ? msg : ""));
  expect(v[999] == g_n * (g_n + 1) / 2, "the group's valid call ran: " + std::to_string(v[999]));
}

int initall_case(int n) {
  std::vector<dcclComm_t> comms(static_cast<size_t>(n));
  if (!call(dcclCommInitAll(comms.data(), n, nullptr), "dcclCommInitAll")) return 1;
  g_n = n;
  const size_t count = 4099;
  std::vector<std::vector<int32_t>> v(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    v[static_cast<size_t>(r)].resize(count);
    for (size_t i = 0; i < count; ++i) v[static_cast<size_t>(r)][i] = value(r, i);
  }
  call(dcclGroupStart(), "dcclGroupStart");
  for (int r = 0; r < n; ++r)
    call(dcclAllReduce(v[static_cast<size_t>(r)].data(), v[static_cast<size_t>(r)].data(), count, dcclInt32, dcclSum,
                       comms[static_cast<size_t>(r)], nullptr),
         "dcclAllReduce");
  call(dcclGroupEnd(), "dcclGroupEnd");
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += value(r, i);
    for (int r = 0; r < n; ++r) bad += v[static_cast<size_t>(r)][i] != static_cast<int32_t>(s);
  }
  expect(bad == 0, "initall group: " + std::to_string(bad) + " wrong elements");
  for (dcclComm_t c : comms) dcclCommDestroy(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "initall") {
    initall_case(argc > 2 ? atoi(argv[2]) : 3);
  } else if (mode == "streams" || mode == "comms" || mode == "refused") {
    dcclComm_t comm = nullptr;
    if (!call(dcclCommInitFromEnv(&comm), "dcclCommInitFromEnv")) return 1;
    dcclCommUserRank(comm, &g_rank);
    dcclCommCount(comm, &g_n);
    if (mode == "streams") {
      for (size_t count : {size_t{1024}, size_t{1} << 16, size_t{1} << 20})
        for (int k = 0; k < 3; ++k) streams_case(comm, count, k == 1, k == 2);
    } else if (mode == "comms") {
      dcclComm_t copy = nullptr;
      if (call(dcclCommSplit(comm, 0, g_rank, &copy, nullptr), "dcclCommSplit", comm)) {
        for (int streams = 0; streams <= 2; ++streams) comms_case(comm, copy, streams);
        dcclCommDestroy(copy);
      }
    } else {
      refused_case(comm);
    }
    dcclCommDestroy(comm);
  } else {
    fprintf(stderr, "usage: group_check streams | comms | refused | initall N\n");
    return 2;
  }
  printf("rank %d: %d checks, %d wrong\n", g_rank, g_checks, g_wrong);
  return g_wrong ? 1 : 0;
}
