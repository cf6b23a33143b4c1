// C API: user-defined reduction ops (PreMulSum) and buffers registered up front.
#include <string>

#include "api/handles.hpp"
#include "core/types.hpp"

using namespace dccl;

extern "C" {

dcclResult_t dcclRedOpCreatePreMulSum(dcclRedOp_t* op, void* scalar, dcclDataType_t datatype,
                                      dcclScalarResidence_t residence, dcclComm_t comm) {
  const char* fn = "dcclRedOpCreatePreMulSum";
  return api::guard(fn, [&] {
    auto& c = api::comm_of(comm, fn);
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
