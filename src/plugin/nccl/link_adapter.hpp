// The plugin's one window onto DirectCCL's transport and memory layers: devices,
// a connection's transport, registrations and transfers. Everything the plugin
// needs from net/ and mem/ goes through this file, so that a change of the
// transport's interface changes this adapter only.
//
// A connection (an NCCL send comm and its recv comm) is a two-rank transport:
// rank 0 the receiving end, rank 1 the sending end, made from the blobs the
// handshake swapped. Its device says which path it takes:
//   sock  DirectCCL's socket path (authenticated TCP), host memory only;
//   shm   libfabric's shm provider (one host), host and device memory;
//   tcp   libfabric's tcp;ofi_rxm (only with DCCL_TRUST_NETWORK=1: the provider
//         does not authenticate peers), host and device memory.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dccl::plugin {

struct Device {
  std::string name;  // "dccl-sock-eth0"
  std::string kind;  // "sock", "shm" or "tcp"
  std::string rail;  // the interface ("" for shm)
  // NCCL_PTR_* bits: host always; CUDA and DMABUF where the viability layers pass.
  int ptr_support = 0;
  std::string device_memory;  // why device memory is or is not reached directly
  int speed_mbps = 0;
  float latency_us = 0;
  size_t max_bytes = 0;  // the largest message (one part: receives take up to their size)
};

// The DCCL_* settings, loaded once per process as DirectCCL's init loads them
// (core::load_config: a misspelled DCCL_* name is warned on DirectCCL's log, and
// *typos lists each as "NAME is not ...: did you mean ...?"). Throws
// core::Error(dcclInvalidArgument) naming a bad value, on this and every later call.
void load_settings(std::vector<std::string>* typos);
// DCCL_TIMEOUT_S, and as errors state it ("3 s (DCCL_TIMEOUT_S)").
std::chrono::milliseconds setup_timeout();
std::string timeout_text();

// This host's devices, found once per process; *notes says what was left out and why.
// Throws core::Error when the settings are invalid.
const std::vector<Device>& devices(std::vector<std::string>* notes);

struct Region;  // a registration (registration cache entry)
struct Op;      // one transfer in flight

class Link {
 public:
  // rank 0: the receiving end; 1: the sending end. Throws core::Error.
  Link(const Device& dev, int rank, const std::array<uint8_t, 16>& secret);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  std::string blob() const;
  // Connects the two ends (blocking; by the deadline). Throws core::Error.
  void connect(const std::string& peer_blob, std::chrono::steady_clock::time_point until);
  std::chrono::milliseconds timeout() const;

  // Host memory, or device memory (sim, CUDA) that the registration cache exports
  // as a dma-buf itself. Throws core::Error(dcclInvalidArgument/dcclUnavailable).
  Region* reg(void* p, size_t n, bool device);
  // Device memory [p, p+n) given as dma-buf `fd` at `offset` (NCCL exported it and
  // may close fd once this returns): mapped or imported now, never cached (the fd's
  // number names nothing once closed). Throws core::Error.
  Region* reg_dmabuf(void* p, size_t n, int fd, uint64_t offset);
  // Throws core::Error(dcclInvalidArgument) for a handle that is not a live
  // registration of this link (never made here, or deregistered already).
  void dereg(Region* r);

  // Posts a send of n bytes, or a receive of up to n bytes. Throws core::Error.
  Op* send(const void* p, size_t n, uint32_t tag, Region* r);
  Op* recv(void* p, size_t n, uint32_t tag, Region* r);
  // Progresses the connection; true once op is complete (*bytes: its length).
  // Throws core::Error when it failed (the op stays owned by the caller). A
  // receive of a message longer than it fails at once, and the connection is
  // unusable from then on: every later post or test fails naming the truncation.
  bool test(Op* op, size_t* bytes);
  void free_op(Op* op);  // an unfinished op is cancelled with the connection first
  // Cancels everything in flight (close with requests outstanding).
  void cancel();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dccl::plugin
