// ProcessGroupDCCL's operations between lists of tensors or blocks of one:
// all_gather, reduce_scatter and all_to_all, in their list and single-tensor forms.
#include <stdexcept>

#include "backend.hpp"

namespace torch_dccl {

namespace {

[[noreturn]] void fail(int rank, int size, const std::string& op, const std::string& cause) {
  throw std::runtime_error(describe(rank, size, op, cause));
}

// Bytes of each of `size` blocks along dimension 0: the split sizes (rows) when
// given, else equal blocks.
std::vector<size_t> block_bytes(const at::Tensor& t, const std::vector<int64_t>& splits, int rank, int size,
                                const std::string& op, const std::string& what) {
  if (t.dim() == 0) fail(rank, size, op, what + " is a scalar; all_to_all_single splits dimension 0");
  const int64_t rows = t.size(0);
  const size_t row_bytes = rows ? t.nbytes() / static_cast<size_t>(rows) : 0;
  std::vector<size_t> bytes(static_cast<size_t>(size));
  if (splits.empty()) {
    if (rows % size != 0)
      fail(rank, size, op, what + " has " + std::to_string(rows) + " rows, not a multiple of the group size " +
                               std::to_string(size) + " (give split sizes for uneven blocks)");
    for (auto& b : bytes) b = static_cast<size_t>(rows / size) * row_bytes;
    return bytes;
  }
  if (splits.size() != static_cast<size_t>(size))
    fail(rank, size, op, what + " split sizes name " + std::to_string(splits.size()) + " blocks for a group of " +
                             std::to_string(size));
  int64_t total = 0;
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0) fail(rank, size, op, what + " split size " + std::to_string(i) + " is negative");
    total += splits[i];
    bytes[i] = static_cast<size_t>(splits[i]) * row_bytes;
  }
  if (total != rows)
    fail(rank, size, op, what + " split sizes add up to " + std::to_string(total) + " rows, the tensor has " +
                             std::to_string(rows));
  return bytes;
}

}  // namespace

void ProcessGroupDCCL::exchange(const std::string& op, const std::vector<Transfer>& sends,
                                const std::vector<Transfer>& recvs) const {
  dcclResult_t first = dcclSuccess;
  std::string text;
  auto note = [&](dcclResult_t r) {
    if (r != dcclSuccess && first == dcclSuccess) {
      first = r;
      text = dccl_text(r, comm_);  // now: the next call on this thread replaces it
    }
  };
  check(dcclGroupStart(), op);
  for (const auto& s : sends)
    if (s.bytes) note(dcclSend(s.data, s.bytes, dcclUint8, s.peer, comm_, nullptr));
  for (const auto& r : recvs)
    if (r.bytes) note(dcclRecv(r.data, r.bytes, dcclUint8, r.peer, comm_, nullptr));
  note(dcclGroupEnd());  // closes the group even after a refused call
  if (first != dcclSuccess) throw std::runtime_error(describe(rank_, size_, op, text));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  const std::string op = "all_gather";
  const at::Tensor& in = single(inputs, rank_, size_, op);
  if (outputs.size() != 1) fail(rank_, size_, op, "expects one output list, got " + std::to_string(outputs.size()));
  std::vector<at::Tensor> outs = outputs[0];
  if (outs.size() != static_cast<size_t>(size_))
    fail(rank_, size_, op, "the output list has " + std::to_string(outs.size()) + " tensors for a group of " +
                               std::to_string(size_));
  for (size_t i = 0; i < outs.size(); ++i) check_same(in, outs[i], true, rank_, size_, op, "output " + std::to_string(i));
  return enqueue(c10d::OpType::ALLGATHER, op, outs, bound(opts.timeout), [this, op, in, outs] {
    Dense src(in);
    const int64_t n = in.numel();
    at::Tensor flat = at::empty({n * size_}, in.options().memory_format(at::MemoryFormat::Contiguous));
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
  check_tensor(input, rank_, size_, op);
  check_same(input, output, false, rank_, size_, op, "the output");
  if (output.numel() != input.numel() * size_)
    fail(rank_, size_, op, "the output has " + std::to_string(output.numel()) + " elements, expected group size x input = " +
                               std::to_string(input.numel() * size_));
  return enqueue(c10d::OpType::_ALLGATHER_BASE, op, {output}, bound(opts.timeout), [this, op, input, output] {
    Dense src(input), dst(output);
    check(dcclAllGather(src.data(), dst.data(), src.bytes(), dcclUint8, comm_, nullptr), op);
    dst.finish();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter";
  const at::Tensor& out = single(outputs, rank_, size_, op);
  if (inputs.size() != 1) fail(rank_, size_, op, "expects one input list, got " + std::to_string(inputs.size()));
  std::vector<at::Tensor> ins = inputs[0];
  if (ins.size() != static_cast<size_t>(size_))
    fail(rank_, size_, op, "the input list has " + std::to_string(ins.size()) + " tensors for a group of " +
                               std::to_string(size_));
  for (size_t i = 0; i < ins.size(); ++i) check_same(out, ins[i], true, rank_, size_, op, "input " + std::to_string(i));
  const dcclDataType_t dt = reduce_type(out, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, out, rank_, size_, op);
  return enqueue(c10d::OpType::REDUCE_SCATTER, op, {out}, bound(opts.timeout), [this, op, out, ins, dt, red] {
    const int64_t n = out.numel();
    at::Tensor flat = at::empty({n * size_}, out.options().memory_format(at::MemoryFormat::Contiguous));
    for (int i = 0; i < size_; ++i) flat.narrow(0, i * n, n).copy_(ins[static_cast<size_t>(i)].reshape({n}));
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
  check_tensor(output, rank_, size_, op);
  check_same(output, input, false, rank_, size_, op, "the input");
  if (input.numel() != output.numel() * size_)
    fail(rank_, size_, op, "the input has " + std::to_string(input.numel()) + " elements, expected group size x output = " +
                               std::to_string(output.numel() * size_));
  const dcclDataType_t dt = reduce_type(output, rank_, size_, op);
  const Reduction red = reduction(opts.reduceOp, output, rank_, size_, op);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, op, {output}, bound(opts.timeout),
                 [this, op, input, output, dt, red] {
                   Dense src(input), dst(output);
                   reduce_with(red, dt, op, [&](dcclRedOp_t r) {
                     return dcclReduceScatter(src.data(), dst.data(), dst.numel(), dt, r, comm_, nullptr);
                   });
                   dst.finish();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions& opts) {
  const std::string op = "all_to_all_single";
  check_tensor(input, rank_, size_, op);
  check_same(input, output, false, rank_, size_, op, "the output");
  const auto send = block_bytes(input, inputSplits, rank_, size_, op, "the input");
  const auto recv = block_bytes(output, outputSplits, rank_, size_, op, "the output");
  const bool even = inputSplits.empty() && outputSplits.empty() && input.nbytes() == output.nbytes();
  return enqueue(c10d::OpType::ALLTOALL_BASE, op, {output}, bound(opts.timeout),
                 [this, op, input, output, send, recv, even] {
                   Dense src(input), dst(output);
                   if (even) {
                     // DirectCCL's all-to-all: equal blocks only.
                     check(dcclAlltoAll(src.data(), dst.data(), src.bytes() / static_cast<size_t>(size_), dcclUint8,
                                        comm_, nullptr),
                           op);
                   } else {
                     std::vector<Transfer> sends, recvs;
                     size_t so = 0, ro = 0;
                     for (int p = 0; p < size_; ++p) {
                       const size_t i = static_cast<size_t>(p);
                       sends.push_back({p, static_cast<char*>(src.data()) + so, send[i]});
                       recvs.push_back({p, static_cast<char*>(dst.data()) + ro, recv[i]});
                       so += send[i];
                       ro += recv[i];
                     }
                     exchange(op, sends, recvs);
                   }
                   dst.finish();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  const std::string op = "all_to_all";
  if (inputs.size() != static_cast<size_t>(size_) || outputs.size() != static_cast<size_t>(size_))
    fail(rank_, size_, op, "expects one input and one output tensor per rank of the group (" + std::to_string(size_) +
                               "), got " + std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  check_tensor(inputs[0], rank_, size_, op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_same(inputs[0], inputs[i], false, rank_, size_, op, "input " + std::to_string(i));
    check_same(inputs[0], outputs[i], false, rank_, size_, op, "output " + std::to_string(i));
  }
  return enqueue(c10d::OpType::ALLTOALL, op, outputs, bound(opts.timeout), [this, op, inputs, outputs] {
    std::vector<Dense> src, dst;
    std::vector<Transfer> sends, recvs;
    for (int p = 0; p < size_; ++p) {
      src.emplace_back(inputs[static_cast<size_t>(p)]);
      dst.emplace_back(outputs[static_cast<size_t>(p)]);
    }
    for (int p = 0; p < size_; ++p) {
      const size_t i = static_cast<size_t>(p);
      sends.push_back({p, src[i].data(), src[i].bytes()});
      recvs.push_back({p, dst[i].data(), dst[i].bytes()});
    }
    exchange(op, sends, recvs);
    for (auto& d : dst) d.finish();
  });
}

}  // namespace torch_dccl
