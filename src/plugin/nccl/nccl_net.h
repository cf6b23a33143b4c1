// NCCL's network plugin interface, versions 7 to 11, declared from NCCL's published
// plugin headers (ext-net/example/nccl/net_v*.h). Only the layouts matter: NCCL
// reads the table `ncclNetPlugin_vN` this library exports and calls through it.
//
// What changed between the versions this library exports:
//   v7  (NCCL 2.14+): int sizes; getDeviceMr/irecvConsumed; device offload handles.
//   v8  (NCCL 2.19+): regMr takes size_t; properties gain regIsGlobal.
//   v9  (NCCL 2.22+): isend/irecv take size_t; properties gain forceFlush, virtual
//       devices and the largest transfer; makeVDevice.
//   v10 (NCCL 2.24+): init takes a profiler callback; connect a comm config;
//       isend/irecv a profiler handle per request.
//   v11 (NCCL 2.28+): init is per communicator (its id and config) and returns a
//       context that listen, connect, finalize and setNetAttr take; finalize ends
//       it; setNetAttr passes hints on the communicator's traffic; properties
//       gain the largest multi-request; connect no longer takes the config.
#pragma once
#include <cstddef>
#include <cstdint>

// ncclResult_t's values a plugin returns.
enum DcclNcclResult : int {
  kNcclSuccess = 0,
  kNcclUnhandledCudaError = 1,
  kNcclSystemError = 2,
  kNcclInternalError = 3,
  kNcclInvalidArgument = 4,
  kNcclInvalidUsage = 5,
  kNcclRemoteError = 6,
  kNcclInProgress = 7,
};
using NcclResult = int;  // an enum of int size in NCCL's ABI

// ncclDebugLogLevel and subsystem bits used here.
enum : int { kNcclLogNone = 0, kNcclLogVersion = 1, kNcclLogWarn = 2, kNcclLogInfo = 3, kNcclLogAbort = 4, kNcclLogTrace = 5 };
constexpr unsigned long kNcclLogInit = 1, kNcclLogNet = 16;
using NcclLogFn = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
using NcclProfilerFn = NcclResult (*)(void** event, int type, void* phandle, int64_t plugin_id, void* ext);

// Memory kinds (ptrSupport bits and regMr's type).
constexpr int kNcclPtrHost = 0x1, kNcclPtrCuda = 0x2, kNcclPtrDmaBuf = 0x4;
constexpr size_t kNcclHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
constexpr int kNcclMaxRequests = 32;      // NCCL_NET_MAX_REQUESTS: outstanding per comm

// Device offload handle (unused: this plugin is host-driven, NCCL_NET_DEVICE_HOST).
struct NcclNetDeviceHandle {
  int net_device_type;
  int net_device_version;
  void* handle;
  size_t size;
  int needs_proxy_progress;
};

struct NcclVDeviceProps {
  int ndevs;
  int devs[4];
};
struct NcclCommConfig {
  int traffic_class;
};

struct NcclPropsV7 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
};

struct NcclPropsV8 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
};

// v9 and v10 share this layout.
struct NcclPropsV9 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int net_device_type;
  int net_device_version;
  NcclVDeviceProps vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
};

// v11: v9's layout, then the largest number of requests in one multi-request.
struct NcclPropsV11 {
  NcclPropsV9 v9;
  int max_multi_request_size;
};
static_assert(offsetof(NcclPropsV11, max_multi_request_size) == sizeof(NcclPropsV9), "v11 extends v9's layout");

// v11's setNetAttr: hints on how the communicator will use its connections.
struct NcclNetCommAttr {
  int32_t max_concurrent_peers;
  int32_t min_concurrent_peers;
  int32_t max_flows_per_peer;
  int32_t min_flows_per_peer;
};
struct NcclNetAttr {
  NcclNetCommAttr send;
  NcclNetCommAttr recv;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

// The members every version shares, in their places.
#define DCCL_NCCL_NET_DMABUF                                                                                    \
  NcclResult (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mh); \
  NcclResult (*dereg_mr)(void* comm, void* mhandle);
#define DCCL_NCCL_NET_TAIL                                                                              \
  NcclResult (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request); \
  NcclResult (*test)(void* request, int* done, int* sizes);                                             \
  NcclResult (*close_send)(void* send_comm);                                                            \
  NcclResult (*close_recv)(void* recv_comm);                                                            \
  NcclResult (*close_listen)(void* listen_comm);                                                        \
  NcclResult (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);                          \
  NcclResult (*irecv_consumed)(void* recv_comm, int n, void* request);

// v7 and v8 differ only in the properties' layout and regMr's size type.
template <class Props, class RegSize>
struct NcclNetV7Layout {
  const char* name;
  NcclResult (*init)(NcclLogFn log);
  NcclResult (*devices)(int* ndev);
  NcclResult (*get_properties)(int dev, Props* props);
  NcclResult (*listen)(int dev, void* handle, void** listen_comm);
  NcclResult (*connect)(int dev, void* handle, void** send_comm, NcclNetDeviceHandle** dev_comm);
  NcclResult (*accept)(void* listen_comm, void** recv_comm, NcclNetDeviceHandle** dev_comm);
  NcclResult (*reg_mr)(void* comm, void* data, RegSize size, int type, void** mhandle);
  DCCL_NCCL_NET_DMABUF
  NcclResult (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle, void** request);
  NcclResult (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  DCCL_NCCL_NET_TAIL
};
using NcclNetV7 = NcclNetV7Layout<NcclPropsV7, int>;
using NcclNetV8 = NcclNetV7Layout<NcclPropsV8, size_t>;

struct NcclNetV9 {
  const char* name;
  NcclResult (*init)(NcclLogFn log);
  NcclResult (*devices)(int* ndev);
  NcclResult (*get_properties)(int dev, NcclPropsV9* props);
  NcclResult (*listen)(int dev, void* handle, void** listen_comm);
  NcclResult (*connect)(int dev, void* handle, void** send_comm, NcclNetDeviceHandle** dev_comm);
  NcclResult (*accept)(void* listen_comm, void** recv_comm, NcclNetDeviceHandle** dev_comm);
  NcclResult (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  DCCL_NCCL_NET_DMABUF
  NcclResult (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
  NcclResult (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  DCCL_NCCL_NET_TAIL
  NcclResult (*make_vdevice)(int* dev, NcclVDeviceProps* props);
};

// v10 and v11 share every member from accept to makeVDevice.
#define DCCL_NCCL_NET_V10_REST                                                                                      \
  NcclResult (*accept)(void* listen_comm, void** recv_comm, NcclNetDeviceHandle** dev_comm);                        \
  NcclResult (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);                              \
  DCCL_NCCL_NET_DMABUF                                                                                              \
  NcclResult (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** req); \
  NcclResult (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,               \
                      void** phandles, void** request);                                                             \
  DCCL_NCCL_NET_TAIL                                                                                                \
  NcclResult (*make_vdevice)(int* dev, NcclVDeviceProps* props);

struct NcclNetV10 {
  const char* name;
  NcclResult (*init)(NcclLogFn log, NcclProfilerFn profiler);
  NcclResult (*devices)(int* ndev);
  NcclResult (*get_properties)(int dev, NcclPropsV9* props);
  NcclResult (*listen)(int dev, void* handle, void** listen_comm);
  NcclResult (*connect)(int dev, NcclCommConfig* config, void* handle, void** send_comm, NcclNetDeviceHandle** dev_comm);
  DCCL_NCCL_NET_V10_REST
};

struct NcclNetV11 {
  const char* name;
  NcclResult (*init)(void** ctx, uint64_t comm_id, NcclCommConfig* config, NcclLogFn log, NcclProfilerFn profiler);
  NcclResult (*devices)(int* ndev);
  NcclResult (*get_properties)(int dev, NcclPropsV11* props);
  NcclResult (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  NcclResult (*connect)(void* ctx, int dev, void* handle, void** send_comm, NcclNetDeviceHandle** dev_comm);
  DCCL_NCCL_NET_V10_REST
  NcclResult (*finalize)(void* ctx);
  NcclResult (*set_net_attr)(void* ctx, NcclNetAttr* attr);
};
