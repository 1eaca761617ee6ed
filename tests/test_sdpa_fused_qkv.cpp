// tests/test_sdpa_fused_qkv.cpp — when q, k and v are head views of one fused projection,
// the fused attention's backward writes their gradients into one buffer shaped like the
// projection's output (Note [Attention's gradients in the fused projection] in
// src/ops/attention.cpp): bitwise the gradients of the plain path, also when a view is used
// elsewhere too or asked for by autograd::grad.
#include <gtest/gtest.h>

#include <vector>

#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::floats;

constexpr int64_t kB = 2, kT = 64, kH = 4, kE = 32, kC = kH * kE;

struct Result {
  Tensor dx, dw, db, dq;
};

// y = sdpa(heads(split(x·Wᵀ + b))) with the heads as views (`views`) or as copies (the plain
// path: contiguous() breaks the views); loss = Σ y·r [+ Σ q·r2]; optionally dL/dq through grad.
Result run(bool views, bool q_elsewhere, bool ask_q) {
  const Device gpu = Device::cuda(0);
  manual_seed(9);
  Tensor x = randn({kB, kT, kC}).to(DType::bf16).to(gpu).requires_grad_(true);
  Tensor w = (randn({3 * kC, kC}) * 0.1).to(DType::bf16).to(gpu).requires_grad_(true);
  Tensor b = (randn({3 * kC}) * 0.1).to(DType::bf16).to(gpu).requires_grad_(true);
  const Tensor r = randn({kB, kH, kT, kE}).to(DType::bf16).to(gpu);
  const std::vector<Tensor> qkv = split(linear(x, w, b), kC, -1);
  auto heads = [&](const Tensor& t) {
    Tensor h = t.reshape({kB, kT, kH, kE}).transpose(1, 2);
    return views ? h : h.contiguous();
  };
  const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor y = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  Tensor loss = (y * r).to(DType::f32).sum();
  if (q_elsewhere) loss = loss + (q * r).to(DType::f32).sum();
  if (ask_q) {
    const std::vector<Tensor> g = grad({loss}, {x, w, b, q});
    return {g[0], g[1], g[2], g[3]};
  }
  loss.backward();
  return {x.grad(), w.grad(), b.grad(), Tensor()};
}

void expect_same(const Result& a, const Result& b) {
  EXPECT_EQ(floats(a.dx), floats(b.dx));
  EXPECT_EQ(floats(a.dw), floats(b.dw));
  EXPECT_EQ(floats(a.db), floats(b.db));
  if (a.dq.defined() || b.dq.defined()) EXPECT_EQ(floats(a.dq), floats(b.dq));
}

TEST(SdpaFusedQkv, GradientsAreThePlainPathsBitwise) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the fused attention is the GPU's";
  expect_same(run(true, false, false), run(false, false, false));
}

TEST(SdpaFusedQkv, AViewUsedElsewhereAddsItsGradient) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the fused attention is the GPU's";
  expect_same(run(true, true, false), run(false, true, false));
}

TEST(SdpaFusedQkv, AnObservedViewGetsItsOwnGradient) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the fused attention is the GPU's";
  const Result a = run(true, false, true), b = run(false, false, true);
  ASSERT_TRUE(a.dq.defined());
  expect_same(a, b);
}

}  // namespace
