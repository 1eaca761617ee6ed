// tests/cuda_skip.hpp — SKIP_WITHOUT_CUDA(): a GPU test skips, saying why, where no CUDA device
// is visible (CI has none; the GPU machine runs every such test).
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

}  // namespace ember_test

#define SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                            \
    if (!ember::cuda_available())                                                 \
      GTEST_SKIP() << "no CUDA device: "                                          \
                   << (ember_test::cuda_built() ? "none visible to this build"    \
                                                : "ember was built without CUDA") \
                   << " (a GPU test: the GPU machine runs it)";                   \
  } while (0)
