// The plugin's operations, once for every interface version (sizes as size_t):
// exports.cc fills NCCL's tables from these. Every function returns an NCCL
// result code and, on failure, says why through NCCL's log callback.
#pragma once
#include <cstddef>
#include <cstdint>

#include "plugin/nccl/nccl_net.h"

namespace dccl::plugin {

// Largest number of receives in one grouped irecv (the properties' maxRecvs).
constexpr int kMaxRecvs = 8;

struct DevProps {
  const char* name;
  int ptr_support;
  int speed_mbps;
  float latency_us;
  size_t max_bytes;
};

NcclResult init(NcclLogFn log);
NcclResult device_count(int* ndev);
NcclResult properties(int dev, DevProps* out);
NcclResult listen(int dev, void* handle, void** listen_comm);
NcclResult connect(int dev, void* handle, void** send_comm, NcclNetDeviceHandle** dev_comm);
NcclResult accept(void* listen_comm, void** recv_comm, NcclNetDeviceHandle** dev_comm);
NcclResult reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
NcclResult reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
NcclResult dereg_mr(void* comm, void* mhandle);
NcclResult isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request);
NcclResult irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                 void** request);
NcclResult iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request);
NcclResult test(void* request, int* done, int* sizes);
NcclResult close_send(void* send_comm);
NcclResult close_recv(void* recv_comm);
NcclResult close_listen(void* listen_comm);
NcclResult get_device_mr(void* comm, void* mhandle, void** dptr_mhandle);
NcclResult irecv_consumed(void* recv_comm, int n, void* request);
NcclResult make_vdevice(int* dev, NcclVDeviceProps* props);
// v11's per-communicator contexts: init opens one (after init(log)), listen and
// connect check theirs, finalize ends it. A context names the communicator (its
// id, for the log); it holds no resources: comms outlive nothing through it.
// Its config's traffic class is not applied (no device here has classes).
NcclResult open_context(uint64_t comm_id, const NcclCommConfig* config, void** ctx);
NcclResult check_context(void* ctx, const char* op);
NcclResult close_context(void* ctx);
// setNetAttr: hints on the communicator's traffic, checked and taken as they come
// (each connection is one stream; there are no flows to size).
NcclResult set_net_attr(void* ctx, const NcclNetAttr* attr);
// For the v7/v8 tables' int sizes: a size NCCL passed as int, checked.
NcclResult int_size(int size, const char* op, size_t* out);

}  // namespace dccl::plugin
