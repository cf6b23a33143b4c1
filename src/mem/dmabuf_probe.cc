#include "mem/dmabuf_probe.hpp"

#include <rdma/fi_domain.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "mem/backend.hpp"
#include "mem/viability.hpp"

namespace dccl::mem {

namespace {

using net::Verdict;

// The dma-buf's size as the kernel reports it (dma-bufs and memfds answer SEEK_END).
long long fd_size(int fd) {
  const off_t end = lseek(fd, 0, SEEK_END);
  return end < 0 ? -1 : static_cast<long long>(end);
}

// One export of [p, p+len): a real fd whose size covers offset + len in whole pages,
// the offset in its page matching p's.
ProbeLayer export_layer(Backend& be, const char* name, const char* p, size_t len, size_t page, DmaBuf* out) {
  try {
    DmaBuf d = be.export_dmabuf(p, len);
    const long long size = fd_size(d.fd);
    std::string what = "fd " + std::to_string(d.fd) + ", offset " + std::to_string(d.offset) + ", length " +
                       std::to_string(d.len) + ", dma-buf size " + std::to_string(size);
    if (d.fd < 0 || size < 0)
      return {Verdict::Fail, name, "no usable fd (" + what + (size < 0 ? std::string(": ") + strerror(errno) : "") + ")"};
    if (static_cast<unsigned long long>(size) < d.offset + d.len || size % static_cast<long long>(page) != 0)
      return {Verdict::Fail, name, "the dma-buf does not cover the range in whole pages (" + what + ")"};
    if (d.offset % page != reinterpret_cast<uintptr_t>(p) % page || d.len != len)
      return {Verdict::Fail, name, "offset or length do not match the range asked for (" + what + ")"};
    *out = d;
    return {Verdict::Pass, name, what};
  } catch (const std::exception& e) {
    return {Verdict::Fail, name, e.what()};
  }
}

ProbeLayer sync_memops_layer(Backend& be, const void* p) {
  const char* name = "SYNC_MEMOPS";
  try {
    switch (be.sync_memops(p)) {
      case 1: return {Verdict::Pass, name, "set on the allocation at its first export"};
      case 0: return {Verdict::Fail, name, "not set on the exported allocation"};
      default:
        return {Verdict::NotApplicable, name,
                std::string(be.name()) + " has no such attribute (its copies complete in order on one engine)"};
    }
  } catch (const std::exception& e) {
    return {Verdict::Fail, name, e.what()};
  }
}

// Free and allocate the same size again: a registration of the old memory must no
// longer match (a new buffer id where the backend has them; the free hooks run).
ProbeLayer invalidation_layer(Backend& be, void** p, size_t bytes) {
  const char* name = "buffer-id invalidation";
  try {
    const void* old = *p;
    const uint64_t id = be.buffer_id(old);
    bool hooked = false;
    const int hook = add_free_hook([&](Kind, const void* base, size_t) { hooked = hooked || base == old; });
    be.free(*p);
    *p = nullptr;
    remove_free_hook(hook);
    *p = be.alloc(bytes);
    const uint64_t id2 = be.buffer_id(*p);
    const std::string where = *p == old ? "the same address" : "another address";
    if (!hooked) return {Verdict::Fail, name, "the free hooks did not see the free, so cached registrations stay"};
    if (id == 0 && id2 == 0)
      return {Verdict::Pass, name,
              std::string(be.name()) + " has no buffer ids; the free hooks invalidated the registration (new memory at " +
                  where + ")"};
    if (id == id2)
      return {Verdict::Fail, name, "buffer id " + std::to_string(id) + " is unchanged after free + alloc at " + where};
    return {Verdict::Pass, name,
            "buffer id " + std::to_string(id) + " -> " + std::to_string(id2) + " after free + alloc at " + where +
                "; the free hooks ran"};
  } catch (const std::exception& e) {
    return {Verdict::Fail, name, e.what()};
  }
}

ProbeLayer trial_layer(Backend& be, const std::vector<std::string>& providers, const char* p, const DmaBuf& d,
                       size_t page) {
  const char* name = "trial registration";
  net::TrialResult r;
  if (be.kind() == Kind::Cuda) {
    r = net::trial_register_dmabuf(providers, fabric_version(), d.fd, d.offset, d.len, const_cast<char*>(p) - d.offset,
                                   FI_HMEM_CUDA, be.device());
  } else {
    // As the sim direct path does: map the dma-buf (whole pages) and register the mapping.
    const uint64_t lead = d.offset % page;
    const size_t len = (lead + d.len + page - 1) / page * page;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd, static_cast<off_t>(d.offset - lead));
    if (m == MAP_FAILED) return {Verdict::Fail, name, std::string("mmap of the dma-buf failed: ") + strerror(errno)};
    r = net::trial_register_host(providers, m, len);
    munmap(m, len);
  }
  return {r.verdict, name, r.detail};
}

}  // namespace

const char* verdict_text(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Fail: return "FAIL";
    case Verdict::NotApplicable: return "n/a";
  }
  return "?";
}

bool probe_dmabuf(const std::string& kind, const std::vector<std::string>& providers, std::vector<ProbeLayer>* out,
                  std::string* why) {
  Backend* be = kind == "sim" ? &sim_backend() : kind == "cuda" ? cuda_backend() : nullptr;
  if (!be) {
    *why = kind == "cuda" ? "cuda backend unavailable: " + cuda_unavailable_reason()
                          : "no memory kind '" + kind + "' (sim or cuda)";
    return false;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = 3 * page;
  void* p = nullptr;
  try {
    p = be->alloc(bytes);
  } catch (const std::exception& e) {
    *why = std::string(be->name()) + ": allocating " + std::to_string(bytes) + " bytes failed: " + e.what();
    return false;
  }
  const char* c = static_cast<const char*>(p);
  DmaBuf aligned, unaligned;
  out->push_back(export_layer(*be, "export aligned", c, 2 * page, page, &aligned));
  out->push_back(export_layer(*be, "export unaligned", c + 100, page + 200, page, &unaligned));
  const bool exported = out->front().verdict == Verdict::Pass;
  if (exported) out->push_back(sync_memops_layer(*be, p));
  else out->push_back({Verdict::NotApplicable, "SYNC_MEMOPS", "nothing was exported"});
  if (exported) out->push_back(trial_layer(*be, providers, c, aligned, page));
  else out->push_back({Verdict::NotApplicable, "trial registration", "nothing was exported"});
  out->push_back(invalidation_layer(*be, &p, bytes));
  try {
    if (p) be->free(p);
  } catch (const std::exception& e) {
    out->push_back({Verdict::Fail, "free", e.what()});
  }
  return true;
}

}  // namespace dccl::mem
