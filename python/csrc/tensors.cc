// Tensor checks, per-device placement, dtype and reduction mapping.
#include "tensors.hpp"

#include "errors.hpp"

namespace torch_dccl {

bool cuda_built() {
#ifdef TORCH_DCCL_CUDA
  return true;
#else
  return false;
#endif
}

std::string dtype_name(at::ScalarType t) { return std::string(c10::toString(t)); }

dcclDataType_t reduce_type(const at::Tensor& t, int rank, int size, const std::string& op) {
  switch (t.scalar_type()) {
    case at::kChar: return dcclInt8;
    case at::kByte: return dcclUint8;
    case at::kBool: return dcclUint8;  // 0/1 bytes; reduction() allows MIN, MAX and PRODUCT only
    case at::kInt: return dcclInt32;
    case at::kLong: return dcclInt64;
    case at::kHalf: return dcclFloat16;
    case at::kFloat: return dcclFloat32;
    case at::kDouble: return dcclFloat64;
    case at::kBFloat16: return dcclBfloat16;
    default:
      fail(rank, size, op,
           "dtype " + dtype_name(t.scalar_type()) +
               " cannot be reduced by DirectCCL (reductions take int8, uint8, int32, int64, float16, "
               "bfloat16, float32, float64, and bool with MIN, MAX or PRODUCT)");
  }
}

Reduction reduction(const c10d::ReduceOp& op, const at::Tensor& t, int rank, int size, const std::string& name) {
  const bool is_bool = t.scalar_type() == at::kBool;
  const std::string known = " (DirectCCL reduces with SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM)";
  Reduction r;
  r.code = static_cast<int>(op.op_);
  r.dtype = t.scalar_type();
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      if (is_bool) fail(rank, size, name, "SUM of bool tensors is refused (a sum over ranks leaves bool's 0/1 range); MAX is a logical or, MIN a logical and");
      r.op = dcclSum;
      return r;
    case c10d::ReduceOp::AVG:
      if (is_bool) fail(rank, size, name, "AVG of bool tensors is refused (MAX is a logical or, MIN a logical and)");
      r.op = dcclAvg;
      return r;
    case c10d::ReduceOp::PRODUCT: r.op = dcclProd; return r;
    case c10d::ReduceOp::MIN: r.op = dcclMin; return r;
    case c10d::ReduceOp::MAX: r.op = dcclMax; return r;
    case c10d::ReduceOp::PREMUL_SUM: {
      if (!t.is_floating_point())
        fail(rank, size, name, "PREMUL_SUM takes floating-point tensors (its factor is a float), not " + dtype_name(t.scalar_type()));
      const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (!s) fail(rank, size, name, "ReduceOp.PREMUL_SUM came without its factor (make it with _make_nccl_premul_sum)");
      r.premul = true;
      r.factor = s->double_factor;
      if (s->tensor_factor.defined()) {
        if (s->tensor_factor.numel() != 1) fail(rank, size, name, "PREMUL_SUM's factor tensor must have one element");
        r.factor = s->tensor_factor.item<double>();  // read when the call is made
      }
      return r;
    }
    case c10d::ReduceOp::BAND: fail(rank, size, name, "ReduceOp.BAND is not supported" + known);
    case c10d::ReduceOp::BOR: fail(rank, size, name, "ReduceOp.BOR is not supported" + known);
    case c10d::ReduceOp::BXOR: fail(rank, size, name, "ReduceOp.BXOR is not supported" + known);
    default: fail(rank, size, name, "unknown ReduceOp " + std::to_string(static_cast<int>(op.op_)));
  }
}

Place check_tensor(const at::Tensor& t, int rank, int size, const std::string& op) {
  if (!t.defined()) fail(rank, size, op, "undefined tensor");
  if (t.layout() != at::kStrided) fail(rank, size, op, "sparse or other non-strided tensors are not supported");
  const auto& d = t.device();
  if (d.is_cpu()) return {};
  if (d.is_cuda()) {
    if (!cuda_built())
      fail(rank, size, op, "tensor on " + d.str() + ": this torch_dccl was built without CUDA (configure with "
                           "DCCL_CUDA=ON and a PyTorch with CUDA); it takes CPU tensors only");
    if (!t.is_contiguous())
      fail(rank, size, op, "CUDA tensors must be contiguous (as with NCCL); call .contiguous() first");
    return {true, d.index()};
  }
  fail(rank, size, op, "tensor on " + d.str() + ": the dccl backend takes cpu" +
                           std::string(cuda_built() ? " and cuda" : "") + " tensors, not " +
                           c10::DeviceTypeName(d.type(), true));
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, int rank, int size, const std::string& op) {
  if (ts.size() != 1)
    fail(rank, size, op, "expects exactly one tensor per process, got " + std::to_string(ts.size()));
  check_tensor(ts[0], rank, size, op);
  return ts[0];
}

void check_same(const at::Tensor& a, const at::Tensor& b, bool same_numel, int rank, int size,
                const std::string& op, const std::string& what) {
  check_tensor(b, rank, size, op);
  if (a.device() != b.device())
    fail(rank, size, op, what + " is on " + b.device().str() + ", the input on " + a.device().str());
  if (a.scalar_type() != b.scalar_type())
    fail(rank, size, op, what + " has dtype " + dtype_name(b.scalar_type()) + ", the input " + dtype_name(a.scalar_type()));
  if (same_numel && a.numel() != b.numel())
    fail(rank, size, op,
         what + " has " + std::to_string(b.numel()) + " elements, the input " + std::to_string(a.numel()));
}

Dense::Dense(const at::Tensor& t) : orig_(t), buf_(t.is_contiguous() ? t : t.contiguous()) {}

void Dense::finish() {
  if (!buf_.is_same(orig_)) orig_.copy_(buf_);
}

}  // namespace torch_dccl
