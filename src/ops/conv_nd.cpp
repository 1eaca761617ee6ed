// src/ops/conv_nd.cpp — the rest of the conv family: conv1d and conv3d, "same" /
// "valid" paddings, conv_transpose1d, the 1-D pools, adaptive pools, interpolate, and the
// F.unfold / F.fold pair (im2col, col2im).
//
// Most of these are composites of primitives that already exist, so their gradients come
// from those primitives (STYLE §2):
//   conv1d, conv_transpose1d, max_pool1d, avg_pool1d  the 2-D ops over a unit height
//   conv3d               one conv2d per kernel depth over the depth slices it reads, summed
//                        (Note [conv3d as conv2d per kernel depth])
//   adaptive_avg_pool*   two matrix products with the averaging matrices A_h [oh, H] and
//                        A_w [ow, W]: out = A_h · x · A_wᵀ (exact: each row holds 1/count over
//                        the window PyTorch's start/end formulas give)
//   adaptive_max_pool*   a gather of each window (short windows repeat their last cell, which
//                        changes neither the max nor its index) and max over the window
//   interpolate          per spatial dim, index_select of the source rows; linear modes mix
//                        two of them with PyTorch's weights (Note [interpolate's source index])
// im2col and col2im are primitives over the im2col / col2im slots, each the other's gradient.
//
// Shape letters: N batch, C channels, L length, D×H×W input, oD×oh×ow output, k kernel.
#include <array>
#include <cmath>

#include "ops/conv_library.hpp"
#include "ops/window2d.hpp"

namespace ember {

using autograd::GradList;

namespace {

// x with a unit dim inserted before its last one ([N, C, L] -> [N, C, 1, L]), and back.
Tensor add_unit_height(const Tensor& x) { return x.unsqueeze(x.dim() - 1); }
Tensor drop_unit_height(const Tensor& y) { return y.squeeze(y.dim() - 2); }

// Refuses an input whose rank is not `spatial` + 2 (batched) or `spatial` + 1 (unbatched).
void check_rank(const char* op, const Tensor& x, int64_t spatial, const char* layout) {
  ops::check_defined(op, x);
  EMBER_CHECK(x.dim() == spatial + 2 || x.dim() == spatial + 1, op, ": input shape ",
              x.shape().to_string(), " (expected ", spatial + 2, "-D [N, C, ", layout, "] or ",
              spatial + 1, "-D [C, ", layout, "])");
}

// The weight checks of a convolution over `spatial` dims (layout as in the error).
void check_conv_weight(const char* op, const Tensor& x, const Tensor& weight, int64_t spatial,
                       int64_t groups, bool transposed) {
  ops::check_defined(op, weight, "weight");
  EMBER_CHECK(weight.dim() == spatial + 2, op, ": weight shape ", weight.shape().to_string(),
              " (expected ", spatial + 2, "-D ",
              transposed ? "[in_channels, out_channels/groups, k...]"
                         : "[out_channels, in_channels/groups, k...]",
              ")");
  EMBER_CHECK(groups >= 1, op, ": groups ", groups, " (expected >= 1)");
  const Shape& ws = weight.shape();
  const int64_t c = x.shape()[x.dim() - spatial - 1];
  if (transposed) {
    EMBER_CHECK(ws[0] % groups == 0, op, ": in_channels ", ws[0], " is not divisible by groups ",
                groups, " (weight shape ", ws.to_string(), ")");
    EMBER_CHECK(c == ws[0], op, ": input has ", c, " channels, expected ", ws[0], " (weight shape ",
                ws.to_string(), ")");
  } else {
    EMBER_CHECK(ws[0] % groups == 0, op, ": out_channels ", ws[0], " is not divisible by groups ",
                groups, " (weight shape ", ws.to_string(), ")");
    EMBER_CHECK(c == ws[1] * groups, op, ": input has ", c, " channels, expected ", ws[1] * groups,
                " (weight shape ", ws.to_string(), ", groups ", groups, ")");
  }
}

// "same" padding of one dim: the total dilation·(k - 1), split with the odd one after.
struct SamePad {
  int64_t both = 0, extra_after = 0;
};
SamePad same_pad(int64_t kernel, int64_t dilation) {
  const int64_t total = dilation * (kernel - 1);
  return {total / 2, total % 2};
}

// The checks conv1d, conv3d and conv_transpose1d start with: rank, dtype and device, weight.
void check_conv(Op which, const Tensor& x, const Tensor& weight, int64_t spatial,
                const char* layout, int64_t groups, bool transposed = false) {
  const char* op = op_name(which);
  check_rank(op, x, spatial, layout);
  const ops::OpScope op_scope(which, x);
  ops::check_supported(which, x);
  check_conv_weight(op, x, weight, spatial, groups, transposed);
}

// conv1d and conv_transpose1d run as their 2-D forms over a unit height: every argument the
// 2-D check would refuse is refused here first, in 1-D terms (the user's shapes and numbers).
void check_conv1d_args(Op which, const Tensor& x, const Tensor& weight, const Tensor& bias,
                       int64_t stride, int64_t padding, int64_t dilation, int64_t groups,
                       bool transposed) {
  const char* op = op_name(which);
  EMBER_CHECK(stride >= 1, op, ": stride ", stride, " (expected >= 1)");
  EMBER_CHECK(dilation >= 1, op, ": dilation ", dilation, " (expected >= 1)");
  EMBER_CHECK(padding >= 0, op, ": padding ", padding, " (expected >= 0)");
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  if (bias.defined())
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == out_channels, op, ": bias shape ",
                bias.shape().to_string(), " (expected [", out_channels,
                "], one per output channel)");
  if (transposed) return;  // its output length is checked with output_padding by the caller
  const int64_t length = x.size(-1), k = weight.size(2), span = dilation * (k - 1) + 1;
  EMBER_CHECK(span <= length + 2 * padding, op, ": kernel size ", k,
              dilation > 1 ? detail::concat(" (", span, " with dilation ", dilation, ")") : "",
              " is larger than the input length ", length,
              padding ? detail::concat(" padded to ", length + 2 * padding) : "", " (input shape ",
              x.shape().to_string(), ", weight shape ", weight.shape().to_string(), ")");
}

void check_same_stride(const char* op, bool unit_stride) {
  EMBER_CHECK(unit_stride, op,
              ": padding 'same' needs stride 1 (as PyTorch; got a larger stride, expected 1)");
}

}  // namespace

// ---- conv1d, conv3d, string paddings ----

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  const ops::UserOp user(Op::conv1d, {&x, &weight, &bias});
  check_conv(Op::conv1d, x, weight, 1, "L", groups);
  check_conv1d_args(Op::conv1d, x, weight, bias, stride, padding, dilation, groups, false);
  return drop_unit_height(conv2d(add_unit_height(x), weight.unsqueeze(2), bias, Size2d(1, stride),
                                 Size2d(0, padding), Size2d(1, dilation), groups));
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              ConvPadding padding, int64_t dilation, int64_t groups) {
  const ops::UserOp user(Op::conv1d, {&x, &weight, &bias});
  check_conv(Op::conv1d, x, weight, 1, "L", groups);
  if (padding == ConvPadding::valid) return conv1d(x, weight, bias, stride, 0, dilation, groups);
  check_same_stride(op_name(Op::conv1d), stride == 1);
  const SamePad p = same_pad(weight.shape()[2], dilation);
  const Tensor xp = p.extra_after ? pad(x, {0, 1}) : x;
  return conv1d(xp, weight, bias, stride, p.both, dilation, groups);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2d stride,
              ConvPadding padding, Size2d dilation, int64_t groups) {
  const char* op = op_name(Op::conv2d);
  check_rank(op, x, 2, "H, W");
  check_conv_weight(op, x, weight, 2, groups, false);
  if (padding == ConvPadding::valid) return conv2d(x, weight, bias, stride, 0, dilation, groups);
  check_same_stride(op, stride == Size2d(1));
  const SamePad ph = same_pad(weight.shape()[2], dilation.h);
  const SamePad pw = same_pad(weight.shape()[3], dilation.w);
  const Tensor xp =
      ph.extra_after || pw.extra_after ? pad(x, {0, pw.extra_after, 0, ph.extra_after}) : x;
  return conv2d(xp, weight, bias, stride, Size2d(ph.both, pw.both), dilation, groups);
}

// Note [conv3d as conv2d per kernel depth]
// Output depth slice od reads input depths od·sd + a·dd (a < kd) of the depth-padded input.
// For one kernel depth a those are one strided slice xs_a [N, C, oD, H, W]; folding oD into
// the batch, conv2d(xs_a, W[:, :, a]) gives kernel depth a's share of every output slice, and
// the output is the sum over a. kd conv2d calls, each over N·oD images; zero padding of H and
// W is conv2d's, the depth padding an explicit pad. This is conv3d's im2col path; the library
// path (Note [Which convolution path runs] in conv_library.cpp) is tried first.
namespace {

// conv3d without bias over a 5-D x whose arguments are checked; od: the output depth.
Tensor conv3d_composite(const Tensor& x, const Tensor& weight, Size3d stride, Size3d padding,
                        Size3d dilation, int64_t groups, int64_t od) {
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[3], w = x.shape()[4];
  const int64_t o = weight.shape()[0], kd = weight.shape()[2];
  const Tensor xp = padding.d > 0 ? pad(x, {0, 0, 0, 0, padding.d, padding.d}) : x;
  Tensor acc;
  for (int64_t a = 0; a < kd; ++a) {
    const int64_t start = a * dilation.d;
    Tensor xs = xp.slice(2, start, start + (od - 1) * stride.d + 1, stride.d)
                    .permute({0, 2, 1, 3, 4})
                    .reshape({n * od, c, h, w});
    Tensor y = conv2d(xs, weight.select(2, a), Tensor(), Size2d(stride.h, stride.w),
                      Size2d(padding.h, padding.w), Size2d(dilation.h, dilation.w), groups);
    acc = acc.defined() ? acc + y : y;
  }
  return acc.reshape({n, od, o, acc.shape()[2], acc.shape()[3]}).permute({0, 2, 1, 3, 4});
}

// conv3d through the device's library (Note [Which convolution path runs]); undefined when it
// declines, or when an argument is one the composite path reports (dtypes, devices, sizes).
Tensor conv3d_library(const Tensor& x, const Tensor& weight, const Tensor& bias, Size3d stride,
                      Size3d padding, Size3d dilation, int64_t groups, int64_t od) {
  const bool same = weight.dtype() == x.dtype() && weight.device() == x.device() &&
                    (!bias.defined() || (bias.dtype() == x.dtype() && bias.device() == x.device()));
  const int64_t s[] = {stride.d, stride.h, stride.w}, p[] = {padding.d, padding.h, padding.w},
                d[] = {dilation.d, dilation.h, dilation.w};
  backend::ConvGeometry g;
  g.dtype = x.dtype();
  g.device = x.device().index;
  g.spatial = 3;
  g.batch = x.size(0);
  g.in_channels = x.size(1);
  g.out_channels = weight.size(0);
  g.groups = groups;
  for (int i = 0; i < 3; ++i) {
    g.input[i] = x.size(i + 2);
    g.kernel[i] = weight.size(i + 2);
    g.stride[i] = s[i];
    g.padding[i] = p[i];
    g.dilation[i] = d[i];
    const int64_t span = d[i] * (g.kernel[i] - 1) + 1, padded = g.input[i] + 2 * p[i];
    if (g.kernel[i] < 1 || span > padded) return Tensor();
    g.output[i] = (padded - span) / s[i] + 1;
  }
  if (!same || g.output[0] != od) return Tensor();
  // Note [Memory formats]: channels_last_3d operands run the library NDHWC.
  const MemoryFormat format = ops::conv_memory_format(x, weight);
  g.channels_last = format != MemoryFormat::contiguous;
  Tensor xc, wc;
  {
    NoGradGuard no_grad;
    xc = x.contiguous(format);
    wc = weight.contiguous(format);
  }
  return ops::conv_through_library(
      {.op = Op::conv3d,
       .geo = g,
       .x = &x,
       .weight = &weight,
       .bias = &bias,
       .xc = xc,
       .wc = wc,
       .out_shape = {g.batch, g.out_channels, g.output[0], g.output[1], g.output[2]}},
      [=, xshape = x.shape(), wshape = weight.shape()](const Tensor& gr, const Tensor& xs,
                                                       const Tensor& ws, bool nx, bool nw) {
        // The node keeps x only for the weight's gradient and the weight only for x's.
        return ops::composite_conv_grads(
            gr, xs, xshape, ws, wshape, nx, nw, [&](const Tensor& xd, const Tensor& wd) {
              return conv3d_composite(xd, wd, stride, padding, dilation, groups, gr.shape()[2]);
            });
      });
}

}  // namespace

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size3d stride,
              Size3d padding, Size3d dilation, int64_t groups) {
  const ops::UserOp user(Op::conv3d, {&x, &weight, &bias});
  if (const auto c = ops::autocast(Op::conv3d, {&x, &weight, &bias}))
    return conv3d(c[0], c[1], c[2], stride, padding, dilation, groups);
  const char* op = op_name(Op::conv3d);
  check_conv(Op::conv3d, x, weight, 3, "D, H, W", groups);
  if (x.dim() == 4)
    return conv3d(x.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  EMBER_CHECK(stride.d >= 1 && stride.h >= 1 && stride.w >= 1 && dilation.d >= 1 &&
                  dilation.h >= 1 && dilation.w >= 1 && padding.d >= 0 && padding.h >= 0 &&
                  padding.w >= 0,
              op, ": stride (", stride.d, ", ", stride.h, ", ", stride.w, "), padding (", padding.d,
              ", ", padding.h, ", ", padding.w, "), dilation (", dilation.d, ", ", dilation.h, ", ",
              dilation.w, ") (expected strides and dilations >= 1, paddings >= 0)");
  const Shape& ws = weight.shape();
  const int64_t o = ws[0], kd = ws[2];
  const int64_t depth = x.shape()[2] + 2 * padding.d, eff_d = dilation.d * (kd - 1) + 1;
  EMBER_CHECK(kd >= 1 && eff_d <= depth, op, ": kernel depth ", kd, " (dilated ", eff_d,
              ") is larger than the padded input depth ", depth, " (input shape ",
              x.shape().to_string(), ")");
  const int64_t od = (depth - eff_d) / stride.d + 1;
  if (bias.defined())
    EMBER_CHECK(bias.dim() == 1 && bias.shape()[0] == o, op, ": bias shape ",
                bias.shape().to_string(), " (expected [", o, "] for weight shape ", ws.to_string(),
                ")");
  if (Tensor y = conv3d_library(x, weight, bias, stride, padding, dilation, groups, od);
      y.defined())
    return y;
  Tensor out = conv3d_composite(x, weight, stride, padding, dilation, groups, od);
  if (bias.defined()) out = out + bias.reshape({1, o, 1, 1, 1});
  // Note [Memory formats]: a channels_last_3d convolution's output is channels_last_3d.
  const MemoryFormat format = ops::conv_memory_format(x, weight);
  return format == MemoryFormat::contiguous ? out.contiguous() : out.contiguous(format);
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size3d stride,
              ConvPadding padding, Size3d dilation, int64_t groups) {
  const ops::UserOp user(Op::conv3d, {&x, &weight, &bias});
  const char* op = op_name(Op::conv3d);
  check_conv(Op::conv3d, x, weight, 3, "D, H, W", groups);
  if (padding == ConvPadding::valid) return conv3d(x, weight, bias, stride, 0, dilation, groups);
  check_same_stride(op, stride == Size3d(1));
  const SamePad pd = same_pad(weight.shape()[2], dilation.d);
  const SamePad ph = same_pad(weight.shape()[3], dilation.h);
  const SamePad pw = same_pad(weight.shape()[4], dilation.w);
  const Tensor xp = pd.extra_after || ph.extra_after || pw.extra_after
                        ? pad(x, {0, pw.extra_after, 0, ph.extra_after, 0, pd.extra_after})
                        : x;
  return conv3d(xp, weight, bias, stride, Size3d(pd.both, ph.both, pw.both), dilation, groups);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                        int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation) {
  const ops::UserOp user(Op::conv_transpose1d, {&x, &weight, &bias});
  const char* op = op_name(Op::conv_transpose1d);
  check_conv(Op::conv_transpose1d, x, weight, 1, "L", groups, true);
  check_conv1d_args(Op::conv_transpose1d, x, weight, bias, stride, padding, dilation, groups, true);
  EMBER_CHECK(output_padding >= 0 && (output_padding < stride || output_padding < dilation), op,
              ": output_padding ", output_padding, " (expected >= 0 and smaller than the stride ",
              stride, " or the dilation ", dilation, ")");
  return drop_unit_height(conv_transpose2d(add_unit_height(x), weight.unsqueeze(2), bias,
                                           Size2d(1, stride), Size2d(0, padding),
                                           Size2d(0, output_padding), groups, Size2d(1, dilation)));
}

// ---- 1-D pools ----

namespace {

// The 1-D pools run as their 2-D forms over a unit height: what the 2-D check would refuse
// is refused here first, in 1-D terms.
void check_pool1d(Op pool, const Tensor& x, int64_t kernel, std::optional<int64_t> stride,
                  int64_t padding, int64_t dilation, bool ceil_mode) {
  const char* op = op_name(pool);
  check_rank(op, x, 1, "L");
  const ops::OpScope op_scope(pool, x);
  ops::check_supported(pool, x);
  EMBER_CHECK(kernel >= 1, op, ": kernel size ", kernel, " (expected >= 1)");
  EMBER_CHECK(stride.value_or(kernel) >= 1, op, ": stride ", stride.value_or(kernel),
              " (expected >= 1)");
  EMBER_CHECK(dilation >= 1, op, ": dilation ", dilation, " (expected >= 1)");
  EMBER_CHECK(padding >= 0 && padding <= kernel / 2, op, ": padding ", padding,
              " (expected 0 <= padding <= half the kernel size ", kernel, ")");
  const int64_t out =
      ops::pool_out_size(x.size(-1), kernel, padding, stride.value_or(kernel), dilation, ceil_mode);
  EMBER_CHECK(out >= 1, op, ": output length ", out, " is too small (input shape ",
              x.shape().to_string(), ", kernel size ", kernel, ", stride ", stride.value_or(kernel),
              ", padding ", padding, ", dilation ", dilation,
              "; expected an output of at least 1)");
}

}  // namespace

std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, int64_t kernel,
                                                  std::optional<int64_t> stride, int64_t padding,
                                                  int64_t dilation, bool ceil_mode) {
  const ops::UserOp user(Op::max_pool1d, {&x});
  check_pool1d(Op::max_pool1d, x, kernel, stride, padding, dilation, ceil_mode);
  auto [out, indices] = max_pool2d_with_indices(add_unit_height(x), Size2d(1, kernel),
                                                Size2d(1, stride.value_or(kernel)),
                                                Size2d(0, padding), Size2d(1, dilation), ceil_mode);
  return {drop_unit_height(out), drop_unit_height(indices)};
}

Tensor max_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride, int64_t padding,
                  int64_t dilation, bool ceil_mode) {
  return max_pool1d_with_indices(x, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride, int64_t padding,
                  bool ceil_mode, bool count_include_pad) {
  const ops::UserOp user(Op::avg_pool1d, {&x});
  check_pool1d(Op::avg_pool1d, x, kernel, stride, padding, 1, ceil_mode);
  return drop_unit_height(avg_pool2d(add_unit_height(x), Size2d(1, kernel),
                                     Size2d(1, stride.value_or(kernel)), Size2d(0, padding),
                                     ceil_mode, count_include_pad));
}

// ---- adaptive pools ----

namespace {

using ops::adaptive_average_matrix;
using ops::adaptive_end;
using ops::adaptive_start;

void check_adaptive(Op pool, const Tensor& x, int64_t spatial, Size2d output_size) {
  const char* op = op_name(pool);
  check_rank(op, x, spatial, spatial == 1 ? "L" : "H, W");
  const ops::OpScope op_scope(pool, x);
  ops::check_supported(pool, x);
  EMBER_CHECK(output_size.h >= 1 && output_size.w >= 1, op, ": output size ",
              spatial == 1 ? std::to_string(output_size.w) : ops::pair_string(output_size),
              " (expected every entry >= 1)");
  for (int64_t d = x.dim() - spatial; d < x.dim(); ++d)
    EMBER_CHECK(x.shape()[d] >= 1, op, ": input shape ", x.shape().to_string(),
                " (expected non-empty spatial dims)");
}

// Each window's cells [out·k] (k the longest window; short windows repeat their last cell)
// as an i64 table on `device`.
std::vector<int64_t> window_cells(int64_t in, int64_t out, int64_t& k) {
  k = 0;
  for (int64_t i = 0; i < out; ++i)
    k = std::max(k, adaptive_end(i, in, out) - adaptive_start(i, in, out));
  std::vector<int64_t> cells(static_cast<size_t>(out * k));
  for (int64_t i = 0; i < out; ++i) {
    const int64_t s = adaptive_start(i, in, out), e = adaptive_end(i, in, out);
    for (int64_t j = 0; j < k; ++j) cells[static_cast<size_t>(i * k + j)] = std::min(s + j, e - 1);
  }
  return cells;
}

// adaptive_max_pool2d over the last two dims of x ([..., H, W]).
std::pair<Tensor, Tensor> adaptive_max_last2(const Tensor& x, Size2d os) {
  const int64_t r = x.dim(), h = x.shape()[r - 2], w = x.shape()[r - 1];
  int64_t kh = 0, kw = 0;
  const std::vector<int64_t> ch = window_cells(h, os.h, kh), cw = window_cells(w, os.w, kw);
  const Device dev = x.device();
  Tensor t = index_select(x, r - 2, from_vector<int64_t>(ch, {os.h * kh}).to(dev));
  t = index_select(t, r - 1, from_vector<int64_t>(cw, {os.w * kw}).to(dev));
  Shape lead(std::vector<int64_t>(x.shape().begin(), x.shape().end() - 2));
  Shape split = lead, flat = lead;
  for (int64_t v : {os.h, kh, os.w, kw}) split.push_back(v);
  for (int64_t v : {os.h, os.w, kh * kw}) flat.push_back(v);
  Shape order;
  for (int64_t d = 0; d < r - 2; ++d) order.push_back(d);
  for (int64_t d : {r - 2, r, r - 1, r + 1}) order.push_back(d);
  t = t.reshape(split).permute(order).reshape(flat);
  ValuesIndices m = max(t, -1);
  // The window's position -> h·W + w of its cell.
  std::vector<int64_t> global(static_cast<size_t>(os.h * os.w * kh * kw));
  for (int64_t i = 0; i < os.h; ++i)
    for (int64_t j = 0; j < os.w; ++j)
      for (int64_t a = 0; a < kh; ++a)
        for (int64_t b = 0; b < kw; ++b)
          global[static_cast<size_t>(((i * os.w + j) * kh + a) * kw + b)] =
              ch[static_cast<size_t>(i * kh + a)] * w + cw[static_cast<size_t>(j * kw + b)];
  Shape table_shape(std::vector<int64_t>(static_cast<size_t>(r - 2), 1));
  for (int64_t v : {os.h, os.w, kh * kw}) table_shape.push_back(v);
  Tensor table = from_vector<int64_t>(global, table_shape).to(dev).expand(flat).contiguous();
  Tensor indices = gather(table, r, m.indices.unsqueeze(r)).squeeze(r);
  return {m.values, indices};
}

}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& x, Size2d output_size) {
  check_adaptive(Op::adaptive_avg_pool2d, x, 2, output_size);
  const int64_t r = x.dim(), h = x.shape()[r - 2], w = x.shape()[r - 1];
  if (output_size == Size2d(h, w)) return x.clone();
  // Global pooling (ResNet's head): a mean over the plane, which reads any layout in place.
  if (output_size == Size2d(1, 1)) return mean(x, Shape{r - 2, r - 1}, true);
  // A channels_last input whose plane the output divides: the windows are avg_pool2d's with
  // kernel = stride = the ratio, whose NHWC kernel keeps the format (Note [Memory formats]).
  if (ops::format_of(x) != MemoryFormat::contiguous) {
    if (h % output_size.h == 0 && w % output_size.w == 0) {
      const Size2d k(h / output_size.h, w / output_size.w);
      return avg_pool2d(x, k, k);
    }
    // Other sizes: the window matrices applied to the channels-last view [N, H, W, C] as it
    // lies (rows of W·C, then of C), and the channels moved back: channels_last, no transpose.
    const Tensor v = movedim(x, 1, -1);
    const int64_t n = v.size(0), c = v.size(3);
    Tensor y = v;
    if (output_size.h != h)
      y = matmul(adaptive_average_matrix(h, output_size.h, x), y.reshape({n, h, w * c}));
    y = y.reshape({n, output_size.h, w, c});
    if (output_size.w != w)
      y = matmul(adaptive_average_matrix(w, output_size.w, x), y.reshape({n * output_size.h, w, c}))
              .reshape({n, output_size.h, output_size.w, c});
    return movedim(y, -1, 1);
  }
  Tensor y = x;
  if (output_size.h != h) y = matmul(adaptive_average_matrix(h, output_size.h, x), y);
  if (output_size.w != w) y = matmul(y, adaptive_average_matrix(w, output_size.w, x).t());
  return y;
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  check_adaptive(Op::adaptive_avg_pool1d, x, 1, Size2d(1, output_size));
  const int64_t l = x.shape()[x.dim() - 1];
  if (output_size == l) return x.clone();
  return matmul(x, adaptive_average_matrix(l, output_size, x).t());
}

std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, Size2d output_size) {
  check_adaptive(Op::adaptive_max_pool2d, x, 2, output_size);
  // Note [Memory formats]: a channels_last input's values and indices are channels_last (the
  // window gather reads it as it lies; its result is transposed once).
  auto [values, indices] = adaptive_max_last2(x, output_size);
  return {ops::in_format_of(x, values), ops::in_format_of(x, indices)};
}

Tensor adaptive_max_pool2d(const Tensor& x, Size2d output_size) {
  return adaptive_max_pool2d_with_indices(x, output_size).first;
}

std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, int64_t output_size) {
  check_adaptive(Op::adaptive_max_pool1d, x, 1, Size2d(1, output_size));
  auto [v, i] = adaptive_max_last2(add_unit_height(x), Size2d(1, output_size));
  return {drop_unit_height(v), drop_unit_height(i)};
}

Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size) {
  return adaptive_max_pool1d_with_indices(x, output_size).first;
}

// ---- interpolate ----
//
// Note [interpolate's source index]
// Per spatial dim, output index o reads (PyTorch 1.13's CPU kernels, UpSample.h):
//   nearest        min(floor(o · s), in - 1)           s = 1/scale_factor or in/out, in float
//   nearest-exact  min(floor((o + 0.5) · s), in - 1)
//   linear         src = align_corners ? o · (in - 1)/(out - 1) : max(s·(o + 0.5) - 0.5, 0),
//                  i0 = floor(src), i1 = min(i0 + 1, in - 1), λ = src - i0, out = (1-λ)·x[i0] +
//                  λ·x[i1]
//   bicubic        src as linear's but never clamped at 0, i0 = floor(src), t = src - i0,
//                  out = Σ_k w_k(t)·x[clamp(i0 - 1 + k, 0, in - 1)], k = 0..3, Keys' cubic
//                  convolution with A = -0.75 (input and output of one size: a copy)
// (with out == in the dim is copied, unless a nearest mode was given a scale factor). The
// float arithmetic of the nearest modes is PyTorch's, so a source row is never off by one
// where o·s lands on an integer (checked against torch 1.13 for every size up to 12 -> 29).

namespace {

struct InterpDims {
  std::vector<int64_t> in, out;
  std::vector<std::optional<double>> scale;  // the user's factor, passed to the index formulas
  int64_t first = 2;                         // the first spatial dim of the tensor the passes walk
};

InterpDims plan_interpolate(const Tensor& x, const InterpolateOptions& o) {
  const char* op = op_name(Op::interpolate);
  ops::check_defined(op, x);
  EMBER_CHECK(x.dim() >= 3 && x.dim() <= 5, op, ": input shape ", x.shape().to_string(),
              " (expected 3-D [N, C, L], 4-D [N, C, H, W] or 5-D [N, C, D, H, W])");
  const ops::OpScope op_scope(Op::interpolate, x);
  ops::check_supported(Op::interpolate, x);
  const int64_t spatial = x.dim() - 2;
  const std::string& m = o.mode;
  const bool linear = m == "linear" || m == "bilinear" || m == "trilinear" || m == "bicubic";
  EMBER_CHECK(linear || m == "nearest" || m == "nearest-exact", op, ": mode '", m,
              "' (expected nearest, nearest-exact, linear, bilinear, bicubic or trilinear)");
  if (linear) {
    const int64_t want = m == "linear" ? 1 : (m == "bilinear" || m == "bicubic") ? 2 : 3;
    EMBER_CHECK(spatial == want, op, ": mode '", m, "' needs ", want + 2, "-D input (got ", x.dim(),
                "-D input ", x.shape().to_string(), ")");
  }
  EMBER_CHECK(!o.align_corners.has_value() || linear, op,
              ": align_corners can only be set with the modes linear, bilinear, bicubic and "
              "trilinear "
              "(got mode '",
              m, "')");
  const bool has_size = !o.size.empty(), has_scale = !o.scale_factor.empty();
  EMBER_CHECK(!(has_size && has_scale), op,
              ": only one of size and scale_factor may be given (got ", "size ", o.size.to_string(),
              " and ", o.scale_factor.size(), " scale factors; expected one of them)");
  EMBER_CHECK(has_size || has_scale, op,
              ": either size or scale_factor must be given (got neither)");
  const size_t given = has_size ? o.size.size() : o.scale_factor.size();
  EMBER_CHECK(given == 1 || given == static_cast<size_t>(spatial), op, ": ",
              has_size ? "size" : "scale_factor", " has ", given, " entries (expected 1 or ",
              spatial, " for input shape ", x.shape().to_string(), ")");
  InterpDims p;
  for (int64_t i = 0; i < spatial; ++i) {
    const size_t at = given == 1 ? 0 : static_cast<size_t>(i);
    const int64_t in = x.shape()[2 + i];
    int64_t out = 0;
    std::optional<double> scale;
    if (has_size) {
      out = o.size[static_cast<int>(at)];
    } else {
      const double f = o.scale_factor[at];
      EMBER_CHECK(f > 0.0, op, ": scale_factor ", f, " (expected > 0)");
      out = static_cast<int64_t>(std::floor(static_cast<double>(in) * f));
      if (!o.recompute_scale_factor) scale = f;
    }
    EMBER_CHECK(in >= 1 && out >= 1, op, ": output size ", out, " from input size ", in,
                " in spatial dim ", i, " (expected both >= 1; input shape ", x.shape().to_string(),
                ")");
    p.in.push_back(in);
    p.out.push_back(out);
    p.scale.push_back(scale);
  }
  return p;
}

float nearest_scale(int64_t in, int64_t out, std::optional<double> scale) {
  return scale && *scale > 0.0 ? static_cast<float>(1.0 / *scale)
                               : static_cast<float>(in) / static_cast<float>(out);
}

// Keys' cubic convolution weights of the four taps i0 - 1 .. i0 + 2 at fraction t (PyTorch's
// A = -0.75).
std::array<double, 4> cubic_weights(double t) {
  constexpr double a = -0.75;
  auto near = [](double v) { return ((a + 2.0) * v - (a + 3.0)) * v * v + 1.0; };
  auto far = [](double v) { return ((a * v - 5.0 * a) * v + 8.0 * a) * v - 4.0 * a; };
  return {far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)};
}

// interpolate's bicubic mode (Note [interpolate's source index]): per spatial dim, four
// index_selects weighted by the cubic convolution; a copy when no size changes.
Tensor interpolate_bicubic(const Tensor& x, const InterpDims& p, bool align) {
  const Device dev = x.device();
  Tensor y = x;
  for (size_t i = 0; i < p.in.size(); ++i) {
    const int64_t in = p.in[i], out = p.out[i], dim = p.first + static_cast<int64_t>(i);
    std::array<std::vector<int64_t>, 4> taps;
    std::array<std::vector<double>, 4> weights;
    for (int64_t o = 0; o < out; ++o) {
      double src = 0.0;
      if (align) {
        src = out > 1 ? static_cast<double>(o) * double(in - 1) / double(out - 1) : 0.0;
      } else {
        const double s = p.scale[i] && *p.scale[i] > 0.0 ? 1.0 / *p.scale[i] : double(in) / out;
        src = s * (static_cast<double>(o) + 0.5) - 0.5;
      }
      const double lo = std::floor(src);
      const std::array<double, 4> w = cubic_weights(src - lo);
      for (int k = 0; k < 4; ++k) {
        const int64_t at = static_cast<int64_t>(lo) - 1 + k;
        taps[k].push_back(std::clamp<int64_t>(at, 0, in - 1));
        weights[k].push_back(w[k]);
      }
    }
    Shape wshape{out};
    for (int64_t d = dim + 1; d < y.dim(); ++d) wshape.push_back(1);
    Tensor sum;
    for (int k = 0; k < 4; ++k) {
      const Tensor w = from_vector<double>(weights[k], wshape).to(x.dtype()).to(dev);
      Tensor term = index_select(y, dim, from_vector<int64_t>(taps[k], {out}).to(dev)) * w;
      sum = sum.defined() ? sum + term : term;
    }
    y = sum;
  }
  return y;
}

// interpolate's passes over x's spatial dims p.first...: one per dim whose size changes.
Tensor interpolate_passes(const Tensor& x, const InterpDims& p, const InterpolateOptions& options) {
  const bool nearest = options.mode == "nearest", exact = options.mode == "nearest-exact";
  const bool align = options.align_corners.value_or(false);
  const Device dev = x.device();
  if (options.mode == "bicubic") return p.in == p.out ? x : interpolate_bicubic(x, p, align);
  Tensor y = x;
  for (size_t i = 0; i < p.in.size(); ++i) {
    const int64_t in = p.in[i], out = p.out[i], dim = p.first + static_cast<int64_t>(i);
    // An unchanged size is a copy, except for the nearest modes with a given scale factor
    // (PyTorch applies that factor's formula even then: size 4 at 1.2 reads 0, 0, 1, 2).
    if (in == out && !((nearest || exact) && p.scale[i])) continue;
    std::vector<int64_t> i0(static_cast<size_t>(out)), i1(static_cast<size_t>(out));
    std::vector<double> lambda(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      const size_t at = static_cast<size_t>(o);
      if (nearest || exact) {
        const float s = nearest_scale(in, out, p.scale[i]);
        const float src = exact ? (static_cast<float>(o) + 0.5f) * s : static_cast<float>(o) * s;
        i0[at] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
        continue;
      }
      double src = 0.0;
      if (align) {
        src = out > 1 ? static_cast<double>(o) * double(in - 1) / double(out - 1) : 0.0;
      } else {
        const double s = p.scale[i] && *p.scale[i] > 0.0 ? 1.0 / *p.scale[i] : double(in) / out;
        src = std::max(s * (static_cast<double>(o) + 0.5) - 0.5, 0.0);
      }
      const int64_t lo = static_cast<int64_t>(src);
      i0[at] = lo;
      i1[at] = lo + (lo < in - 1 ? 1 : 0);
      lambda[at] = std::clamp(src - static_cast<double>(lo), 0.0, 1.0);
    }
    Tensor x0 = index_select(y, dim, from_vector<int64_t>(i0, {out}).to(dev));
    if (nearest || exact) {
      y = x0;
      continue;
    }
    // λ along `dim`, broadcasting over the dims after it.
    Shape lshape{out};
    for (int64_t d = dim + 1; d < y.dim(); ++d) lshape.push_back(1);
    std::vector<double> keep(lambda.size());
    for (size_t k = 0; k < lambda.size(); ++k) keep[k] = 1.0 - lambda[k];
    const Tensor l1 = from_vector<double>(lambda, lshape).to(x.dtype()).to(dev);
    const Tensor l0 = from_vector<double>(keep, lshape).to(x.dtype()).to(dev);
    Tensor x1 = index_select(y, dim, from_vector<int64_t>(i1, {out}).to(dev));
    y = x0 * l0 + x1 * l1;
  }
  return y;
}

}  // namespace

// Note [Memory formats]: a channels_last input is resampled as it lies. Its channels-last view
// (x.movedim(1, -1): [N, H, W, C], contiguous) is walked with the spatial dims from 1, so every
// index_select and weighted sum reads and writes rows of C, and moving the channels back gives
// a channels_last result with no transpose.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options) {
  if (const auto c = ops::autocast(Op::interpolate, {&x})) return interpolate(c[0], options);
  InterpDims p = plan_interpolate(x, options);
  const MemoryFormat format = ops::format_of(x);
  const bool last = format != MemoryFormat::contiguous;
  if (last) p.first = 1;
  const Tensor walked = last ? movedim(x, 1, -1) : x;
  Tensor y = interpolate_passes(walked, p, options);
  if (y.is_same(walked)) return x.clone();
  return last ? movedim(y, -1, 1) : y.contiguous();
}

// ---- im2col / col2im (F.unfold / F.fold) ----

namespace {

// The block geometry of F.unfold on [N, C, H, W], as backend::Window2d (batch set later).
backend::Window2d plan_blocks(Op which, const Shape& image, Size2d kernel, Size2d dilation,
                              Size2d padding, Size2d stride) {
  const char* op = op_name(which);
  EMBER_CHECK(kernel.h >= 1 && kernel.w >= 1 && dilation.h >= 1 && dilation.w >= 1 &&
                  stride.h >= 1 && stride.w >= 1 && padding.h >= 0 && padding.w >= 0,
              op, ": kernel ", ops::pair_string(kernel), ", dilation ", ops::pair_string(dilation),
              ", padding ", ops::pair_string(padding), ", stride ", ops::pair_string(stride),
              " (expected kernel, dilation and stride >= 1 and padding >= 0)");
  backend::Window2d w =
      ops::make_window(1, image[1], image[2], image[3], kernel, stride, padding, dilation);
  const int64_t eff_h = dilation.h * (kernel.h - 1) + 1, eff_w = dilation.w * (kernel.w - 1) + 1;
  const int64_t ph = w.height + 2 * padding.h, pw = w.width + 2 * padding.w;
  EMBER_CHECK(eff_h <= ph && eff_w <= pw, op, ": kernel ", ops::pair_string(kernel), " (dilated ",
              ops::pair_string(eff_h, eff_w), ") is larger than the padded image ",
              ops::pair_string(ph, pw), " (image ", ops::pair_string(w.height, w.width),
              ", padding ", ops::pair_string(padding), ")");
  w.out_h = (ph - eff_h) / stride.h + 1;
  w.out_w = (pw - eff_w) / stride.w + 1;
  return w;
}

// The columns [N, C·K, L] of images [N, C, H, W] (both contiguous), one image per call.
Tensor blocks_of(const backend::Window2d& w, const Tensor& images) {
  const int64_t n = images.shape()[0], rows = w.channels * w.kernel_h * w.kernel_w;
  const int64_t l = w.out_h * w.out_w;
  Tensor cols = ops::make_tensor({n, rows, l}, images.dtype(), images.device());
  const backend::Backend& be = ops::backend_of(images);
  if (cols.numel() == 0) return cols;
  for (int64_t i = 0; i < n; ++i)
    be.im2col(w, ops::sub_view(cols, i * rows * l, {rows, l}, {l, 1}),
              ops::batch_chunk(images, i, 1));
  return cols;
}

// The images [N, C, H, W] summed from columns [N, C·K, L] (both contiguous).
Tensor images_of(const backend::Window2d& w, const Tensor& cols) {
  const int64_t n = cols.shape()[0], rows = cols.shape()[1], l = cols.shape()[2];
  Tensor images = ops::make_tensor({n, w.channels, w.height, w.width}, cols.dtype(), cols.device());
  const backend::Backend& be = ops::backend_of(cols);
  if (images.numel() == 0) return images;
  if (l == 0) {
    be.fill(ops::view_of(images), 0.0);
    return images;
  }
  for (int64_t i = 0; i < n; ++i)
    be.col2im(w, ops::batch_chunk(images, i, 1),
              ops::sub_view(cols, i * rows * l, {rows, l}, {l, 1}));
  return images;
}

}  // namespace

Tensor im2col(const Tensor& x, Size2d kernel, Size2d dilation, Size2d padding, Size2d stride) {
  const ops::OpScope op_scope(Op::im2col, x);
  ops::check_supported(Op::im2col, x);
  return ops::with_batch_dim(op_name(Op::im2col), x, [&](const Tensor& x4) {
    const backend::Window2d w =
        plan_blocks(Op::im2col, x4.shape(), kernel, dilation, padding, stride);
    Tensor out;
    {
      NoGradGuard no_grad;
      out = blocks_of(w, x4.contiguous());
    }
    if (autograd::needs_grad(x4))
      autograd::record(Op::im2col, out, {&x4}, [w](const Tensor& g, GradList& gi) {
        gi[0] = images_of(w, g.contiguous());
      });
    return out;
  });
}

Tensor col2im(const Tensor& columns, Size2d output_size, Size2d kernel, Size2d dilation,
              Size2d padding, Size2d stride) {
  const char* op = op_name(Op::col2im);
  ops::check_defined(op, columns);
  EMBER_CHECK(columns.dim() == 2 || columns.dim() == 3, op, ": input shape ",
              columns.shape().to_string(), " (expected 3-D [N, C·kh·kw, L] or 2-D [C·kh·kw, L])");
  const ops::OpScope op_scope(Op::col2im, columns);
  ops::check_supported(Op::col2im, columns);
  if (columns.dim() == 2)
    return col2im(columns.unsqueeze(0), output_size, kernel, dilation, padding, stride).squeeze(0);
  const int64_t rows = columns.shape()[1], k = kernel.h * kernel.w;
  EMBER_CHECK(kernel.h >= 1 && kernel.w >= 1 && rows % k == 0, op, ": input has ", rows,
              " rows (expected a multiple of kh·kw = ", k, " for kernel ", ops::pair_string(kernel),
              ")");
  EMBER_CHECK(output_size.h >= 1 && output_size.w >= 1, op, ": output_size ",
              ops::pair_string(output_size), " (expected every entry >= 1)");
  const backend::Window2d w =
      plan_blocks(Op::col2im, {columns.shape()[0], rows / k, output_size.h, output_size.w}, kernel,
                  dilation, padding, stride);
  EMBER_CHECK(columns.shape()[2] == w.out_h * w.out_w, op, ": input has ", columns.shape()[2],
              " blocks (columns), expected ", w.out_h * w.out_w, " = ",
              ops::pair_string(w.out_h, w.out_w), " for output_size ",
              ops::pair_string(output_size), ", kernel ", ops::pair_string(kernel), ", dilation ",
              ops::pair_string(dilation), ", padding ", ops::pair_string(padding), ", stride ",
              ops::pair_string(stride));
  Tensor out;
  {
    NoGradGuard no_grad;
    out = images_of(w, columns.contiguous());
  }
  if (autograd::needs_grad(columns))
    autograd::record(Op::col2im, out, {&columns},
                     [w](const Tensor& g, GradList& gi) { gi[0] = blocks_of(w, g.contiguous()); });
  return out;
}

}  // namespace ember
