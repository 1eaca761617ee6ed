// tests/cuda_skip.hpp — SKIP_WITHOUT_CUDA(): a GPU test skips, saying why, where no CUDA device
// is visible (CI has none; the GPU machine runs every such test). And DeterministicScope, which
// the GPU tests that compare two runs bit for bit hold (docs/cuda.md, "Deterministic mode"),
// and CudnnConvolutionsScope, for tests that pick the GPU convolution route, and PoisonScope,
// for tests that turn set_poison_allocations on.
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

/// Sets one process-wide on/off setting (its getter and setter) for the scope, restoring the
/// previous value at its end.
template <bool (*Get)(), void (*Set)(bool)>
class SettingScope {
 public:
  explicit SettingScope(bool on = true) : previous_(Get()) { Set(on); }
  ~SettingScope() { Set(previous_); }
  SettingScope(const SettingScope&) = delete;
  SettingScope& operator=(const SettingScope&) = delete;

 private:
  bool previous_;
};

/// Deterministic mode for the scope:
///   const DeterministicScope deterministic_mode;  // on until the scope ends
using DeterministicScope = SettingScope<&ember::deterministic, &ember::set_deterministic>;
/// The GPU convolutions' cuDNN mode (set_cudnn_convolutions) for the scope, the previous mode
/// restored at its end:
///   const CudnnConvolutionsScope cudnn(true);  // CudnnConvolutions::always; false: off
class CudnnConvolutionsScope {
 public:
  explicit CudnnConvolutionsScope(bool on)
      : CudnnConvolutionsScope(on ? ember::CudnnConvolutions::always
                                  : ember::CudnnConvolutions::off) {}
  explicit CudnnConvolutionsScope(ember::CudnnConvolutions mode)
      : previous_(ember::cudnn_convolution_mode()) {
    ember::set_cudnn_convolutions(mode);
  }
  ~CudnnConvolutionsScope() { ember::set_cudnn_convolutions(previous_); }
  CudnnConvolutionsScope(const CudnnConvolutionsScope&) = delete;
  CudnnConvolutionsScope& operator=(const CudnnConvolutionsScope&) = delete;

 private:
  ember::CudnnConvolutions previous_;
};
/// Poisoned allocations (set_poison_allocations) for the scope:
///   const PoisonScope poison;  // fresh blocks read as NaN until the scope ends
using PoisonScope = SettingScope<&ember::poison_allocations, &ember::set_poison_allocations>;

}  // namespace ember_test

#define SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                            \
    if (!ember::cuda_available())                                                 \
      GTEST_SKIP() << "no CUDA device: "                                          \
                   << (ember_test::cuda_built() ? "none visible to this build"    \
                                                : "ember was built without CUDA") \
                   << " (a GPU test: the GPU machine runs it)";                   \
  } while (0)
