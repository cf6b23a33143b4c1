// Tensors as DirectCCL sees them: checks on the caller's thread, the device a
// call runs on, dtype and reduction mapping, and contiguous buffers.
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <dccl/dccl.h>

namespace torch_dccl {

// Where a call's tensors live: every tensor of one call on the same device.
struct Place {
  bool cuda = false;
  int device = -1;  // the CUDA device index
};

// True when this build takes CUDA tensors (TORCH_DCCL_CUDA).
bool cuda_built();

// Throws unless t is a defined, strided tensor on the CPU or (CUDA builds) a
// contiguous CUDA tensor; returns its place.
Place check_tensor(const at::Tensor& t, int rank, int size, const std::string& op);
// Throws unless the list holds exactly one tensor (one device per process).
const at::Tensor& single(const std::vector<at::Tensor>& ts, int rank, int size, const std::string& op);
// Throws unless b is on a's device with a's dtype (and, when same_numel, element count).
void check_same(const at::Tensor& a, const at::Tensor& b, bool same_numel, int rank, int size,
                const std::string& op, const std::string& what);
std::string dtype_name(at::ScalarType t);

// DirectCCL type of a tensor's dtype for reductions; throws naming rank, op and dtype.
dcclDataType_t reduce_type(const at::Tensor& t, int rank, int size, const std::string& op);
// A reduction as the worker runs it: DirectCCL's op, or for PREMUL_SUM its
// factor, which the worker turns into a DirectCCL PreMulSum op around the call.
struct Reduction {
  dcclRedOp_t op = dcclSum;
  bool premul = false;
  double factor = 1.0;
  at::ScalarType dtype = at::kFloat;  // the tensors', for the factor's representation
  int code = 0;                       // c10d::ReduceOp's, for the ranks' agreement check
};
// The reduction for a PyTorch ReduceOp on dtype t; throws for BAND, BOR, BXOR,
// for sums of bool and for PREMUL_SUM on a dtype that is not floating point.
Reduction reduction(const c10d::ReduceOp& op, const at::Tensor& t, int rank, int size, const std::string& name);

// A contiguous view of a tensor for DirectCCL: the tensor itself when it is
// contiguous, else a contiguous copy, written back by finish() for outputs.
class Dense {
 public:
  explicit Dense(const at::Tensor& t);
  void* data() const { return buf_.data_ptr(); }
  size_t bytes() const { return buf_.nbytes(); }
  size_t numel() const { return static_cast<size_t>(buf_.numel()); }
  const at::Tensor& tensor() const { return buf_; }
  void finish();  // copies the contiguous buffer back into a non-contiguous output

 private:
  at::Tensor orig_;
  at::Tensor buf_;
};

}  // namespace torch_dccl
