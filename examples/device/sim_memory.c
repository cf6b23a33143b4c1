/* Device memory: an allreduce on buffers of the sim backend, DirectCCL's
 * emulated accelerator (its memory cannot be dereferenced by the host; copies go
 * through dcclMemcpy, as with a GPU). DCCL_PEER_DIRECT chooses the data path:
 *   dccl-run -n 2 --env DCCL_PEER_DIRECT=1 ./sim_memory   the transport reads and
 *       writes the device buffers directly (peer-direct, dma-buf registration)
 *   dccl-run -n 2 --env DCCL_PEER_DIRECT=0 ./sim_memory   every byte is staged
 *       through host staging buffers
 * Each rank prints what its dcclCommGetStats counters saw during the allreduce
 * and checks them against the path (with 2 or more ranks: direct bytes and no
 * staging with 1, staged bytes and no direct ones with 0), and the result.
 * Exits 1 when a call fails, the result is wrong or the counters disagree. */
#include <dccl/dccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1;

static void check(dcclResult_t r, const char* call) {
  if (r != dcclSuccess) {
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, call, dcclGetErrorString(r), dcclGetLastError(NULL));
    exit(1);
  }
}
#define CHECK(call) check((call), #call)

static unsigned long long delta(uint64_t after, uint64_t before) { return (unsigned long long)(after - before); }

int main(void) {
  const size_t count = (size_t)3 << 20; /* 12 MiB of float: several staging slots per peer */
  const char* mode = getenv("DCCL_PEER_DIRECT");
  dcclComm_t comm;
  dcclStats_t before, after;
  void* dev = NULL;
  float* host = malloc(count * sizeof(float));
  int nranks, bad = 0;
  size_t i, wrong = 0;
  unsigned long long direct, staged;
  if (!host) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  if (!mode) mode = "auto";

  CHECK(dcclCommInitFromEnv(&comm));
  CHECK(dcclCommUserRank(comm, &rank));
  CHECK(dcclCommCount(comm, &nranks));

  CHECK(dcclMemAlloc(&dev, count * sizeof(float), dcclMemSim));
  for (i = 0; i < count; ++i) host[i] = (float)(rank + 1);
  CHECK(dcclMemcpy(dev, host, count * sizeof(float))); /* host -> device */

  CHECK(dcclCommGetStats(comm, &before));
  CHECK(dcclAllReduce(dev, dev, count, dcclFloat32, dcclSum, comm, NULL)); /* in place, on the device */
  CHECK(dcclCommGetStats(comm, &after));

  CHECK(dcclMemcpy(host, dev, count * sizeof(float))); /* device -> host */
  for (i = 0; i < count; ++i) wrong += host[i] != (float)(nranks * (nranks + 1) / 2);

  direct = delta(after.bytesSentDirect, before.bytesSentDirect) + delta(after.bytesRecvDirect, before.bytesRecvDirect);
  staged = delta(after.bytesRelayedHost, before.bytesRelayedHost);
  printf("rank %d of %d, DCCL_PEER_DIRECT=%s: ops %llu, sent direct %llu B, received direct %llu B, "
         "staged through host %llu B, host copies %llu, registrations %llu (cache hits %llu, misses %llu): %s\n",
         rank, nranks, mode, delta(after.ops, before.ops), delta(after.bytesSentDirect, before.bytesSentDirect),
         delta(after.bytesRecvDirect, before.bytesRecvDirect), staged, delta(after.hostCopies, before.hostCopies),
         delta(after.registrations, before.registrations), delta(after.regCacheHits, before.regCacheHits),
         delta(after.regCacheMisses, before.regCacheMisses), wrong ? "WRONG" : "ok");
  if (wrong) {
    fprintf(stderr, "rank %d: %zu of %zu elements wrong\n", rank, wrong, count);
    bad = 1;
  }
  if (nranks > 1 && strcmp(mode, "1") == 0 && (direct == 0 || staged != 0)) {
    fprintf(stderr, "rank %d: peer-direct, yet %llu bytes direct and %llu staged\n", rank, direct, staged);
    bad = 1;
  }
  if (nranks > 1 && strcmp(mode, "0") == 0 && (direct != 0 || staged == 0)) {
    fprintf(stderr, "rank %d: staged, yet %llu bytes direct and %llu staged\n", rank, direct, staged);
    bad = 1;
  }

  CHECK(dcclMemFree(dev));
  CHECK(dcclCommDestroy(comm));
  free(host);
  return bad;
}
