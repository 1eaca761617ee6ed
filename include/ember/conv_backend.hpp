// ember/conv_backend.hpp — which library runs a convolution, why not, and how to switch it off.
//
//   Tensor y = conv2d(x, w, b);
//   if (conv_last_backend() == ConvBackend::im2col) std::cout << conv_fallback_reason();
//
// conv1d, conv2d and conv3d (forward and backward, any groups, stride, padding and dilation)
// run through the device's convolution library when it takes the call: oneDNN on the CPU
// (opened at run time, libdnnl.so.2), cuDNN on a GPU (by default for f16, bf16 and TF32 f32:
// CudnnConvolutions below; set_cudnn_convolutions(false) turns it off).
// Otherwise, or when switched off, they
// run as im2col + GEMM, ember's own path (docs/vision.md, "Convolution backends").
#pragma once

#include <cstdint>
#include <string>

#include "ember/device.hpp"

namespace ember {

/// Which path computed a convolution.
enum class ConvBackend : uint8_t {
  none,    // no convolution yet on this thread
  im2col,  // ember's im2col + GEMM (the library declined, or is switched off)
  onednn,  // oneDNN's convolution primitives (CPU)
  cudnn,   // cuDNN's convolution engines (CUDA)
};

/// The path this thread's last conv1d / conv2d / conv3d forward took (tests use it so a
/// library-path test cannot pass on the fallback).
ConvBackend conv_last_backend();
/// Why that call did not take the library path ("" when it did, or before any call):
/// "oneDNN not found (...)", "dtype f64 (oneDNN convolutions take f32, bf16, f16)", ...
std::string conv_fallback_reason();

/// Lets convolutions use the device's library (true, the default) or forces im2col + GEMM
/// (false: for tests and A/B benchmarks). EMBER_CONV_IM2COL=1 sets false at start.
/// Example: set_conv_library(false);
void set_conv_library(bool on);
bool conv_library();

/// Which GPU convolutions take cuDNN; the others run im2col + cuBLASLt (docs/layers.md).
enum class CudnnConvolutions : uint8_t {
  off,        // none (EMBER_CONV_CUDNN=0 at start)
  automatic,  // the default: f16 and bf16, and f32 where TF32 is allowed
              // (set_float32_matmul_precision("high")); f32 without TF32 runs im2col + cuBLAS,
              // which measured faster than cuDNN's precise engines
  always,     // every dtype cuDNN takes (EMBER_CONV_CUDNN=1 at start)
};
/// Example: set_cudnn_convolutions(CudnnConvolutions::always);
void set_cudnn_convolutions(CudnnConvolutions mode);
CudnnConvolutions cudnn_convolution_mode();
/// Shorthands: true is CudnnConvolutions::always, false off; cudnn_convolutions() says whether
/// the mode is other than off.
/// Example: set_cudnn_convolutions(false);
void set_cudnn_convolutions(bool on);
bool cudnn_convolutions();

/// The convolution library's state for `device` (loads it on first call; never throws):
/// "oneDNN 2.6.3 (libdnnl.so.2, OpenMP threads), primitive cache 1024", "cuDNN 9.10.2
/// (/path/libcudnn.so.9)", or why it is not available.
std::string conv_library_status(Device device = Device::cpu());

}  // namespace ember
