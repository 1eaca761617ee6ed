// src/core/matmul_precision.cpp — set_float32_matmul_precision / get_float32_matmul_precision
// (include/ember/runtime.hpp): the process-wide setting that CUDA's f32 GEMMs read through
// detail::allow_tf32() (src/cuda/linalg.cpp; docs/mixed_precision.md, "Float32 matmul
// precision").
#include <atomic>
#include <string>

#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember {
namespace {

// PyTorch's names, in the order of falling precision; index 0 is the default.
constexpr const char* kPrecisions[] = {"highest", "high", "medium"};

std::atomic<int> g_precision{0};

}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  for (int i = 0; i < 3; ++i)
    if (precision == kPrecisions[i]) {
      g_precision.store(i, std::memory_order_relaxed);
      return;
    }
  throw Error(detail::concat("set_float32_matmul_precision: unknown precision \"", precision,
                             "\" (expected \"highest\", \"high\" or \"medium\")"));
}

std::string get_float32_matmul_precision() {
  return kPrecisions[g_precision.load(std::memory_order_relaxed)];
}

namespace detail {
bool allow_tf32() noexcept { return g_precision.load(std::memory_order_relaxed) > 0; }
}  // namespace detail

}  // namespace ember
