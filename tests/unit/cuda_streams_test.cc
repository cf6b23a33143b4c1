// The CUDA backend's streams over the fake runtime (fake_cuda.hpp records every
// stream operation): device->host and host->device copies on two copy streams of
// their own, each ordered after earlier main-stream work by an event, the main
// stream ordered after both, the two copy streams independent of each other; the
// staged path's copy-out and copy-in on them with the data intact; and copies
// timed with device events.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_seam_util.hpp"

using namespace cuda_test;

namespace {

using Call = fake::Cuda::Call;

// Index of the n-th call of `kind` (from 0) in the log; -1 when there is none.
int find(const std::vector<Call>& calls, const std::string& kind, int n = 0) {
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].kind == kind && n-- == 0) return static_cast<int>(i);
  return -1;
}

// The event recorded on `s` right after call i (the ticket of the work at i).
void* event_after(const std::vector<Call>& calls, int i) {
  for (size_t j = static_cast<size_t>(i) + 1; j < calls.size(); ++j)
    if (calls[j].kind == "record" && calls[j].stream == calls[static_cast<size_t>(i)].stream) return calls[j].event;
  return nullptr;
}

// Whether, before call i, its stream was made to wait for event e.
bool waited_for(const std::vector<Call>& calls, int i, void* e) {
  for (int j = 0; j < i; ++j)
    if (calls[j].kind == "wait" && calls[j].stream == calls[i].stream && calls[j].event == e) return true;
  return false;
}

}  // namespace

TEST(CudaStreams, CopyOutAndCopyInOnSeparateStreamsWithEventOrder) {
  Installed in;
  const size_t n = 4096;
  std::vector<float> host_a(n, 1.5f), host_b(n, 2.0f), out(n, 0.0f);
  auto* x = static_cast<float*>(in.be->alloc(n * sizeof(float)));
  auto* y = static_cast<float*>(in.be->alloc(n * sizeof(float)));
  auto* z = static_cast<float*>(in.be->alloc(n * sizeof(float)));
  in.be->copy_async(x, host_a.data(), n * sizeof(float));
  in.be->copy_async(y, host_b.data(), n * sizeof(float));
  in.api.calls.clear();
  in.be->reduce_async(x, x, y, n, dcclFloat32, dcclSum);   // main: produces x
  in.be->copy_async(out.data(), x, n * sizeof(float));     // copy-out of x
  in.be->copy_async(z, host_b.data(), n * sizeof(float));  // copy-in to z
  const mem::Ticket last = in.be->reduce_async(z, z, x, n, dcclFloat32, dcclSum);  // main: reads z
  in.be->wait(last, 1000);
  const auto& calls = in.api.calls;
  const int red = find(calls, "reduce", 0), d2h = find(calls, "d2h"), h2d = find(calls, "h2d"),
            red2 = find(calls, "reduce", 1);
  ASSERT_TRUE(red >= 0 && d2h >= 0 && h2d >= 0 && red2 >= 0);
  void* main = calls[red].stream;
  EXPECT_NE(calls[d2h].stream, main) << "the copy-out runs on the main stream";
  EXPECT_NE(calls[h2d].stream, main) << "the copy-in runs on the main stream";
  EXPECT_NE(calls[d2h].stream, calls[h2d].stream) << "copy-out and copy-in share a stream: they cannot overlap";
  EXPECT_EQ(calls[red2].stream, main);
  void* reduced = event_after(calls, red);
  EXPECT_TRUE(waited_for(calls, d2h, reduced)) << "the copy-out may start before the reduction producing its data";
  EXPECT_TRUE(waited_for(calls, h2d, reduced)) << "the copy-in may overwrite memory earlier work still uses";
  EXPECT_FALSE(waited_for(calls, h2d, event_after(calls, d2h))) << "the copy-in waits for the copy-out";
  EXPECT_TRUE(waited_for(calls, red2, event_after(calls, h2d))) << "the reduction may read z before it arrived";
  EXPECT_TRUE(waited_for(calls, red2, event_after(calls, d2h))) << "the reduction may change x while it is copied out";
  // And the results: out = 1.5 + 2, then z = 2 + 3.5.
  std::vector<float> zz(n);
  in.be->wait(in.be->copy_async(zz.data(), z, n * sizeof(float)), 1000);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], 3.5f) << i;
    ASSERT_EQ(zz[i], 5.5f) << i;
  }
  for (float* p : {x, y, z}) in.be->free(p);
}

TEST(CudaStreams, StagedSendAndReceiveCopyOnTheirOwnStreams) {
  Installed in;
  FakeNet net;
  net.loop = true;
  Counters c;
  mem::StagedPath path(net, 0, 1, 64 << 10, 2, c.get());
  const size_t bytes = 300 << 10;  // five parts each way
  std::vector<char> want(bytes), got(bytes);
  for (size_t i = 0; i < bytes; ++i) want[i] = static_cast<char>(i % 251);
  char* src = static_cast<char*>(in.be->alloc(bytes));
  char* dst = static_cast<char*>(in.be->alloc(bytes));
  in.be->wait(in.be->copy_async(src, want.data(), bytes), 1000);
  in.api.calls.clear();
  mem::Xfer s, r;
  path.post_recv(0, dst, bytes, 3, r);
  path.post_send(0, src, bytes, 3, s);
  bool sd = false, rd = false;
  for (int i = 0; i < 10000 && !(sd && rd); ++i) {
    if (!sd) sd = path.progress(s);
    if (!rd) rd = path.progress(r);
  }
  ASSERT_TRUE(sd && rd);
  int outs = 0, ins = 0;
  void *out_stream = nullptr, *in_stream = nullptr;
  for (const Call& k : in.api.calls) {
    if (k.kind == "d2h") {
      ++outs;
      if (!out_stream) out_stream = k.stream;
      EXPECT_EQ(k.stream, out_stream) << "copy-outs spread over streams";
    } else if (k.kind == "h2d") {
      ++ins;
      if (!in_stream) in_stream = k.stream;
      EXPECT_EQ(k.stream, in_stream) << "copy-ins spread over streams";
    }
  }
  EXPECT_EQ(outs, 5);
  EXPECT_EQ(ins, 5);
  EXPECT_NE(out_stream, in_stream) << "a rank's copy-out and copy-in are serialized on one stream";
  in.be->wait(in.be->copy_async(got.data(), dst, bytes), 1000);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), bytes));
  in.be->free(src);
  in.be->free(dst);
}

TEST(CudaStreams, CopiesAreTimedWithDeviceEvents) {
  Installed in;
  const size_t bytes = 1 << 20;
  std::vector<char> host(bytes, 7), back(bytes, 0);
  char* d = static_cast<char*>(in.be->alloc(bytes));
  char* d2 = static_cast<char*>(in.be->alloc(bytes));
  in.api.calls.clear();
  mem::Backend::Copy up{d, host.data(), bytes};
  const double us = in.be->time_copies_us(&up, 1, 1000);
  // The fake's device clock: a copy takes bytes / 1000 us, whatever the host's clock says.
  EXPECT_NEAR(us, bytes / 1000.0, 0.01);
  EXPECT_EQ(in.api.timing_events, 2);
  EXPECT_EQ(in.api.events_destroyed, 2) << "timing events leaked";
  // Both directions at once: each on its copy stream, both after the start event.
  mem::Backend::Copy both[] = {{back.data(), d, bytes}, {d2, host.data(), bytes}};
  const double us2 = in.be->time_copies_us(both, 2, 1000);
  EXPECT_NEAR(us2, 2 * bytes / 1000.0, 0.01) << "the fake runs copies one after another";
  const auto& calls = in.api.calls;
  const int start = find(calls, "record", 2);  // after the first timing's start and stop
  const int d2h = find(calls, "d2h"), h2d = find(calls, "h2d", 1);
  ASSERT_TRUE(start >= 0 && d2h >= 0 && h2d >= 0);
  EXPECT_NE(calls[d2h].stream, calls[h2d].stream);
  EXPECT_TRUE(waited_for(calls, d2h, calls[start].event));
  EXPECT_TRUE(waited_for(calls, h2d, calls[start].event));
  EXPECT_EQ(0, std::memcmp(back.data(), host.data(), bytes));
  in.be->free(d);
  in.be->free(d2);
}
