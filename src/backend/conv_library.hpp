// src/backend/conv_library.hpp — the operands of the library convolution slots
// (conv_library_forward, conv_library_backward_data, conv_library_backward_filter in
// slots.def): oneDNN on the CPU (src/cpu/conv_onednn.cpp), cuDNN on CUDA
// (src/cuda/conv_cudnn.cpp). Both backends fill the same three slots from the same geometry;
// the op (src/ops/conv_library.cpp) tries them first and falls back to im2col + GEMM when a
// slot declines (Note [Which convolution path runs] there).
//
// Shape letters: N batch, C input channels, O output channels, G groups, S spatial dims
// (1, 2 or 3), in[S], k[S], out[S] the input, kernel and output sizes.
// Layout: x [N, C, in...], weight [O, C/G, k...], out [N, O, out...], bias [O], every buffer
// contiguous; with channels_last the same dims stored NHWC (NDHWC): x [N, in..., C], weight
// [O, k..., C/G], out [N, out..., O] (Note [Memory formats] in src/ops/conv_library.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ember/dtype.hpp"

namespace ember::backend {

/// An N-d convolution: sizes per spatial dim in the first `spatial` entries of each array
/// (the rest unused), out[i] = (in[i] + 2·padding[i] - dilation[i]·(k[i] - 1) - 1) / stride[i]
/// + 1 (the op has checked it is >= 1).
struct ConvGeometry {
  DType dtype = DType::f32;  // of x, weight, bias, out and every gradient
  int device = 0;
  int spatial = 2;             // 1, 2 or 3
  bool channels_last = false;  // NHWC (NDHWC) buffers: x, out and their gradients, and the weight
  int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  int64_t input[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, output[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, padding[3] = {0, 0, 0}, dilation[3] = {1, 1, 1};
};

/// The geometry's fields as a cache key (the backends append their own flags).
inline std::vector<int64_t> key_of(const ConvGeometry& g) {
  std::vector<int64_t> k = {static_cast<int64_t>(g.dtype),
                            g.device,
                            g.spatial,
                            g.channels_last,
                            g.batch,
                            g.in_channels,
                            g.out_channels,
                            g.groups};
  for (int i = 0; i < g.spatial; ++i)
    k.insert(k.end(),
             {g.input[i], g.kernel[i], g.output[i], g.stride[i], g.padding[i], g.dilation[i]});
  return k;
}

/// out = conv(x, weight) (+ bias) (then ReLU when relu).
struct ConvForwardArgs {
  ConvGeometry geo;
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;  // [O] or null: none
  void* out = nullptr;
  bool relu = false;
  // The backward the caller will ask for: a slot that could run this forward but not those
  // declines the forward too, so one convolution never mixes paths (cuDNN builds the plans now).
  bool need_grad_input = false, need_grad_weight = false;
};

/// backward_data: grad_input = conv's input gradient from grad_out and weight.
/// backward_filter: grad_weight (and grad_bias = grad_out summed over N and out..., when
/// non-null) from grad_out and x. Outputs are overwritten, except that backward_data with
/// `accumulate` adds its gradient into grad_input's values (a slot that cannot declines it;
/// Note [A convolution's input gradient added where it lands] in src/ops/conv_library.cpp).
struct ConvBackwardArgs {
  ConvGeometry geo;
  const void* grad_out = nullptr;  // [N, O, out...]
  const void* x = nullptr;         // filter: the forward's input
  const void* weight = nullptr;    // data: the forward's weight
  void* grad_input = nullptr;      // data
  void* grad_weight = nullptr;     // filter
  void* grad_bias = nullptr;       // filter, optional
  bool accumulate = false;         // data: grad_input += instead of =
};

/// What a library slot did: handled, or declined with the reason (nothing written then):
/// "oneDNN not found: ...", "dtype f64 (cuDNN takes f32, f16 and bf16)", ...
struct ConvLibraryStatus {
  bool handled = false;
  std::string reason;
  static ConvLibraryStatus done() { return {true, {}}; }
  static ConvLibraryStatus declined(std::string why) { return {false, std::move(why)}; }
};

}  // namespace ember::backend
