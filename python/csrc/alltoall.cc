// ProcessGroupDCCL's all_to_all, in its list and single-tensor forms (equal or
// uneven blocks along dimension 0).
#include "process_group.hpp"

#include "errors.hpp"

namespace torch_dccl {

namespace {

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

c10::intrusive_ptr<c10d::Work> ProcessGroupDCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions& opts) {
  const std::string op = "all_to_all_single";
  const Place place = check_tensor(input, rank_, size_, op);
  check_same(input, output, false, rank_, size_, op, "the output");
  const auto send = block_bytes(input, inputSplits, rank_, size_, op, "the input");
  const auto recv = block_bytes(output, outputSplits, rank_, size_, op, "the output");
  const bool even = inputSplits.empty() && outputSplits.empty() && input.nbytes() == output.nbytes();
  // The ranks agree on the dtype and the row's length (from the shape: a rank may
  // send no rows at all); the splits differ by rank.
  int64_t row = 1;
  for (int64_t d = 1; d < input.dim(); ++d) row *= input.size(d);
  const Call call{c10d::OpType::ALLTOALL_BASE, input.scalar_type(), row, even ? 1 : 0};
  return enqueue(c10d::OpType::ALLTOALL_BASE, op, {output}, bound(opts.timeout), place, call,
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
  const Place place = check_tensor(inputs[0], rank_, size_, op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_same(inputs[0], inputs[i], false, rank_, size_, op, "input " + std::to_string(i));
    check_same(inputs[0], outputs[i], false, rank_, size_, op, "output " + std::to_string(i));
  }
  const Call call{c10d::OpType::ALLTOALL, inputs[0].scalar_type(), -1};
  return enqueue(c10d::OpType::ALLTOALL, op, outputs, bound(opts.timeout), place, call, [this, op, inputs, outputs] {
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
