// src/ops/conv_transpose3d.cpp — F.conv_transpose3d (include/ember/ops_nn.hpp): through the
// device's library (Note [Transposed convolutions in the library] in conv_library.cpp), else as
// the composite of conv_transpose2d below.
//
// Kernel depth a of weight [C, O/g, kd, kh, kw] sends input depth i to output depth
// i·stride_d + a·dilation_d (before the depth padding is cropped). So with the depth folded
// into the batch, conv_transpose2d(x_i, W[:, :, a]) is depth a's share of every input slice;
// spread along depth by the stride, shifted by a·dilation_d and summed over a, then cropped by
// the padding, it is the 3-D result. kd conv_transpose2d calls over N·D images; the gradients
// are conv_transpose2d's and the reshapes'.
#include "ember/ops_nn.hpp"
#include "ops/common.hpp"
#include "ops/conv_library.hpp"

namespace ember {

namespace {

std::string triple(Size3d s) {
  return "(" + std::to_string(s.d) + ", " + std::to_string(s.h) + ", " + std::to_string(s.w) + ")";
}

struct Transposed3d {
  Size3d stride, padding, output_padding, dilation;
  int64_t groups = 1;
};

// The composite (the header's comment): x [N, C, D, H, W], no bias.
Tensor conv_transpose3d_composite(const Tensor& x, const Tensor& weight, const Transposed3d& t) {
  const int64_t n = x.shape()[0], c = x.shape()[1], d = x.shape()[2], h = x.shape()[3],
                w = x.shape()[4];
  const int64_t o = weight.shape()[1] * t.groups, kd = weight.shape()[2];
  const Size3d &stride = t.stride, &padding = t.padding, &output_padding = t.output_padding,
               &dilation = t.dilation;
  const int64_t groups = t.groups;
  const int64_t spread = (d - 1) * stride.d + 1;  // input depths spread by the stride
  const int64_t full = spread + dilation.d * (kd - 1) + output_padding.d;
  const int64_t out_d = full - 2 * padding.d;
  const Tensor slices = x.permute({0, 2, 1, 3, 4}).reshape({n * d, c, h, w});
  Tensor acc;
  int64_t rest = 0, ho = 0, wo = 0;
  for (int64_t a = 0; a < kd; ++a) {
    Tensor y =
        conv_transpose2d(slices, weight.select(2, a), Tensor(), Size2d(stride.h, stride.w),
                         Size2d(padding.h, padding.w), Size2d(output_padding.h, output_padding.w),
                         groups, Size2d(dilation.h, dilation.w));
    ho = y.shape()[2];
    wo = y.shape()[3];
    rest = o * ho * wo;
    y = y.reshape({n, d, 1, rest});
    if (stride.d > 1)
      y = cat({y, zeros({n, d, stride.d - 1, rest}, {.dtype = y.dtype(), .device = y.device()})},
              2);
    y = y.reshape({n, d * stride.d, rest}).narrow(1, 0, spread);
    const int64_t before = a * dilation.d;
    y = pad(y, {0, 0, before, full - spread - before});
    acc = acc.defined() ? acc + y : y;
  }
  Tensor out = acc.narrow(1, padding.d, out_d);
  out = out.reshape({n, out_d, o, ho, wo}).permute({0, 2, 1, 3, 4});
  return out;
}

// Through the library: x [N, C, D, H, W] to out_shape; undefined where it declines.
Tensor conv_transpose3d_library(const Tensor& x, const Tensor& weight, const Transposed3d& t,
                                const Shape& out_shape) {
  const int64_t s[] = {t.stride.d, t.stride.h, t.stride.w};
  const int64_t p[] = {t.padding.d, t.padding.h, t.padding.w};
  const int64_t d[] = {t.dilation.d, t.dilation.h, t.dilation.w};
  backend::ConvGeometry g;
  g.dtype = x.dtype();
  g.device = x.device().index;
  g.spatial = 3;
  g.batch = x.size(0);
  g.in_channels = out_shape[1];
  g.out_channels = x.size(1);
  g.groups = t.groups;
  for (int i = 0; i < 3; ++i) {
    g.input[i] = out_shape[2 + i];
    g.output[i] = x.size(2 + i);
    g.kernel[i] = weight.size(2 + i);
    g.stride[i] = s[i];
    g.padding[i] = p[i];
    g.dilation[i] = d[i];
  }
  // Note [Memory formats]: channels_last_3d operands run the library NDHWC.
  const MemoryFormat format = ops::conv_memory_format(x, weight);
  g.channels_last = format != MemoryFormat::contiguous;
  Tensor xc, wc;
  {
    NoGradGuard no_grad;  // data for the slots, not graph
    xc = x.contiguous(format);
    wc = weight.contiguous(format);
  }
  return ops::conv_transpose_through_library(
      {.op = Op::conv_transpose3d,
       .geo = g,
       .x = &x,
       .weight = &weight,
       .xc = xc,
       .wc = wc,
       .out_shape = out_shape},
      [t, xshape = x.shape(), wshape = weight.shape()](const Tensor& gr, const Tensor& xs,
                                                       const Tensor& ws, bool nx, bool nw) {
        return ops::composite_conv_grads(gr, xs, xshape, ws, wshape, nx, nw,
                                         [&](const Tensor& xd, const Tensor& wd) {
                                           return conv_transpose3d_composite(xd, wd, t);
                                         });
      });
}

}  // namespace

Tensor conv_transpose3d(const Tensor& x_in, const Tensor& weight, const Tensor& bias, Size3d stride,
                        Size3d padding, Size3d output_padding, int64_t groups, Size3d dilation) {
  const ops::UserOp user(Op::conv_transpose3d, {&x_in, &weight, &bias});
  const char* op = "conv_transpose3d";
  ops::check_supported(Op::conv_transpose3d, x_in);
  ops::check_defined(op, weight, "weight");
  ops::check_same_dtype(op, x_in, weight);
  ops::check_same_device(op, x_in, weight);
  EMBER_CHECK(x_in.dim() == 5 || x_in.dim() == 4, op, ": input shape ", x_in.shape().to_string(),
              " (expected 5-D [N, C, D, H, W] or 4-D [C, D, H, W])");
  const Tensor x = x_in.dim() == 5 ? x_in : x_in.unsqueeze(0);
  const int64_t n = x.shape()[0], c = x.shape()[1], d = x.shape()[2], h = x.shape()[3],
                w = x.shape()[4];
  EMBER_CHECK(groups >= 1 && c % groups == 0, op, ": groups ", groups, " for ", c,
              " input channels (expected groups >= 1 dividing the channels)");
  EMBER_CHECK(weight.dim() == 5 && weight.shape()[0] == c, op, ": weight shape ",
              weight.shape().to_string(), " for input shape ", x_in.shape().to_string(),
              " (expected [", c, ", out_channels/groups, kd, kh, kw])");
  const int64_t o = weight.shape()[1] * groups, kd = weight.shape()[2];
  if (bias.defined()) {
    ops::check_same_dtype(op, x_in, bias);
    ops::check_same_device(op, x_in, bias);
    EMBER_CHECK(bias.dim() == 1 && bias.shape()[0] == o, op, ": bias shape ",
                bias.shape().to_string(), " (expected [", o, "])");
  }
  EMBER_CHECK(stride.d >= 1 && stride.h >= 1 && stride.w >= 1, op, ": stride ", triple(stride),
              " (expected every entry >= 1)");
  EMBER_CHECK(dilation.d >= 1 && dilation.h >= 1 && dilation.w >= 1, op, ": dilation ",
              triple(dilation), " (expected every entry >= 1)");
  EMBER_CHECK(padding.d >= 0 && padding.h >= 0 && padding.w >= 0, op, ": padding ", triple(padding),
              " (expected every entry >= 0)");
  const Size3d& op_ = output_padding;
  const bool op_ok = (op_.d >= 0 && (op_.d < stride.d || op_.d < dilation.d)) &&
                     (op_.h >= 0 && (op_.h < stride.h || op_.h < dilation.h)) &&
                     (op_.w >= 0 && (op_.w < stride.w || op_.w < dilation.w));
  EMBER_CHECK(op_ok, op, ": output_padding ", triple(output_padding),
              " (expected >= 0 and smaller than the stride ", triple(stride), " or the dilation ",
              triple(dilation), " in each dim)");
  const int64_t spread = (d - 1) * stride.d + 1;
  const int64_t out_d = spread + dilation.d * (kd - 1) + output_padding.d - 2 * padding.d;
  EMBER_CHECK(out_d >= 1, op, ": output depth ", out_d, " (input shape ", x_in.shape().to_string(),
              ", kernel depth ", kd, ", stride ", stride.d, ", padding ", padding.d,
              "; expected an output of at least 1)");
  const Transposed3d t{stride, padding, output_padding, dilation, groups};
  // The output's height and width as the depth's; a size below 1 is the composite's to refuse.
  const int64_t out_h = (h - 1) * stride.h - 2 * padding.h + dilation.h * (weight.shape()[3] - 1) +
                        output_padding.h + 1;
  const int64_t out_w = (w - 1) * stride.w - 2 * padding.w + dilation.w * (weight.shape()[4] - 1) +
                        output_padding.w + 1;
  Tensor out;
  if (out_h >= 1 && out_w >= 1)
    out = conv_transpose3d_library(x, weight, t, Shape{n, o, out_d, out_h, out_w});
  const bool library = out.defined();
  if (!library) out = conv_transpose3d_composite(x, weight, t);
  if (bias.defined()) out = out + bias.reshape({1, o, 1, 1, 1});
  // Note [Memory formats]: a channels_last_3d operand's output is channels_last_3d.
  const MemoryFormat format = ops::conv_memory_format(x, weight);
  if (!library)
    out = format == MemoryFormat::contiguous ? out.contiguous() : out.contiguous(format);
  return x_in.dim() == 5 ? out : out.squeeze(0);
}

}  // namespace ember
