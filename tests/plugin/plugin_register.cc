// One process registers device memory through libnccl-net-dccl.so, as NCCL's
// proxy does before it sends from or receives into a GPU buffer, and moves it over
// a connection to itself on the first device that offers device memory:
//   plugin_register PLUGIN.so cuda|sim [BYTES]
// For every device: its ptrSupport and the plugin's reason. Then: the memory is
// allocated by DirectCCL's backend (cudaMalloc for cuda), exported as a dma-buf
// and given to regMrDmaBuf, as NCCL does; if the device's ptrSupport has the
// dma-buf bit, the registration must succeed and the bytes moved device to device
// must arrive; if not, it must fail with a reason. Exit 0 when the plugin's
// behaviour matches what it advertised; the last line says which case it was.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "mem/backend.hpp"

using namespace harness;
namespace mem = dccl::mem;

int main(int argc, char** argv) {
  CHECK(argc >= 3, "usage: plugin_register PLUGIN.so cuda|sim [BYTES]");
  const std::string kind = argv[2];
  const size_t n = argc > 3 ? std::stoul(argv[3]) : size_t{4} << 20;
  Plugin pl = load(argv[1]);
  NcclNetV10* net = pl.v10;
  setenv("PLUGIN_LOG", "1", 0);  // the plugin's INFO lines carry each device's reason
  OK(net->init(log_fn(), nullptr));
  int ndev = 0, dev = -1;
  OK(net->devices(&ndev));
  bool advertised = false;
  for (int d = 0; d < ndev; ++d) {
    NcclPropsV9 p{};
    OK(net->get_properties(d, &p));
    printf("device %d %s: ptrSupport host%s%s\n", d, p.name, p.ptr_support & kNcclPtrCuda ? "+cuda" : "",
           p.ptr_support & kNcclPtrDmaBuf ? "+dmabuf" : "");
    if (dev < 0 && std::string(p.name).rfind("dccl-sock", 0) != 0) {
      dev = d;
      advertised = p.ptr_support & kNcclPtrDmaBuf;
    }
  }
  CHECK(dev >= 0, "no fabric device (shm or tcp) to register device memory on");
  // ptrSupport speaks of CUDA memory; the sim backend's dma-buf (a memfd) is
  // importable wherever the backend exports it (DCCL_SIM_DMABUF), decided below.
  const bool sim = kind == "sim";
  mem::Backend* be = kind == "cuda" ? mem::cuda_backend() : &mem::sim_backend();
  CHECK(be, "no CUDA backend here: %s", mem::cuda_unavailable_reason().c_str());

  // A connection to this process itself: listen, then poll connect and accept.
  char handle[kNcclHandleBytes] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  NcclNetDeviceHandle* dh = nullptr;
  OK(net->listen(dev, handle, &lc));
  // Bounded by time, not by polls: on a loaded machine the handshake may take
  // longer than any fixed number of quick polls.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((!sc || !rc) && std::chrono::steady_clock::now() < until) {
    if (!sc) OK(net->connect(dev, nullptr, handle, &sc, &dh));
    if (!rc) OK(net->accept(lc, &rc, &dh));
    if (!sc || !rc) usleep(100);
  }
  CHECK(sc && rc, "connecting to itself did not finish within 60 s");

  void* src = be->alloc(n);
  void* dst = be->alloc(n);
  std::vector<char> host(n), back(n, 0);
  fill(host.data(), n, 42);
  be->wait(be->copy_async(src, host.data(), n), 30000);
  be->wait(be->memset_async(dst, 0, n), 30000);
  mem::DmaBuf sx{}, rx{};
  std::string export_error;
  try {
    sx = be->export_dmabuf(src, n);
    rx = be->export_dmabuf(dst, n);
  } catch (const std::exception& e) {
    export_error = e.what();
  }
  void *smh = nullptr, *rmh = nullptr;
  const bool exported = export_error.empty();
  if (sim) advertised = exported;
  const bool ok = exported && net->reg_mr_dmabuf(sc, src, n, kNcclPtrCuda, sx.offset, sx.fd, &smh) == kNcclSuccess &&
                  net->reg_mr_dmabuf(rc, dst, n, kNcclPtrCuda, rx.offset, rx.fd, &rmh) == kNcclSuccess;
  const std::string why = exported ? last_warning() : "the backend's dma-buf export failed: " + export_error;
  if (!advertised) {
    CHECK(!ok, "%s memory registered although the device does not offer dma-buf for it", kind.c_str());
    printf("plugin: %s memory: not registered by dma-buf, as advertised: %s\n", kind.c_str(), why.c_str());
  } else {
    CHECK(ok, "the device offers dma-buf for %s memory but registration failed: %s", kind.c_str(), why.c_str());
    void *rq = nullptr, *sq = nullptr;
    int tag = 1, got = -1;
    size_t cap = n;
    while (!rq) OK(net->irecv(rc, 1, &dst, &cap, &tag, &rmh, nullptr, &rq));
    while (!sq) OK(net->isend(sc, src, n, 1, smh, nullptr, &sq));
    wait_req(net, rq, &got);
    wait_req(net, sq);
    void* fq = nullptr;
    int fsize = static_cast<int>(n);
    OK(net->iflush(rc, 1, &dst, &fsize, &rmh, &fq));
    if (fq) wait_req(net, fq);
    be->wait(be->copy_async(back.data(), dst, n), 30000);
    CHECK(got == static_cast<int>(n) && memcmp(back.data(), host.data(), n) == 0, "device-to-device bytes differ");
    OK(net->dereg_mr(sc, smh));
    OK(net->dereg_mr(rc, rmh));
    printf("plugin: %s memory: registered by dma-buf; %zu bytes moved device to device and checked\n", kind.c_str(), n);
  }
  be->free(src);
  be->free(dst);
  OK(net->close_send(sc));
  OK(net->close_recv(rc));
  OK(net->close_listen(lc));
  return 0;
}
