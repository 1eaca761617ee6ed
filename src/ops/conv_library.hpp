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

/// The layout a convolution of x [N, C, ...] with `weight` runs in: channels_last (4-d) or
/// channels_last_3d (5-d) when either operand's suggested format is that (as torch), else
/// contiguous. The output and the gradients follow it.
MemoryFormat conv_memory_format(const Tensor& x, const Tensor& weight);

}  // namespace ember::ops
