// Test helpers for the CUDA seam tests: a transport that completes every transfer
// at once and records registrations, the path counters, a CUDA backend over the
// fake runtime installed as the process's cuda_backend(), and environment guards.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fake_cuda.hpp"
#include "mem/cuda/cuda_api.hpp"
#include "mem/direct_path.hpp"
#include "mem/path_choice.hpp"
#include "mem/staged_path.hpp"

namespace cuda_test {

using namespace dccl;
namespace cu = dccl::mem::cuda;

constexpr size_t kPage = fake::Cuda::kPage;

// A transport that completes every send and receive at once and records dma-buf
// registrations. With `loop`, a send is delivered to the oldest receive posted with
// the same tag (either may come first), the bytes copied, both completed then.
class FakeNet final : public net::Transport {
 public:
  struct Dmabuf {
    int fd;
    uint64_t offset;
    size_t len;
    void* base;
    int iface, device;
  };
  std::vector<Dmabuf> dmabufs;
  std::vector<const void*> sent;
  std::string refuse_dmabuf;  // non-empty: register_dmabuf fails with this, as fi_mr_regattr would
  int deregistrations = 0;
  bool loop = false;

  std::string local_blob() const override { return {}; }
  void connect(const std::vector<std::string>&, std::chrono::steady_clock::time_point) override {}
  std::string provider_summary() const override { return "fake"; }
  std::string hmem_missing() const override { return ""; }  // every endpoint has FI_HMEM
  void isend(int peer, const void* buf, size_t len, uint64_t tag, net::Request* req, net::MemRegion*) override {
    sent.push_back(buf);
    if (loop) return post(sends_, recvs_, Posted{const_cast<void*>(buf), len, tag, peer, req}, true);
    finish(req, peer, len, tag, true);
  }
  void irecv(int peer, void* buf, size_t len, uint64_t tag, net::Request* req, net::MemRegion*) override {
    if (loop) return post(recvs_, sends_, Posted{buf, len, tag, peer, req}, false);
    finish(req, peer, len, tag, false);
  }
  void progress() override {}
  void wait(net::Request* const*, size_t, const std::string&) override {}
  void cancel_all() override {}
  net::MemRegion* register_dmabuf(int fd, uint64_t offset, size_t len, void* base, int iface, int device) override {
    if (!refuse_dmabuf.empty()) core::raise(dcclSystemError, "register dma-buf on fake: " + refuse_dmabuf);
    dmabufs.push_back(Dmabuf{fd, offset, len, base, iface, device});
    return reinterpret_cast<net::MemRegion*>(&dmabufs);  // any non-null handle
  }
  void deregister_memory(net::MemRegion* mr) override {
    if (mr) ++deregistrations;
  }

 private:
  struct Posted {
    void* buf;
    size_t len;
    uint64_t tag;
    int peer;
    net::Request* req;
  };
  // Matches p against the oldest counterpart with its tag, else queues it.
  void post(std::vector<Posted>& mine, std::vector<Posted>& theirs, Posted p, bool send) {
    for (auto it = theirs.begin(); it != theirs.end(); ++it)
      if (it->tag == p.tag) {
        const Posted& s = send ? p : *it;
        const Posted& r = send ? *it : p;
        std::memcpy(r.buf, s.buf, std::min(s.len, r.len));
        finish(s.req, s.peer, s.len, s.tag, true);
        finish(r.req, r.peer, std::min(s.len, r.len), r.tag, false);
        theirs.erase(it);
        return;
      }
    mine.push_back(p);
  }
  std::vector<Posted> sends_, recvs_;

  static void finish(net::Request* r, int peer, size_t len, uint64_t tag, bool send) {
    r->peer = peer;
    r->bytes = len;
    r->tag = tag;
    r->is_send = send;
    r->done.store(true, std::memory_order_release);
  }
};

struct Counters {
  std::atomic<uint64_t> sd{0}, rd{0}, staged{0}, copies{0}, allocs{0};
  mem::PathCounters get() { return {&sd, &rd, &staged, &copies, &allocs}; }
};

// Installs a CUDA backend over the fake as the process's cuda_backend() for a test.
struct Installed {
  fake::Cuda api;
  std::unique_ptr<mem::Backend> be;
  explicit Installed(int dev = 1) {
    be = cu::make_backend(api, dev, "LOCAL_RANK=1 of 2 GPUs");
    cu::override_backend(be.get());
  }
  ~Installed() { cu::override_backend(nullptr); }
};

inline void send_once(mem::DataPath& path, const void* p, size_t bytes) {
  mem::Xfer x;
  path.post_send(1, p, bytes, 7, x);
  bool done = false;
  for (int i = 0; i < 1000 && !done; ++i) done = path.progress(x);
  ASSERT_TRUE(done) << "the transfer did not complete";
}

struct EnvGuard {
  std::vector<std::string> names;
  void set(const char* n, const char* v) {
    names.emplace_back(n);
    setenv(n, v, 1);
  }
  ~EnvGuard() {
    for (auto& n : names) unsetenv(n.c_str());
  }
};

}  // namespace cuda_test
