// dcclGroupStart/End: calls made between them are collected per thread and
// submitted together at the outermost dcclGroupEnd.
#pragma once
#include "comm/communicator.hpp"
#include "sched/op.hpp"

namespace dccl::api {

bool in_group();
// Adds op to the open group (in_group() must be true).
void group_add(dcclComm* comm, comm::Communicator& c, sched::Stream* stream, const sched::Op& op);
void group_start();
void group_end();  // throws the first error of the submitted work

}  // namespace dccl::api
