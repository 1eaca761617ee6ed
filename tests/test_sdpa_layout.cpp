// tests/test_sdpa_layout.cpp — the fused attention writes its output and the gradients of q,
// k and v heads-second (Note [Attention in the projections' layout] in src/ops/attention.cpp):
// merging the heads after attention is a view, and the values are the packed layout's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::floats;

TEST(SdpaLayout, HeadsMergeAsAViewAndGradientsMatchThePackedLayout) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the fused attention needs one";
  const Device gpu = Device::cuda(0);
  constexpr int64_t B = 2, T = 128, H = 4, E = 64, D = H * E;
  set_deterministic(true);  // cuDNN's default backward adds dQ with atomics
  manual_seed(5);
  const Tensor base = randn({B, T, 3 * D}).to(DType::bf16).to(gpu);
  const Tensor w = randn({B, T, D}).to(DType::bf16).to(gpu);
  const auto run = [&](bool packed, Tensor* merged_view_of) {
    Tensor qkv = base.clone().requires_grad_(true);
    const std::vector<Tensor> parts = split(qkv, D, -1);
    auto heads = [&](const Tensor& t) {
      Tensor h = t.reshape({B, T, H, E}).transpose(1, 2);
      return packed ? h.contiguous() : h;
    };
    const Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                                  {.is_causal = true});
    const Tensor merged = y.transpose(1, 2).reshape({B, T, D});
    if (merged_view_of) *merged_view_of = y;
    if (!packed) EXPECT_EQ(merged.data_ptr(), y.data_ptr()) << "merging the heads copied";
    (merged * w).sum().backward();
    return std::vector<std::vector<float>>{floats(merged), floats(qkv.grad())};
  };
  const auto strided = run(false, nullptr);
  const auto packed = run(true, nullptr);
  set_deterministic(false);
  ASSERT_EQ(strided[0].size(), packed[0].size());
  EXPECT_EQ(strided[0], packed[0]);  // the forward: the same kernel on the same values
  double worst = 0;
  for (size_t i = 0; i < strided[1].size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(strided[1][i] - packed[1][i])) /
                                (1.0 + std::abs(packed[1][i])));
  EXPECT_LT(worst, 2e-2) << "gradients of qkv differ between layouts";
}

}  // namespace
