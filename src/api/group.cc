#include "api/group.hpp"

#include <vector>

#include "api/handles.hpp"

namespace dccl::api {

namespace {
struct Pending {
  dcclComm* handle;
  comm::Communicator* comm;
  sched::Stream* stream;
  sched::Op op;
};
thread_local int t_depth = 0;
thread_local std::vector<Pending> t_pending;
}  // namespace

bool in_group() { return t_depth > 0; }

void group_start() { ++t_depth; }

void group_add(dcclComm* handle, comm::Communicator& c, sched::Stream* stream, const sched::Op& op) {
  t_pending.push_back({handle, &c, stream, op});
}

void group_end() {
  if (t_depth == 0) core::raise(dcclInvalidUsage, "dcclGroupEnd: no matching dcclGroupStart");
  if (--t_depth > 0) return;
  std::vector<Pending> work;
  work.swap(t_pending);
  // One submission per (communicator, stream), in order of first appearance.
  std::vector<bool> taken(work.size(), false);
  std::string first_error;
  dcclResult_t first_code = dcclSuccess;
  for (size_t i = 0; i < work.size(); ++i) {
    if (taken[i]) continue;
    std::vector<sched::Op> ops;
    for (size_t j = i; j < work.size(); ++j)
      if (!taken[j] && work[j].handle == work[i].handle && work[j].stream == work[i].stream) {
        ops.push_back(work[j].op);
        taken[j] = true;
      }
    try {
      comm::Communicator& c = comm_of(work[i].handle, "dcclGroupEnd");
      CallScope scope(c, "dcclGroupEnd");
      c.submit(std::move(ops), work[i].stream);
      scope.leave();
    } catch (const core::Error& e) {
      if (first_code == dcclSuccess) {
        first_code = e.code();
        first_error = e.what();
      }
    }
  }
  if (first_code != dcclSuccess) throw core::Error(first_code, first_error);
}

}  // namespace dccl::api
