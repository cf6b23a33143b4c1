/* DirectCCL public C API (C99). NCCL-shaped: names, argument order and
 * semantics follow NCCL with the `dccl` prefix.
 *
 * Rules every call follows:
 * - Errors: every call returns a dcclResult_t; dcclGetLastError() gives the
 *   text of this thread's last error, naming the rank, the call and the cause.
 *   Bad arguments are refused before anything is communicated; the ranks whose
 *   call was not refused wait for the refused rank until their timeout (their
 *   error then names it), as for any rank that never calls. No call waits longer than
 *   DCCL_TIMEOUT_S: all waits of a call (init's phases included) share one
 *   deadline, and telling the other ranks of a failure does not add to it.
 * - In place: a collective is in place when sendbuff == recvbuff (allreduce,
 *   broadcast, reduce) or when sendbuff is this rank's block of recvbuff
 *   (allgather: recvbuff + rank*sendcount; reduce-scatter: recvbuff ==
 *   sendbuff + rank*recvcount). Other overlaps of the two are refused
 *   (dcclInvalidArgument), as far as the call's own buffers go.
 * - Threads: calls on different communicators may run concurrently. Calls on
 *   one communicator must come in the same order on every rank; from several
 *   threads the application orders them itself. A stream runs its calls in
 *   order on a thread of its own.
 * - Groups: between dcclGroupStart and dcclGroupEnd calls are queued, not run;
 *   dcclGroupEnd submits them together (send/recv pairs in a group run
 *   concurrently, so a rank may send to and receive from itself only there).
 *   A group may name several streams and communicators: it then runs as one
 *   piece of work, every communicator's calls at once (so ranks may list them
 *   in different orders, e.g. one group over every dcclCommInitAll
 *   communicator), after the work queued before it on each of its streams and
 *   before the work queued after it; on the caller's thread when the NULL
 *   stream is among them, else on its first stream. A call of the group that is
 *   refused returns its error, and dcclGroupEnd still submits the others, then
 *   returns that error too. Groups nest; the outermost end submits.
 * - Ending: dcclCommDestroy cancels the communicator's queued work (those calls
 *   end with an error), lets the running call finish (aborting it after
 *   DCCL_TIMEOUT_S), meets the other ranks when they are there, and frees the
 *   communicator. dcclCommAbort does the same without waiting: the running call
 *   ends at once with an error here, and the peers learn of it and fail theirs.
 *   dcclCommFinalize first completes queued work instead of cancelling it and
 *   meets the other ranks, so that the destroy after it is local. Do not start
 *   calls on a communicator while another thread destroys or aborts it.
 * - Environment: init sets FI_OFI_RXM_EAGER_LIMIT (DCCL_RXM_EAGER_BYTES) in the
 *   process's environment when it is unset, since libfabric reads provider
 *   parameters only from there; a value the application set first is kept. */
#ifndef DCCL_DCCL_H_
#define DCCL_DCCL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* libdccl.so builds with hidden visibility and exports what is declared here. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define DCCL_MAJOR 0
#define DCCL_MINOR 1
#define DCCL_PATCH 0
/* The one home of the version: the build and dcclGetVersion derive from it.
 * Compare with DCCL_VERSION(X,Y,Z), e.g. #if DCCL_VERSION_CODE >= DCCL_VERSION(0,2,0). */
#define DCCL_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define DCCL_VERSION_CODE DCCL_VERSION(DCCL_MAJOR, DCCL_MINOR, DCCL_PATCH)

typedef enum {
  dcclSuccess = 0,
  dcclUnhandledDeviceError = 1,
  dcclSystemError = 2,
  dcclInternalError = 3,
  dcclInvalidArgument = 4,
  dcclInvalidUsage = 5,
  dcclRemoteError = 6,
  dcclInProgress = 7,
  dcclTimeout = 8,
  dcclUnavailable = 9,
  dcclNumResults = 10
} dcclResult_t;

#define DCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[DCCL_UNIQUE_ID_BYTES];
} dcclUniqueId;

typedef struct dcclComm* dcclComm_t;
typedef struct dcclStream* dcclStream_t;

typedef enum {
  dcclInt8 = 0, dcclChar = 0,
  dcclUint8 = 1,
  dcclInt32 = 2, dcclInt = 2,
  dcclUint32 = 3,
  dcclInt64 = 4,
  dcclUint64 = 5,
  dcclFloat16 = 6, dcclHalf = 6,
  dcclFloat32 = 7, dcclFloat = 7,
  dcclFloat64 = 8, dcclDouble = 8,
  dcclBfloat16 = 9,
  dcclNumTypes = 10
} dcclDataType_t;

typedef enum {
  dcclSum = 0,
  dcclProd = 1,
  dcclMax = 2,
  dcclMin = 3,
  dcclAvg = 4,
  dcclNumOps = 5
} dcclRedOp_t;

/* Where dcclRedOpCreatePreMulSum's scalar lives: read from device (or host)
 * memory when each call runs, or copied from host memory at creation. */
typedef enum { dcclScalarDevice = 0, dcclScalarHostImmediate = 1 } dcclScalarResidence_t;

/* ---- version, ids, errors ---- */
dcclResult_t dcclGetVersion(int* version);
/* Starts the rendezvous store in this process (to be used by rank 0) and
 * returns an id carrying its address, port and a random 128-bit job secret. */
dcclResult_t dcclGetUniqueId(dcclUniqueId* uniqueId);
const char* dcclGetErrorString(dcclResult_t result);
/* Text of the last error raised on this thread (comm may be NULL). */
const char* dcclGetLastError(dcclComm_t comm);

/* ---- communicators ---- */
dcclResult_t dcclCommInitRank(dcclComm_t* comm, int nranks, dcclUniqueId commId, int rank);
/* ndev ranks in this process, one communicator each (comms[r] is rank r), made
 * by one thread per rank: for single-process jobs and tests. Use each from a
 * thread of its own; dcclCommDestroy may take them in turn from one thread (each
 * destroy finishes its rank's work; the last one frees them all). devlist (may be
 * NULL) is accepted for NCCL compatibility; choosing a device for each rank's
 * buffers is the caller's. On failure no communicator is left (all NULL). */
dcclResult_t dcclCommInitAll(dcclComm_t* comms, int ndev, const int* devlist);
/* Rank, size and rendezvous from the environment: DCCL_*, torchrun, Open MPI,
 * MPICH/PMI or Slurm variables (see docs/env.md). */
dcclResult_t dcclCommInitFromEnv(dcclComm_t* comm);
dcclResult_t dcclCommDestroy(dcclComm_t comm);
dcclResult_t dcclCommAbort(dcclComm_t comm);
dcclResult_t dcclCommCount(const dcclComm_t comm, int* count);
dcclResult_t dcclCommUserRank(const dcclComm_t comm, int* rank);
dcclResult_t dcclCommGetAsyncError(dcclComm_t comm, dcclResult_t* asyncError);

/* Per-communicator configuration. Initialise with DCCL_CONFIG_INITIALIZER, then
 * set what differs; a field left at DCCL_CONFIG_UNDEF_INT / NULL takes the
 * environment's setting (for dcclCommSplit: the parent's). NULL config: all
 * defaults. Settings that shape the wire (algo) must agree on every rank. */
#define DCCL_CONFIG_UNDEF_INT (-2147483647 - 1) /* INT_MIN */
typedef struct {
  size_t size;         /* sizeof(dcclConfig_t), set by the initializer */
  unsigned int magic;  /* DCCL_CONFIG_MAGIC */
  unsigned int version;
  /* 1 (default): init returns when the communicator is ready. 0: init returns
   * dcclInProgress at once and finishes in the background; poll
   * dcclCommGetAsyncError until it gives dcclSuccess (ready) or an error (init
   * failed: destroy the handle). Other calls on the handle meanwhile return
   * dcclInProgress; dcclCommDestroy/Abort wait for the init to end first.
   * dcclCommInitRankConfig only: dcclCommSplit refuses 0. */
  int blocking;
  /* Bound in milliseconds on every call of this communicator, its init
   * included: all waits of a call share one deadline (DCCL_TIMEOUT_S
   * otherwise), 1 .. INT_MAX. */
  int timeoutMs;
  /* 1: require peer-direct for device memory, 0: stage through host memory,
   * -1: direct where viable (DCCL_PEER_DIRECT otherwise). */
  int peerDirect;
  /* Force algorithms, as DCCL_ALGO (NULL: DCCL_ALGO); copied at init. */
  const char* algo;
} dcclConfig_t;
#define DCCL_CONFIG_MAGIC 0xdcc1c0f1u
#define DCCL_CONFIG_INITIALIZER                                                              \
  {sizeof(dcclConfig_t), DCCL_CONFIG_MAGIC, DCCL_VERSION_CODE, DCCL_CONFIG_UNDEF_INT,        \
   DCCL_CONFIG_UNDEF_INT, DCCL_CONFIG_UNDEF_INT, NULL}

/* dcclCommInitRank with a configuration (NULL: as dcclCommInitRank). Returns
 * dcclInProgress for a non-blocking init that has started. */
dcclResult_t dcclCommInitRankConfig(dcclComm_t* comm, int nranks, dcclUniqueId commId, int rank,
                                    dcclConfig_t* config);
/* Collective: completes every call queued on comm (on streams too, within its
 * timeout), then meets the other ranks. Afterwards comm accepts only
 * dcclCommDestroy (now local and immediate), dcclCommGetAsyncError,
 * dcclCommCount, dcclCommUserRank and dcclCommGetStats; other calls return
 * dcclInvalidUsage. Optional: dcclCommDestroy alone also ends the communicator. */
dcclResult_t dcclCommFinalize(dcclComm_t comm);

/* Registers [buff, buff+size) with comm's data path once, up front: calls on
 * buffers inside it then do no registration work (dcclStats_t.registrations
 * and regCacheMisses do not move), and the registration is never evicted until
 * dcclCommDeregister. Host memory and the staged path need no registration: the
 * handle is still valid. The memory must stay allocated until deregistered. */
dcclResult_t dcclCommRegister(const dcclComm_t comm, void* buff, size_t size, void** handle);
dcclResult_t dcclCommDeregister(const dcclComm_t comm, void* handle);

/* Color for dcclCommSplit's ranks that join no new communicator. */
#define DCCL_SPLIT_NOCOLOR (-1)
/* Collective over comm (every rank calls it, in the same order as comm's other
 * calls): ranks passing the same color >= 0 form a new communicator, ranked by
 * key, ties by their rank in comm. Ranks passing DCCL_SPLIT_NOCOLOR get
 * *newcomm = NULL. The new communicator is independent of comm: either may be
 * destroyed first. */
dcclResult_t dcclCommSplit(dcclComm_t comm, int color, int key, dcclComm_t* newcomm, dcclConfig_t* config);

/* ---- streams: ordered execution queues; NULL = the call completes before it returns ---- */
dcclResult_t dcclStreamCreate(dcclStream_t* stream);
/* Waits until the stream's queue ran, returning its first error; dcclTimeout only
 * when no queued call finished for DCCL_TIMEOUT_S (a long queue that progresses
 * is waited for: each call is bounded by its own deadline). */
dcclResult_t dcclStreamSynchronize(dcclStream_t stream);
/* dcclSuccess when all work is done, dcclInProgress while some is pending. */
dcclResult_t dcclStreamQuery(dcclStream_t stream);
dcclResult_t dcclStreamDestroy(dcclStream_t stream);

/* ---- groups ---- */
dcclResult_t dcclGroupStart(void);
dcclResult_t dcclGroupEnd(void);

/* ---- collectives ---- */
dcclResult_t dcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           dcclDataType_t datatype, dcclRedOp_t op, dcclComm_t comm,
                           dcclStream_t stream);
dcclResult_t dcclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        dcclDataType_t datatype, dcclRedOp_t op, int root, dcclComm_t comm,
                        dcclStream_t stream);
dcclResult_t dcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           dcclDataType_t datatype, int root, dcclComm_t comm,
                           dcclStream_t stream);
/* In place (NCCL's legacy form): the root's buff is sent, every rank's buff receives. */
dcclResult_t dcclBcast(void* buff, size_t count, dcclDataType_t datatype, int root,
                       dcclComm_t comm, dcclStream_t stream);
/* sendcount elements from each rank; recvbuff holds nranks*sendcount. */
dcclResult_t dcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           dcclDataType_t datatype, dcclComm_t comm, dcclStream_t stream);
/* sendbuff holds nranks*recvcount; rank r receives block r reduced. */
dcclResult_t dcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               dcclDataType_t datatype, dcclRedOp_t op, dcclComm_t comm,
                               dcclStream_t stream);
/* count elements to each peer: sendbuff and recvbuff hold nranks*count. */
dcclResult_t dcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          dcclDataType_t datatype, dcclComm_t comm, dcclStream_t stream);
dcclResult_t dcclSend(const void* sendbuff, size_t count, dcclDataType_t datatype, int peer,
                      dcclComm_t comm, dcclStream_t stream);
dcclResult_t dcclRecv(void* recvbuff, size_t count, dcclDataType_t datatype, int peer,
                      dcclComm_t comm, dcclStream_t stream);
dcclResult_t dcclBarrier(dcclComm_t comm, dcclStream_t stream);

/* A sum in which every rank's input is first multiplied by its scalar (of
 * `datatype`; ranks may pass different scalars): usable as `op` of allreduce,
 * reduce and reduce-scatter on comm, with that datatype, until destroyed. Its
 * value is the same on every rank that creates ops in the same order. */
dcclResult_t dcclRedOpCreatePreMulSum(dcclRedOp_t* op, void* scalar, dcclDataType_t datatype,
                                      dcclScalarResidence_t residence, dcclComm_t comm);
dcclResult_t dcclRedOpDestroy(dcclRedOp_t op, dcclComm_t comm);

/* ---- statistics: what crossed host memory ----
 * Counters of this rank since init, the same for every kind of memory. Each
 * byte is counted on the rank that moves it: a message of N bytes from rank A to
 * rank B adds N to A's bytesSent* and N to B's bytesRecv* (direct), or N to
 * both ranks' bytesRelayedHost (staged). Copies within one host through the
 * shared-memory segment (the segment algorithms, host memory only) are in none of
 * the byte counters. Staged bytes per payload byte = bytesRelayedHost /
 * (bytesSentDirect + bytesRecvDirect + bytesRelayedHost). */
typedef struct {
  uint64_t ops;                 /* operations completed */
  uint64_t bytesSentDirect;     /* bytes the transport sent straight from the user's buffer: host memory,
                                   or device memory over peer-direct */
  uint64_t bytesRecvDirect;     /* bytes the transport received straight into the user's buffer */
  uint64_t bytesRelayedHost;    /* the staged-bytes count: bytes of device memory that crossed this rank's
                                   host staging slots (staged path), sent or received; the field keeps
                                   its first name so that applications built against it still build */
  uint64_t hostCopies;          /* device<->host copies the library made */
  uint64_t registrations;       /* memory registrations made */
  uint64_t regCacheHits;
  uint64_t regCacheMisses;
  uint64_t allocations;         /* library allocations after init */
} dcclStats_t;
dcclResult_t dcclCommGetStats(dcclComm_t comm, dcclStats_t* stats);

/* ---- flight recorder (docs/observability.md) ----
 * Every communicator keeps its last DCCL_RECORDER calls. dcclCommDumpRecorder
 * writes this rank's as JSON lines to dir (NULL or "": DCCL_RECORDER_DIR) and,
 * when allRanks is nonzero, asks every other rank through the store to write
 * its own to its DCCL_RECORDER_DIR within DCCL_STATUS_MS. dccl-trace reads them.
 * Local (not collective); may be called from any thread. */
dcclResult_t dcclCommDumpRecorder(dcclComm_t comm, const char* dir, int allRanks);
/* The caller's name and number for its next call on comm (a framework's process
 * group name and its own sequence number), kept in that call's record. group: at
 * most 31 bytes are kept; NULL clears it. */
dcclResult_t dcclCommSetCallTag(dcclComm_t comm, const char* group, uint64_t seq);

/* ---- memory: host, emulated accelerator (sim) and CUDA ---- */
typedef enum { dcclMemHost = 0, dcclMemSim = 1, dcclMemCuda = 2 } dcclMemType_t;
dcclResult_t dcclMemAlloc(void** ptr, size_t bytes, dcclMemType_t type);
dcclResult_t dcclMemFree(void* ptr);
/* Copies between any two DirectCCL or host pointers; completes before returning. */
dcclResult_t dcclMemcpy(void* dst, const void* src, size_t bytes);
dcclResult_t dcclMemset(void* dst, int value, size_t bytes);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif /* DCCL_DCCL_H_ */
