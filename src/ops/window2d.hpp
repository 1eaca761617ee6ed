// src/ops/window2d.hpp — helpers shared by conv2d (conv.cpp) and the 2-D pools (pool.cpp):
// "(h, w)" formatting for errors, the window geometry, the batch-chunk view of a contiguous
// NCHW tensor, the unbatched-input wrapper ([C, H, W] runs as a batch of one, as PyTorch), and
// the adaptive pools' windows (conv_nd.cpp, pool3d.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ops/common.hpp"

namespace ember::ops {

/// "(3, 3)", as PyTorch prints a pair in its errors.
inline std::string pair_string(Size2d s) {
  return "(" + std::to_string(s.h) + ", " + std::to_string(s.w) + ")";
}
inline std::string pair_string(int64_t h, int64_t w) { return pair_string(Size2d(h, w)); }

/// The geometry of a window over an input [batch, channels, height, width]; the caller sets
/// out_h and out_w.
inline backend::Window2d make_window(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                     Size2d kernel, Size2d stride, Size2d padding,
                                     Size2d dilation) {
  backend::Window2d w;
  w.batch = batch;
  w.channels = channels;
  w.height = height;
  w.width = width;
  w.kernel_h = kernel.h;
  w.kernel_w = kernel.w;
  w.stride_h = stride.h;
  w.stride_w = stride.w;
  w.pad_h = padding.h;
  w.pad_w = padding.w;
  w.dilation_h = dilation.h;
  w.dilation_w = dilation.w;
  return w;
}

/// A view of `t`'s memory from element `offset` (counted from t's first element) on.
inline backend::View sub_view(const Tensor& t, int64_t offset, const Shape& shape,
                              const Shape& strides) {
  return {static_cast<char*>(t.data_ptr()) + offset * static_cast<int64_t>(element_size(t.dtype())),
          t.dtype(), t.device().index, shape, strides};
}

/// Images [n0, n0 + count) of a contiguous [N, ...] tensor, as a backend view.
inline backend::View batch_chunk(const Tensor& t, int64_t n0, int64_t count) {
  const int64_t per_image = t.shape()[0] == 0 ? 0 : t.numel() / t.shape()[0];
  backend::View v;
  v.data = static_cast<char*>(t.data_ptr()) +
           n0 * per_image * static_cast<int64_t>(element_size(t.dtype()));
  v.dtype = t.dtype();
  v.device = t.device().index;
  v.shape = t.shape();
  v.shape[0] = count;
  v.strides = contiguous_strides(v.shape);
  return v;
}

/// Runs `fn` on a 4-D input: a 3-D [C, H, W] input runs as [1, C, H, W] and the result loses
/// the batch dim again. Other ranks are refused with an error naming `op` and the shape.
inline Tensor with_batch_dim(const char* op, const Tensor& x,
                             const std::function<Tensor(const Tensor&)>& fn) {
  check_defined(op, x);
  EMBER_CHECK(x.dim() == 3 || x.dim() == 4, op, ": input shape ", x.shape().to_string(),
              " (expected 4-D [N, C, H, W] or 3-D [C, H, W])");
  if (x.dim() == 4) return fn(x);
  return fn(x.unsqueeze(0)).squeeze(0);
}

/// A pool's output length along one dim, as PyTorch (floor division; with ceil_mode the last
/// window must start inside the input or its left padding).
inline int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                             bool ceil_mode) {
  const int64_t a = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  const int64_t floor_div = a / stride - ((a % stride != 0) && ((a < 0) != (stride < 0)));
  int64_t out = floor_div + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

/// PyTorch's adaptive windows: cell i of `out` covers [adaptive_start(i), adaptive_end(i)) of
/// `in` (the adaptive pools of conv_nd.cpp and pool3d.cpp).
inline int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
inline int64_t adaptive_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

/// A [out, in] matrix of like's dtype on like's device whose row i averages adaptive window i.
inline Tensor adaptive_average_matrix(int64_t in, int64_t out, const Tensor& like) {
  std::vector<double> a(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t s = adaptive_start(i, in, out), e = adaptive_end(i, in, out);
    for (int64_t j = s; j < e; ++j) a[static_cast<size_t>(i * in + j)] = 1.0 / double(e - s);
  }
  return from_vector<double>(a, {out, in}).to(like.dtype()).to(like.device());
}

}  // namespace ember::ops
