/* C99 allreduce: every rank contributes (rank + 1) * (i % 7) at element i, so
 * element i of the sum is (i % 7) * n(n+1)/2 on every rank (exact in float).
 * A second, in-place allreduce takes the maximum of the ranks' int32 values.
 * Launch with dccl-run (or torchrun, mpirun, srun):
 *   dccl-run -n 2 ./allreduce
 * Exits 1 when a call fails or a result is wrong. */
#include <dccl/dccl.h>
#include <stdio.h>
#include <stdlib.h>

static int rank = -1;

static void check(dcclResult_t r, const char* call) {
  if (r != dcclSuccess) {
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, call, dcclGetErrorString(r), dcclGetLastError(NULL));
    exit(1);
  }
}
#define CHECK(call) check((call), #call)

int main(void) {
  const size_t count = (size_t)1 << 20;
  dcclComm_t comm;
  dcclStream_t stream;
  int nranks, version;
  size_t i, wrong = 0;
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  int32_t peak[4];
  if (!send || !recv) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }

  CHECK(dcclCommInitFromEnv(&comm)); /* rank, size and rendezvous from the launcher */
  CHECK(dcclCommUserRank(comm, &rank));
  CHECK(dcclCommCount(comm, &nranks));
  CHECK(dcclGetVersion(&version));

  for (i = 0; i < count; ++i) send[i] = (float)(rank + 1) * (float)(i % 7);
  CHECK(dcclStreamCreate(&stream)); /* the call runs on the stream's thread */
  CHECK(dcclAllReduce(send, recv, count, dcclFloat32, dcclSum, comm, stream));
  CHECK(dcclStreamSynchronize(stream));
  for (i = 0; i < count; ++i) {
    const float want = (float)(i % 7) * (float)(nranks * (nranks + 1) / 2);
    if (recv[i] != want) {
      if (wrong == 0) fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, recv[i], want);
      ++wrong;
    }
  }

  /* In place (send == recv), no stream: the call completes before it returns. */
  for (i = 0; i < 4; ++i) peak[i] = (int32_t)(rank * 10 + (int)i);
  CHECK(dcclAllReduce(peak, peak, 4, dcclInt32, dcclMax, comm, NULL));
  for (i = 0; i < 4; ++i) {
    if (peak[i] != (int32_t)((nranks - 1) * 10 + (int)i)) {
      fprintf(stderr, "rank %d: max[%zu] is %d, expected %d\n", rank, i, (int)peak[i], (nranks - 1) * 10 + (int)i);
      ++wrong;
    }
  }

  printf("rank %d of %d (DirectCCL %d.%d.%d): allreduce sum of %zu floats and max of 4 ints: %s\n", rank, nranks,
         version / 10000, version / 100 % 100, version % 100, count, wrong ? "WRONG" : "ok");
  CHECK(dcclStreamDestroy(stream));
  CHECK(dcclCommDestroy(comm));
  free(send);
  free(recv);
  return wrong ? 1 : 0;
}
