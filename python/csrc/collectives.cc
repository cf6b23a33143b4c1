// ProcessGroupDCCL's collectives on one tensor in place: all_reduce (and its
// coalesced form), broadcast, reduce, and barrier.
#include "process_group.hpp"

#include "errors.hpp"

namespace torch_dccl {

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const std::string op = "all_reduce";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  const Place place = check_tensor(t, rank_, size_, op);
  const dcclDataType_t dt = reduce_type(t, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, t, rank_, size_, op);
  const Call call{c10d::OpType::ALLREDUCE, t.scalar_type(), t.numel(), -1, red.code};
  return enqueue(c10d::OpType::ALLREDUCE, op, {t}, bound(opts.timeout), place, call, [this, op, t, dt, red] {
    Dense d(t);
    reduce_with(red, dt, op, [&](dcclRedOp_t r) { return dcclAllReduce(d.data(), d.data(), d.numel(), dt, r, comm_, nullptr); });
    d.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  const std::string op = "all_reduce_coalesced";
  if (tensors.empty()) fail(rank_, size_, op, "expects at least one tensor");
  const Place place = check_tensor(tensors[0], rank_, size_, op);
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_same(tensors[0], tensors[i], false, rank_, size_, op, "tensor " + std::to_string(i));
    total += tensors[i].numel();
  }
  const dcclDataType_t dt = reduce_type(tensors[0], rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, tensors[0], rank_, size_, op);
  const Call call{c10d::OpType::ALLREDUCE_COALESCED, tensors[0].scalar_type(), total, -1, red.code};
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, op, tensors, bound(opts.timeout), place, call,
                 [this, op, tensors, dt, red, place, total] {
                   // One all_reduce over the tensors packed end to end.
                   at::Tensor flat = at::empty({total}, tensors[0].options().memory_format(at::MemoryFormat::Contiguous));
                   int64_t off = 0;
                   for (const auto& t : tensors) {
                     flat.narrow(0, off, t.numel()).copy_(t.reshape({-1}));
                     off += t.numel();
                   }
                   settle(place);
                   reduce_with(red, dt, op, [&](dcclRedOp_t r) {
                     return dcclAllReduce(flat.data_ptr(), flat.data_ptr(), static_cast<size_t>(total), dt, r, comm_, nullptr);
                   });
                   off = 0;
                   for (const auto& t : tensors) {
                     t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
                     off += t.numel();
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const std::string op = "broadcast";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  const Place place = check_tensor(t, rank_, size_, op);
  check_peer(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  // Any dtype: a broadcast moves bytes.
  const Call call{c10d::OpType::BROADCAST, t.scalar_type(), t.numel(), root};
  return enqueue(c10d::OpType::BROADCAST, op, {t}, bound(opts.timeout), place, call, [this, op, t, root] {
    Dense d(t);
    check(dcclBroadcast(d.data(), d.data(), d.bytes(), dcclUint8, root, comm_, nullptr), op);
    d.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const std::string op = "reduce";
  const at::Tensor& t = single(tensors, rank_, size_, op);
  const Place place = check_tensor(t, rank_, size_, op);
  check_peer(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  const dcclDataType_t dt = reduce_type(t, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, t, rank_, size_, op);
  const Call call{c10d::OpType::REDUCE, t.scalar_type(), t.numel(), root, red.code};
  return enqueue(c10d::OpType::REDUCE, op, {t}, bound(opts.timeout), place, call, [this, op, t, dt, red, root] {
    Dense d(t);
    reduce_with(red, dt, op, [&](dcclRedOp_t r) { return dcclReduce(d.data(), d.data(), d.numel(), dt, r, root, comm_, nullptr); });
    d.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::barrier(const c10d::BarrierOptions& opts) {
  const std::string op = "barrier";
  const Call call{c10d::OpType::BARRIER, at::kByte, 0};
  return enqueue(c10d::OpType::BARRIER, op, {}, bound(opts.timeout), Place{}, call,
                 [this, op] { check(dcclBarrier(comm_, nullptr), op); });
}

}  // namespace torch_dccl
