#include "sched/check.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "coll/call_context.hpp"
#include "core/error.hpp"
#include "core/types.hpp"

namespace dccl::sched {

namespace {

struct Sig {
  uint64_t seq, count;
  int32_t coll, dt, op, root;
  bool operator==(const Sig& o) const {
    return seq == o.seq && count == o.count && coll == o.coll && dt == o.dt && op == o.op && root == o.root;
  }
};

std::string text(const Sig& s) {
  auto c = static_cast<tune::Coll>(s.coll);
  std::string t = std::string(tune::coll_name(c)) + " #" + std::to_string(s.seq) + " count " + std::to_string(s.count) +
                  " " + core::dtype_name(static_cast<dcclDataType_t>(s.dt));
  if (c == tune::Coll::AllReduce || c == tune::Coll::Reduce || c == tune::Coll::ReduceScatter)
    t += std::string(" ") + core::wire_op_name(s.op);
  if (c == tune::Coll::Reduce || c == tune::Coll::Broadcast) t += " root " + std::to_string(s.root);
  return t;
}

}  // namespace

void check_signature(ExecutorInputs& res, const Op& op) {
  const int n = res.comm->nranks;
  if (n == 1) return;
  Sig mine{};
  mine.seq = op.seq;
  mine.count = op.count;
  mine.coll = static_cast<int32_t>(op.coll);
  mine.dt = op.coll == tune::Coll::Barrier ? 0 : op.dt;
  const bool reducing = op.coll == tune::Coll::AllReduce || op.coll == tune::Coll::Reduce ||
                        op.coll == tune::Coll::ReduceScatter;
  mine.op = reducing ? wire_op(op) : 0;
  mine.root = op.coll == tune::Coll::Reduce || op.coll == tune::Coll::Broadcast ? op.root : 0;

  coll::CallContextInit in;
  in.comm = res.comm;
  in.backend = &mem::host_backend();
  in.deadline = res.deadline;
  in.name.text = "DCCL_CHECK of " + text(mine);
  coll::CallContext ctx(in);
  std::vector<Sig> theirs(static_cast<size_t>(n));
  std::vector<coll::Xfer> xs(2 * static_cast<size_t>(n));
  const uint64_t tag = coll::make_tag(coll::TagKind::Check, op.seq, 0);
  for (int p = 0; p < n; ++p) {
    if (p == res.comm->rank) continue;
    ctx.recv_tagged(p, &theirs[static_cast<size_t>(p)], sizeof(Sig), tag, xs[2 * static_cast<size_t>(p)]);
    ctx.send_tagged(p, &mine, sizeof(Sig), tag, xs[2 * static_cast<size_t>(p) + 1]);
  }
  ctx.wait_all(xs.data(), xs.size());
  for (int p = 0; p < n; ++p) {
    if (p == res.comm->rank || theirs[static_cast<size_t>(p)] == mine) continue;
    throw core::Error(dcclInvalidUsage,
                      core::describe(res.comm->rank, in.name.text,
                                     "collective mismatch: this rank called " + text(mine) + " but rank " +
                                         std::to_string(p) + " called " + text(theirs[static_cast<size_t>(p)])));
  }
}

}  // namespace dccl::sched
