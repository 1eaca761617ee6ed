// tests/test_cross_entropy_half.cpp — cross_entropy of bf16/f16 logits under autocast reads them
// directly on a GPU (Note [Cross-entropy of 16-bit logits] in src/ops/loss.cpp): loss and
// gradient bitwise those of the cast path (logits cast to f32, the f32 gradient cast back).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::floats;

void check(DType half, Reduction reduction, double smoothing) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the 16-bit path is the GPU's";
  const Device gpu = Device::cuda(0);
  manual_seed(7);
  const Tensor base = (randn({300, 1000}) * 4.0).to(half).to(gpu);
  // Two rows ignored (ignore_index -100).
  const Tensor target =
      index_fill(randint(0, 1000, {300}), 0, arange(0, 2).to(DType::i64), -100.0).to(gpu);
  const CrossEntropyOptions o{.reduction = reduction, .label_smoothing = smoothing};
  // The fused path: autocast on, the 16-bit logits read as they are.
  Tensor a = base.clone().requires_grad_(true);
  Tensor loss_a;
  {
    AutocastGuard autocast(half);
    loss_a = cross_entropy(a, target, o);
  }
  // The cast path, written out: f32 logits, the f32 gradient cast back by the cast's backward.
  Tensor b = base.clone().requires_grad_(true);
  Tensor loss_b = cross_entropy(b.to(DType::f32), target, o);
  EXPECT_EQ(loss_a.dtype(), DType::f32);
  EXPECT_EQ(floats(loss_a), floats(loss_b));
  Tensor w = randn(loss_a.shape()).to(gpu);
  (loss_a * w).sum().backward();
  (loss_b * w).sum().backward();
  ASSERT_EQ(a.grad().dtype(), half);
  EXPECT_EQ(floats(a.grad()), floats(b.grad()));
}

TEST(CrossEntropyHalf, Bf16MeanIsTheCastPathBitwise) { check(DType::bf16, Reduction::mean, 0.0); }
TEST(CrossEntropyHalf, F16SumWithSmoothingIsTheCastPathBitwise) {
  check(DType::f16, Reduction::sum, 0.1);
}
TEST(CrossEntropyHalf, Bf16PerRowIsTheCastPathBitwise) { check(DType::bf16, Reduction::none, 0.0); }

// Outside autocast, 16-bit logits are not the fused kernel's: refused by the catalogue as before.
TEST(CrossEntropyHalf, WithoutAutocastHalfLogitsAreRefusedAsBefore) {
  const Tensor logits = randn({4, 5}).to(DType::bf16);
  EXPECT_THROW(cross_entropy(logits, randint(0, 5, {4})), Error);
}

}  // namespace
