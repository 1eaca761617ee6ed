// src/ops/conv_library.hpp — the library route of conv1d / conv2d / conv3d (oneDNN, cuDNN
// through the conv_library_* slots), shared by conv.cpp and conv_nd.cpp; Note [Which
// convolution path runs] in conv_library.cpp.
#pragma once

#include <functional>

#include "backend/conv_library.hpp"
#include "ops/common.hpp"

namespace ember::ops {

/// Gradients of a convolution's input and weight (either may be undefined).
struct ConvGradients {
  Tensor input, weight;
};

/// The op's own path for the gradients (im2col), run when the library declines a backward
/// call: (grad_out contiguous, x, weight, need_input, need_weight) -> gradients.
using ConvFallback =
    std::function<ConvGradients(const Tensor&, const Tensor&, const Tensor&, bool, bool)>;

/// One convolution for the library: the geometry (dtype and device included), the user's
/// tensors (the autograd edges) and their copies in the geometry's layout (what the slots
/// read: contiguous, or channels_last when geo.channels_last).
struct ConvLibraryCall {
  Op op = Op::conv2d;
  backend::ConvGeometry geo;
  const Tensor* x = nullptr;
  const Tensor* weight = nullptr;
  const Tensor* bias = nullptr;  // may be undefined
  Tensor xc, wc;                 // x, weight in the geometry's layout
  Shape out_shape;               // the op's output shape (conv1d's has its unit height)
  bool relu = false;
};

/// The convolution through the device's library, with its autograd node (whose backward
/// asks the library too and runs `fallback` where it declines); undefined when the library
/// is off or declines the forward (conv_fallback_reason() then says why). Records the path
/// for conv_last_backend() either way.
Tensor conv_through_library(const ConvLibraryCall& call, ConvFallback fallback);

/// A transposed convolution through the device's library (Note [Transposed convolutions in
/// the library] in conv_library.cpp). `call.geo` is the convolution whose input gradient the
/// transposed one is: its input is the op's output (`call.out_shape`), its output the op's input
/// `*call.x`, its weight the op's weight. No bias (the op adds it). The node's backward asks the
/// library for the convolution forward (the input's gradient) and backward_filter (the
/// weight's), and runs `fallback` (the op's gradients for grad_out, x, weight) for a part it
/// declines. Undefined when the library is off or declines the forward (conv_fallback_reason()
/// then says why).
Tensor conv_transpose_through_library(const ConvLibraryCall& call, ConvFallback fallback);

/// The gradients of `composite` (a differentiable form of a convolution: (x, weight) -> output)
/// at (x, weight) for grad_out, by differentiating it: a library path's fallback when its
/// backward declines a part. x or weight may be undefined where its gradient is not needed
/// (zeros of its shape stand in: a bilinear op's gradient does not read the other operand's
/// own values).
ConvGradients composite_conv_grads(
    const Tensor& grad_out, const Tensor& x, const Shape& x_shape, const Tensor& weight,
    const Shape& w_shape, bool need_x, bool need_w,
    const std::function<Tensor(const Tensor&, const Tensor&)>& composite);

/// Whether a convolution on `actual` is a memory estimate's dry run for a GPU target whose
/// cuDNN would take it: the im2col path computes it, its temporaries left out of the trace
/// (Note [A dry run for a cuDNN target] in conv_library.cpp).
bool library_convolution_in_dry_run(Device actual, DType dtype);

/// The layout a convolution of x [N, C, ...] with `weight` runs in: channels_last (4-d) or
/// channels_last_3d (5-d) when either operand's suggested format is that (as torch), else
/// contiguous. The output and the gradients follow it.
MemoryFormat conv_memory_format(const Tensor& x, const Tensor& weight);

}  // namespace ember::ops
