// ProcessGroupDCCL's collectives between one block per rank: all_gather and
// reduce_scatter, in their list, single-tensor and coalesced forms.
#include "process_group.hpp"

#include "errors.hpp"

namespace torch_dccl {

namespace {

at::Tensor flat_of(const at::Tensor& like, int64_t n) {
  return at::empty({n}, like.options().memory_format(at::MemoryFormat::Contiguous));
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  const std::string op = "all_gather";
  const at::Tensor& in = single(inputs, rank_, size_, op);
  const Place place = check_tensor(in, rank_, size_, op);
  if (outputs.size() != 1) fail(rank_, size_, op, "expects one output list, got " + std::to_string(outputs.size()));
  std::vector<at::Tensor> outs = outputs[0];
  if (outs.size() != static_cast<size_t>(size_))
    fail(rank_, size_, op, "the output list has " + std::to_string(outs.size()) + " tensors for a group of " +
                               std::to_string(size_));
  for (size_t i = 0; i < outs.size(); ++i) check_same(in, outs[i], true, rank_, size_, op, "output " + std::to_string(i));
  const Call call{c10d::OpType::ALLGATHER, in.scalar_type(), in.numel()};
  return enqueue(c10d::OpType::ALLGATHER, op, outs, bound(opts.timeout), place, call, [this, op, in, outs] {
    Dense src(in);
    const int64_t n = in.numel();
    at::Tensor flat = flat_of(in, n * size_);
    check(dcclAllGather(src.data(), flat.data_ptr(), src.bytes(), dcclUint8, comm_, nullptr), op);
    for (int i = 0; i < size_; ++i) {
      const auto& o = outs[static_cast<size_t>(i)];
      o.copy_(flat.narrow(0, i * n, n).view(o.sizes()));
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  const std::string op = "all_gather_into_tensor";
  const Place place = check_tensor(input, rank_, size_, op);
  check_same(input, output, false, rank_, size_, op, "the output");
  if (output.numel() != input.numel() * size_)
    fail(rank_, size_, op, "the output has " + std::to_string(output.numel()) +
                               " elements, expected group size x input = " + std::to_string(input.numel() * size_));
  const Call call{c10d::OpType::_ALLGATHER_BASE, input.scalar_type(), input.numel()};
  return enqueue(c10d::OpType::_ALLGATHER_BASE, op, {output}, bound(opts.timeout), place, call,
                 [this, op, input, output] {
                   Dense src(input), dst(output);
                   check(dcclAllGather(src.data(), dst.data(), src.bytes(), dcclUint8, comm_, nullptr), op);
                   dst.finish();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  const std::string op = "all_gather_coalesced";
  if (inputs.empty() || outputs.size() != static_cast<size_t>(size_))
    fail(rank_, size_, op, "expects input tensors and one output list per rank of the group (" +
                               std::to_string(size_) + "), got " + std::to_string(inputs.size()) + " inputs and " +
                               std::to_string(outputs.size()) + " output lists");
  const Place place = check_tensor(inputs[0], rank_, size_, op);
  int64_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_same(inputs[0], inputs[i], false, rank_, size_, op, "input " + std::to_string(i));
    total += inputs[i].numel();
  }
  std::vector<at::Tensor> flat_outs;
  for (size_t r = 0; r < outputs.size(); ++r) {
    if (outputs[r].size() != inputs.size())
      fail(rank_, size_, op, "output list " + std::to_string(r) + " has " + std::to_string(outputs[r].size()) +
                                 " tensors for " + std::to_string(inputs.size()) + " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_same(inputs[i], outputs[r][i], true, rank_, size_, op, "output " + std::to_string(r) + "/" + std::to_string(i));
      flat_outs.push_back(outputs[r][i]);
    }
  }
  const Call call{c10d::OpType::ALLGATHER_COALESCED, inputs[0].scalar_type(), total};
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, op, flat_outs, bound(opts.timeout), place, call,
                 [this, op, inputs, outputs, total, place] {
                   // One all_gather of every input packed end to end.
                   at::Tensor mine = flat_of(inputs[0], total);
                   int64_t off = 0;
                   for (const auto& t : inputs) {
                     mine.narrow(0, off, t.numel()).copy_(t.reshape({-1}));
                     off += t.numel();
                   }
                   at::Tensor all = flat_of(inputs[0], total * size_);
                   settle(place);
                   check(dcclAllGather(mine.data_ptr(), all.data_ptr(), mine.nbytes(), dcclUint8, comm_, nullptr), op);
                   for (int r = 0; r < size_; ++r) {
                     off = r * total;
                     for (const auto& o : outputs[static_cast<size_t>(r)]) {
                       o.copy_(all.narrow(0, off, o.numel()).view(o.sizes()));
                       off += o.numel();
                     }
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::AllgatherOptions& opts) {
  const std::string op = "all_gather_into_tensor_coalesced";
  if (inputs.empty() || inputs.size() != outputs.size())
    fail(rank_, size_, op, "expects as many outputs as inputs (at least one), got " + std::to_string(outputs.size()) +
                               " and " + std::to_string(inputs.size()));
  const Place place = check_tensor(inputs[0], rank_, size_, op);
  int64_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_same(inputs[0], inputs[i], false, rank_, size_, op, "input " + std::to_string(i));
    check_same(inputs[i], outputs[i], false, rank_, size_, op, "output " + std::to_string(i));
    if (outputs[i].numel() != inputs[i].numel() * size_)
      fail(rank_, size_, op, "output " + std::to_string(i) + " has " + std::to_string(outputs[i].numel()) +
                                 " elements, expected group size x input = " + std::to_string(inputs[i].numel() * size_));
    total += inputs[i].numel();
  }
  const Call call{c10d::OpType::COALESCED, inputs[0].scalar_type(), total};
  return enqueue(c10d::OpType::COALESCED, op, outputs, bound(opts.timeout), place, call, [this, op, inputs, outputs] {
    for (size_t i = 0; i < inputs.size(); ++i) {
      Dense src(inputs[i]), dst(outputs[i]);
      check(dcclAllGather(src.data(), dst.data(), src.bytes(), dcclUint8, comm_, nullptr), op);
      dst.finish();
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter";
  const at::Tensor& out = single(outputs, rank_, size_, op);
  const Place place = check_tensor(out, rank_, size_, op);
  if (inputs.size() != 1) fail(rank_, size_, op, "expects one input list, got " + std::to_string(inputs.size()));
  std::vector<at::Tensor> ins = inputs[0];
  if (ins.size() != static_cast<size_t>(size_))
    fail(rank_, size_, op, "the input list has " + std::to_string(ins.size()) + " tensors for a group of " +
                               std::to_string(size_));
  for (size_t i = 0; i < ins.size(); ++i) check_same(out, ins[i], true, rank_, size_, op, "input " + std::to_string(i));
  const dcclDataType_t dt = reduce_type(out, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, out, rank_, size_, op);
  const Call call{c10d::OpType::REDUCE_SCATTER, out.scalar_type(), out.numel(), -1, red.code};
  return enqueue(c10d::OpType::REDUCE_SCATTER, op, {out}, bound(opts.timeout), place, call,
                 [this, op, out, ins, dt, red, place] {
                   const int64_t n = out.numel();
                   at::Tensor flat = flat_of(out, n * size_);
                   for (int i = 0; i < size_; ++i) flat.narrow(0, i * n, n).copy_(ins[static_cast<size_t>(i)].reshape({n}));
                   settle(place);
                   Dense dst(out);
                   reduce_with(red, dt, op, [&](dcclRedOp_t r) {
                     return dcclReduceScatter(flat.data_ptr(), dst.data(), dst.numel(), dt, r, comm_, nullptr);
                   });
                   dst.finish();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter_tensor";
  const Place place = check_tensor(output, rank_, size_, op);
  check_same(output, input, false, rank_, size_, op, "the input");
  if (input.numel() != output.numel() * size_)
    fail(rank_, size_, op, "the input has " + std::to_string(input.numel()) +
                               " elements, expected group size x output = " + std::to_string(output.numel() * size_));
  const dcclDataType_t dt = reduce_type(output, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, output, rank_, size_, op);
  const Call call{c10d::OpType::_REDUCE_SCATTER_BASE, output.scalar_type(), output.numel(), -1, red.code};
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, op, {output}, bound(opts.timeout), place, call,
                 [this, op, input, output, dt, red] {
                   Dense src(input), dst(output);
                   reduce_with(red, dt, op, [&](dcclRedOp_t r) {
                     return dcclReduceScatter(src.data(), dst.data(), dst.numel(), dt, r, comm_, nullptr);
                   });
                   dst.finish();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter_tensor_coalesced";
  if (outputs.empty() || inputs.size() != outputs.size())
    fail(rank_, size_, op, "expects as many inputs as outputs (at least one), got " + std::to_string(inputs.size()) +
                               " and " + std::to_string(outputs.size()));
  const Place place = check_tensor(outputs[0], rank_, size_, op);
  int64_t total = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_same(outputs[0], outputs[i], false, rank_, size_, op, "output " + std::to_string(i));
    check_same(outputs[i], inputs[i], false, rank_, size_, op, "input " + std::to_string(i));
    if (inputs[i].numel() != outputs[i].numel() * size_)
      fail(rank_, size_, op, "input " + std::to_string(i) + " has " + std::to_string(inputs[i].numel()) +
                                 " elements, expected group size x output = " + std::to_string(outputs[i].numel() * size_));
    total += outputs[i].numel();
  }
  const dcclDataType_t dt = reduce_type(outputs[0], rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, outputs[0], rank_, size_, op);
  const Call call{c10d::OpType::COALESCED, outputs[0].scalar_type(), total, -1, red.code};
  return enqueue(c10d::OpType::COALESCED, op, outputs, bound(opts.timeout), place, call,
                 [this, op, inputs, outputs, dt, red] {
                   for (size_t i = 0; i < outputs.size(); ++i) {
                     Dense src(inputs[i]), dst(outputs[i]);
                     reduce_with(red, dt, op, [&](dcclRedOp_t r) {
                       return dcclReduceScatter(src.data(), dst.data(), dst.numel(), dt, r, comm_, nullptr);
                     });
                     dst.finish();
                   }
                 });
}

}  // namespace torch_dccl
