// src/ops/softmax.cpp — softmax and log_softmax over one dim, forward and backward through the
// backend's fused kernels (src/cpu/softmax.cpp, src/cuda/softmax.cu): f32/f64, and f16/bf16
// computed in f32 and rounded once (Note [16-bit softmax] in src/kernels/softmax.hpp).
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {
Tensor softmax_impl(Op op, const Tensor& x, int64_t dim) {
  if (const auto c = ops::autocast(op, {&x})) return softmax_impl(op, c[0], dim);
  const bool log = op == Op::log_softmax;
  const ops::OpScope op_scope(op, x);
  ops::check_supported(op, x);
  const char* name = op_name(op);
  const int d = wrap_dim(dim, x.dim(), name);
  Tensor xc = x.contiguous();
  Tensor out = ops::make_tensor(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) {
    // Nothing to compute, but still recorded: an empty result of an input that requires grad
    // requires grad too (a later backward must reach the input).
  } else if (x.dim() == 0) {
    ops::backend_of(x).fill(ops::view_of(out), log ? 0.0 : 1.0);
  } else {
    ops::backend_of(x).softmax(ops::view_of(out), ops::view_of(xc), d, log);
  }
  if (autograd::needs_grad(x))
    autograd::record(op, out, {&x}, [d, log, so = SavedTensor(out)](const Tensor& g, GradList& gi) {
      Tensor y = so.get();
      Tensor gc = ops::cast_to(g, y.dtype()).contiguous();  // a root's grad may differ
      Tensor gin = ops::make_tensor(y.shape(), y.dtype(), y.device());
      if (y.numel() == 0) {
        // empty: nothing to write
      } else if (y.dim() == 0) {
        ops::backend_of(y).fill(ops::view_of(gin), 0.0);
      } else {
        ops::backend_of(y).softmax_backward(ops::view_of(gin), ops::view_of(gc), ops::view_of(y), d,
                                            log);
      }
      gi[0] = gin;
    });
  return out;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(Op::softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(Op::log_softmax, x, dim); }

}  // namespace ember
