// src/ops/pool.cpp — max_pool2d and avg_pool2d: PyTorch's shape rules and checks, forward
// through the backend pool kernels, backward (max: to the argmax kept from the forward;
// avg: spread over each window with the forward's divisor).
//
// Output size (torch's pooling_output_shape), per spatial dim:
//   out = floor((in + 2·pad - dilation·(k - 1) - 1 + (ceil_mode ? stride - 1 : 0)) / stride) + 1
//   and with ceil_mode, one less when the last window would start past in + pad.
#include "ops/window2d.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                      bool ceil_mode) {
  int64_t out =
      floor_div(in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

backend::Window2d plan_pool(const char* op, const Tensor& x, Size2d kernel,
                            std::optional<Size2d> stride_opt, Size2d padding, Size2d dilation,
                            bool ceil_mode) {
  ops::check_float(op, x);
  const Size2d stride = stride_opt.value_or(kernel);
  EMBER_CHECK(kernel.h >= 1 && kernel.w >= 1, op, ": kernel size ", ops::pair_string(kernel),
              " (expected every kernel size >= 1)");
  EMBER_CHECK(stride.h >= 1 && stride.w >= 1, op, ": stride ", ops::pair_string(stride),
              " (expected every stride >= 1)");
  EMBER_CHECK(dilation.h >= 1 && dilation.w >= 1, op, ": dilation ", ops::pair_string(dilation),
              " (expected every dilation >= 1)");
  EMBER_CHECK(
      padding.h >= 0 && padding.w >= 0 && padding.h <= kernel.h / 2 && padding.w <= kernel.w / 2,
      op, ": padding ", ops::pair_string(padding),
      " (expected 0 <= padding <= half the kernel size ", ops::pair_string(kernel), ")");
  backend::Window2d w;
  w.batch = x.shape()[0];
  w.channels = x.shape()[1];
  w.height = x.shape()[2];
  w.width = x.shape()[3];
  w.kernel_h = kernel.h;
  w.kernel_w = kernel.w;
  w.stride_h = stride.h;
  w.stride_w = stride.w;
  w.pad_h = padding.h;
  w.pad_w = padding.w;
  w.dilation_h = dilation.h;
  w.dilation_w = dilation.w;
  w.out_h = pool_out_size(w.height, kernel.h, padding.h, stride.h, dilation.h, ceil_mode);
  w.out_w = pool_out_size(w.width, kernel.w, padding.w, stride.w, dilation.w, ceil_mode);
  EMBER_CHECK(w.out_h >= 1 && w.out_w >= 1, op, ": output size ",
              ops::pair_string(w.out_h, w.out_w), " is too small (input shape ",
              x.shape().to_string(), ", kernel size ", ops::pair_string(kernel), ", stride ",
              ops::pair_string(stride), ", padding ", ops::pair_string(padding), ", dilation ",
              ops::pair_string(dilation), "; expected an output of at least (1, 1))");
  return w;
}

std::pair<Tensor, Tensor> max_pool2d_4d(const Tensor& x, Size2d kernel,
                                        std::optional<Size2d> stride, Size2d padding,
                                        Size2d dilation, bool ceil_mode) {
  const backend::Window2d w =
      plan_pool("max_pool2d", x, kernel, stride, padding, dilation, ceil_mode);
  const Shape out_shape{w.batch, w.channels, w.out_h, w.out_w};
  Tensor out = ops::make_tensor(out_shape, x.dtype(), x.device());
  Tensor indices = ops::make_tensor(out_shape, DType::i64, x.device());
  {
    NoGradGuard no_grad;
    Tensor xc = x.contiguous();
    if (out.numel() > 0)
      ops::backend_of(x).max_pool2d(w, ops::view_of(out), ops::view_of(indices), ops::view_of(xc));
  }
  if (autograd::needs_grad(x))
    autograd::record(
        "max_pool2d", out, {&x}, [w, si = SavedTensor(indices)](const Tensor& g, GradList& gi) {
          Tensor gc = g.contiguous();
          Tensor grad =
              ops::make_tensor({w.batch, w.channels, w.height, w.width}, g.dtype(), g.device());
          if (gc.numel() > 0) {
            ops::backend_of(g).max_pool2d_backward(w, ops::view_of(grad), ops::view_of(gc),
                                                   ops::view_of(si.get()));
          } else {
            ops::backend_of(g).fill(ops::view_of(grad), 0.0);
          }
          gi[0] = grad;
        });
  return {out, indices};
}

Tensor avg_pool2d_4d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride, Size2d padding,
                     bool ceil_mode, bool count_include_pad) {
  const backend::Window2d w = plan_pool("avg_pool2d", x, kernel, stride, padding, 1, ceil_mode);
  Tensor out = ops::make_tensor({w.batch, w.channels, w.out_h, w.out_w}, x.dtype(), x.device());
  {
    NoGradGuard no_grad;
    Tensor xc = x.contiguous();
    if (out.numel() > 0)
      ops::backend_of(x).avg_pool2d(w, ops::view_of(out), ops::view_of(xc), count_include_pad);
  }
  if (autograd::needs_grad(x))
    autograd::record(
        "avg_pool2d", out, {&x}, [w, count_include_pad](const Tensor& g, GradList& gi) {
          Tensor gc = g.contiguous();
          Tensor grad =
              ops::make_tensor({w.batch, w.channels, w.height, w.width}, g.dtype(), g.device());
          if (gc.numel() > 0) {
            ops::backend_of(g).avg_pool2d_backward(w, ops::view_of(grad), ops::view_of(gc),
                                                   count_include_pad);
          } else {
            ops::backend_of(g).fill(ops::view_of(grad), 0.0);
          }
          gi[0] = grad;
        });
  return out;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2d kernel,
                                                  std::optional<Size2d> stride, Size2d padding,
                                                  Size2d dilation, bool ceil_mode) {
  Tensor indices;
  Tensor out = ops::with_batch_dim("max_pool2d", x, [&](const Tensor& x4) {
    auto [o, i] = max_pool2d_4d(x4, kernel, stride, padding, dilation, ceil_mode);
    indices = x.dim() == 3 ? i.squeeze(0) : i;
    return o;
  });
  return {out, indices};
}

Tensor max_pool2d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride, Size2d padding,
                  Size2d dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride, Size2d padding,
                  bool ceil_mode, bool count_include_pad) {
  return ops::with_batch_dim("avg_pool2d", x, [&](const Tensor& x4) {
    return avg_pool2d_4d(x4, kernel, stride, padding, ceil_mode, count_include_pad);
  });
}

}  // namespace ember
