// The tables NCCL looks up by name when NCCL_NET_PLUGIN=dccl loads this library:
// one per interface version, newest first in NCCL's search. Each entry converts
// its version's arguments to plugin.hpp's and calls it.
#include <cstring>
#include <vector>

#include "plugin/nccl/nccl_net.h"
#include "plugin/nccl/plugin.hpp"

namespace p = dccl::plugin;

namespace {

constexpr const char* kName = "DirectCCL";

template <class Props>
void fill_common(const p::DevProps& d, int dev, Props* out) {
  memset(out, 0, sizeof(*out));
  out->name = const_cast<char*>(d.name);
  out->pci_path = nullptr;  // a virtual NIC as far as NCCL's topology goes
  out->guid = static_cast<uint64_t>(dev) + 1;
  out->ptr_support = d.ptr_support;
  out->speed = d.speed_mbps;
  out->port = 1;
  out->latency = d.latency_us;
  out->max_comms = 65536;
  out->max_recvs = p::kMaxRecvs;
  out->net_device_type = 0;  // NCCL_NET_DEVICE_HOST
  out->net_device_version = 0;
}

NcclResult props_v7(int dev, NcclPropsV7* out) {
  if (!out) return p::properties(dev, nullptr);  // reports it
  p::DevProps d{};
  const NcclResult rc = p::properties(dev, &d);
  if (rc == kNcclSuccess) fill_common(d, dev, out);
  return rc;
}

NcclResult props_v8(int dev, NcclPropsV8* out) {
  if (!out) return p::properties(dev, nullptr);  // reports it
  p::DevProps d{};
  const NcclResult rc = p::properties(dev, &d);
  if (rc != kNcclSuccess) return rc;
  fill_common(d, dev, out);
  out->reg_is_global = 0;  // a registration belongs to the comm it was made on
  return rc;
}

NcclResult props_v9(int dev, NcclPropsV9* out) {
  if (!out) return p::properties(dev, nullptr);  // reports it
  p::DevProps d{};
  const NcclResult rc = p::properties(dev, &d);
  if (rc != kNcclSuccess) return rc;
  fill_common(d, dev, out);
  out->reg_is_global = 0;
  out->force_flush = 0;  // receives into device memory flush before they complete
  out->vprops.ndevs = 1;
  out->vprops.devs[0] = dev;
  out->max_p2p_bytes = d.max_bytes;
  out->max_coll_bytes = d.max_bytes;
  return rc;
}

NcclResult props_v11(int dev, NcclPropsV11* out) {
  if (!out) return p::properties(dev, nullptr);  // reports it
  memset(out, 0, sizeof(*out));
  const NcclResult rc = props_v9(dev, &out->v9);
  out->max_multi_request_size = 1;  // one request per isend/irecv call (grouped receives aside)
  return rc;
}

NcclResult init_v10(NcclLogFn log, NcclProfilerFn) { return p::init(log); }

// v11: NCCL calls init once per communicator.
NcclResult init_v11(void** ctx, uint64_t comm_id, NcclCommConfig* config, NcclLogFn log, NcclProfilerFn) {
  const NcclResult rc = p::init(log);
  return rc != kNcclSuccess ? rc : p::open_context(comm_id, config, ctx);
}

NcclResult listen_v11(void* ctx, int dev, void* handle, void** listen_comm) {
  const NcclResult rc = p::check_context(ctx, "listen");
  return rc != kNcclSuccess ? rc : p::listen(dev, handle, listen_comm);
}

NcclResult connect_v11(void* ctx, int dev, void* handle, void** send_comm, NcclNetDeviceHandle** dc) {
  const NcclResult rc = p::check_context(ctx, "connect");
  return rc != kNcclSuccess ? rc : p::connect(dev, handle, send_comm, dc);
}

NcclResult set_net_attr_v11(void* ctx, NcclNetAttr* attr) { return p::set_net_attr(ctx, attr); }

NcclResult connect_v10(int dev, NcclCommConfig*, void* handle, void** send_comm, NcclNetDeviceHandle** dc) {
  return p::connect(dev, handle, send_comm, dc);
}

NcclResult reg_mr_int(void* comm, void* data, int size, int type, void** mh) {
  size_t n = 0;
  const NcclResult rc = p::int_size(size, "regMr", &n);
  return rc != kNcclSuccess ? rc : p::reg_mr(comm, data, n, type, mh);
}

NcclResult isend_int(void* comm, void* data, int size, int tag, void* mh, void** req) {
  size_t n = 0;
  const NcclResult rc = p::int_size(size, "isend", &n);
  return rc != kNcclSuccess ? rc : p::isend(comm, data, n, tag, mh, req);
}

NcclResult isend_v10(void* comm, void* data, size_t size, int tag, void* mh, void*, void** req) {
  return p::isend(comm, data, size, tag, mh, req);
}

NcclResult irecv_int(void* comm, int n, void** data, int* sizes, int* tags, void** mh, void** req) {
  if (n < 1 || n > p::kMaxRecvs || !sizes) return p::irecv(comm, n, data, nullptr, tags, mh, req);  // reports it
  size_t s[p::kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    const NcclResult rc = p::int_size(sizes[i], "irecv", &s[i]);
    if (rc != kNcclSuccess) return rc;
  }
  return p::irecv(comm, n, data, s, tags, mh, req);
}

NcclResult irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mh, void** req) {
  return p::irecv(comm, n, data, sizes, tags, mh, req);
}

NcclResult irecv_v10(void* comm, int n, void** data, size_t* sizes, int* tags, void** mh, void**, void** req) {
  return p::irecv(comm, n, data, sizes, tags, mh, req);
}

NcclResult iflush_any(void* comm, int n, void** data, int* sizes, void** mh, void** req) {
  return p::iflush(comm, n, data, sizes, mh, req);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) NcclNetV11 ncclNetPlugin_v11 = {
    kName, init_v11, p::device_count, props_v11, listen_v11, connect_v11, p::accept, p::reg_mr, p::reg_mr_dmabuf,
    p::dereg_mr, isend_v10, irecv_v10, iflush_any, p::test, p::close_send, p::close_recv, p::close_listen,
    p::get_device_mr, p::irecv_consumed, p::make_vdevice, p::close_context, set_net_attr_v11};

__attribute__((visibility("default"))) NcclNetV10 ncclNetPlugin_v10 = {
    kName, init_v10, p::device_count, props_v9, p::listen, connect_v10, p::accept, p::reg_mr, p::reg_mr_dmabuf,
    p::dereg_mr, isend_v10, irecv_v10, iflush_any, p::test, p::close_send, p::close_recv, p::close_listen,
    p::get_device_mr, p::irecv_consumed, p::make_vdevice};

__attribute__((visibility("default"))) NcclNetV9 ncclNetPlugin_v9 = {
    kName, p::init, p::device_count, props_v9, p::listen, p::connect, p::accept, p::reg_mr, p::reg_mr_dmabuf,
    p::dereg_mr, p::isend, irecv_v9, iflush_any, p::test, p::close_send, p::close_recv, p::close_listen,
    p::get_device_mr, p::irecv_consumed, p::make_vdevice};

__attribute__((visibility("default"))) NcclNetV8 ncclNetPlugin_v8 = {
    kName, p::init, p::device_count, props_v8, p::listen, p::connect, p::accept, p::reg_mr, p::reg_mr_dmabuf,
    p::dereg_mr, isend_int, irecv_int, iflush_any, p::test, p::close_send, p::close_recv, p::close_listen,
    p::get_device_mr, p::irecv_consumed};

__attribute__((visibility("default"))) NcclNetV7 ncclNetPlugin_v7 = {
    kName, p::init, p::device_count, props_v7, p::listen, p::connect, p::accept, reg_mr_int, p::reg_mr_dmabuf,
    p::dereg_mr, isend_int, irecv_int, iflush_any, p::test, p::close_send, p::close_recv, p::close_listen,
    p::get_device_mr, p::irecv_consumed};

}  // extern "C"
