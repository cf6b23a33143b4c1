// C API: user-defined reduction ops (PreMulSum) and buffers registered up front.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/handles.hpp"
#include "core/types.hpp"
#include "mem/backend.hpp"

using namespace dccl;

namespace {
// A registered range must be memory this process has: it may not wrap past the end
// of the address space; device memory lies inside one live allocation; host memory
// is mapped from its first to its last byte (mincore, a window at a time).
void check_range(int rank, const char* fn, const void* p, size_t size) {
  auto bad = [&](const std::string& why) { core::raise(dcclInvalidArgument, api::say(rank, fn, why)); };
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const std::string what = "buff " + std::to_string(a) + " + size " + std::to_string(size);
  if (size > UINTPTR_MAX - a) bad(what + " wraps past the end of the address space");
  mem::Backend& be = mem::backend_of(p);
  if (be.kind() != mem::Kind::Host) {
    void* base = nullptr;
    size_t len = 0;
    if (!be.range_of(p, &base, &len) || size > len - static_cast<size_t>(static_cast<const char*>(p) - static_cast<char*>(base)))
      bad(what + " is not inside one live " + std::string(be.name()) + " allocation");
    return;
  }
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = a & ~(page - 1), end = a + size;  // end > a: size > 0
  constexpr uintptr_t kWindow = uintptr_t{1} << 20;          // pages per mincore call
  std::vector<unsigned char> vec;
  for (uintptr_t at = first; at < end;) {
    const uintptr_t pages = std::min<uintptr_t>((end - at + page - 1) / page, kWindow);
    vec.resize(pages);
    if (mincore(reinterpret_cast<void*>(at), pages * page, vec.data()) != 0)
      bad(what + " is not mapped memory of this process" + (errno == ENOMEM ? "" : std::string(" (mincore: ") + strerror(errno) + ")"));
    at += pages * page;
  }
}
}  // namespace

extern "C" {

dcclResult_t dcclRedOpCreatePreMulSum(dcclRedOp_t* op, void* scalar, dcclDataType_t datatype,
                                      dcclScalarResidence_t residence, dcclComm_t comm) {
  const char* fn = "dcclRedOpCreatePreMulSum";
  return api::guard(fn, [&] {
    auto& c = api::comm_of(comm, fn);
    c.refuse_if_finalized(fn);
    auto bad = [&](const std::string& why) { core::raise(dcclInvalidArgument, api::say(c.rank(), fn, why)); };
    if (!op) bad("op is NULL");
    if (!scalar) bad("scalar is NULL");
    if (!core::dtype_valid(datatype)) bad("datatype " + std::to_string(static_cast<int>(datatype)) + " is not a dcclDataType_t");
    if (residence != dcclScalarDevice && residence != dcclScalarHostImmediate)
      bad("residence " + std::to_string(static_cast<int>(residence)) + " is not a dcclScalarResidence_t");
    *op = c.create_premul(scalar, datatype, residence == dcclScalarHostImmediate);
  });
}

dcclResult_t dcclRedOpDestroy(dcclRedOp_t op, dcclComm_t comm) {
  return api::guard("dcclRedOpDestroy", [&] { api::comm_of(comm, "dcclRedOpDestroy").destroy_premul(op); });
}

dcclResult_t dcclCommRegister(const dcclComm_t comm, void* buff, size_t size, void** handle) {
  const char* fn = "dcclCommRegister";
  return api::guard(fn, [&] {
    auto& c = api::comm_of(comm, fn);
    if (!handle) core::raise(dcclInvalidArgument, api::say(c.rank(), fn, "handle is NULL"));
    *handle = nullptr;
    if (!buff) core::raise(dcclInvalidArgument, api::say(c.rank(), fn, "buff is NULL"));
    if (size == 0) core::raise(dcclInvalidArgument, api::say(c.rank(), fn, "size is 0"));
    c.refuse_if_finalized(fn);
    check_range(c.rank(), fn, buff, size);
    *handle = c.register_buffer(buff, size);
  });
}

dcclResult_t dcclCommDeregister(const dcclComm_t comm, void* handle) {
  const char* fn = "dcclCommDeregister";
  return api::guard(fn, [&] {
    auto& c = api::comm_of(comm, fn);
    if (!handle) core::raise(dcclInvalidArgument, api::say(c.rank(), fn, "handle is NULL"));
    c.deregister_buffer(handle);
  });
}

}  // extern "C"
