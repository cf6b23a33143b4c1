// dcclGroupStart/End: calls made between them are collected per thread and
// submitted together at the outermost dcclGroupEnd, whatever streams and
// communicators they name.
#pragma once
#include "comm/communicator.hpp"
#include "sched/op.hpp"

namespace dccl::api {

bool in_group();
// Adds op to the open group (in_group() must be true); `stream_handle` (null: the
// NULL stream) is checked again at dcclGroupEnd, which refuses the call if it is gone.
void group_add(dcclComm* comm, comm::Communicator& c, dcclStream* stream_handle, sched::Stream* stream,
               const sched::Op& op);
void group_start();
// A call of the open group was refused: the outermost dcclGroupEnd still submits the
// others, then returns this error (the first one).
void group_refused(const core::Error& e);
// Submits the group: one submission per communicator and stream, or one joined piece
// of work when it spans several (group.cc). Throws the first error.
void group_end();

}  // namespace dccl::api
