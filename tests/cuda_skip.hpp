// tests/cuda_skip.hpp — SKIP_WITHOUT_CUDA(): a GPU test skips, saying why, where no CUDA device
// is visible (CI has none; the GPU machine runs every such test). And DeterministicScope, which
// the GPU tests that compare two runs bit for bit hold (docs/cuda.md, "Deterministic mode"),
// and CudnnConvolutionsScope, for tests that pick the GPU convolution route.
#pragma once

#include <gtest/gtest.h>

#include "ember/ember.hpp"

namespace ember_test {

/// Whether this test binary (and so ember) was built with CUDA.
constexpr bool cuda_built() {
#if defined(EMBER_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

/// Sets deterministic mode for the scope, restoring the previous setting at its end:
///   const DeterministicScope deterministic_mode;  // on until the scope ends
class DeterministicScope {
 public:
  explicit DeterministicScope(bool on = true) : previous_(ember::deterministic()) {
    ember::set_deterministic(on);
  }
  ~DeterministicScope() { ember::set_deterministic(previous_); }
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;

 private:
  bool previous_;
};

/// Sets set_cudnn_convolutions for the scope, restoring the previous setting at its end:
///   const CudnnConvolutionsScope cudnn(true);  // GPU convolutions on cuDNN until the scope ends
class CudnnConvolutionsScope {
 public:
  explicit CudnnConvolutionsScope(bool on) : previous_(ember::cudnn_convolutions()) {
    ember::set_cudnn_convolutions(on);
  }
  ~CudnnConvolutionsScope() { ember::set_cudnn_convolutions(previous_); }
  CudnnConvolutionsScope(const CudnnConvolutionsScope&) = delete;
  CudnnConvolutionsScope& operator=(const CudnnConvolutionsScope&) = delete;

 private:
  bool previous_;
};

}  // namespace ember_test

#define SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                            \
    if (!ember::cuda_available())                                                 \
      GTEST_SKIP() << "no CUDA device: "                                          \
                   << (ember_test::cuda_built() ? "none visible to this build"    \
                                                : "ember was built without CUDA") \
                   << " (a GPU test: the GPU machine runs it)";                   \
  } while (0)
