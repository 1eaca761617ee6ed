// tests/test_gelu_linear.cpp — linear(x, W, b, Activation::gelu_tanh) with a gradient keeps its
// pre-activation from the GEMM's epilogue, and the next linear applies GELU's backward in its
// own GEMM when its gradient is the only one (Note [GELU backward in the next GEMM] in
// src/ops/linalg.cpp). On the CPU in f32 the values are the unfused path's; in bf16 on a GPU
// within a rounding of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::doubles;

// max |a - b| / max |b|.
double rel_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = doubles(a), y = doubles(b);
  EXPECT_EQ(x.size(), y.size());
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    err = std::max(err, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return err / scale;
}

struct GeluMlp {
  Tensor x, w1, b1, w2, b2, r;
};

GeluMlp make(Device device, DType dtype, int64_t rows, int64_t d, int64_t hidden) {
  manual_seed(21);
  const auto p = [&](Tensor t) { return t.to(dtype).to(device).requires_grad_(true); };
  return {p(randn({rows, d})),          p(randn({hidden, d}) * 0.1), p(randn({hidden}) * 0.1),
          p(randn({d, hidden}) * 0.05), p(randn({d}) * 0.1),         randn({rows, d}).to(device)};
}

struct Out {
  Tensor y, dx, dw1, db1, dw2, db2;
};

// loss = Σ r·(c_proj(gelu(c_fc(x)))) [+ Σ h (a second consumer of h)], with the GELU in the
// first linear (`folded`) or as its own op.
Out run(const GeluMlp& m, bool folded, bool second_use = false, bool autocast = false) {
  for (const Tensor* t : {&m.x, &m.w1, &m.b1, &m.w2, &m.b2}) t->zero_grad();
  Tensor h, y;
  {
    AutocastGuard guard(DType::bf16, autocast);
    h = folded ? linear(m.x * 1.0, m.w1, m.b1, Activation::gelu_tanh)
               : gelu(linear(m.x * 1.0, m.w1, m.b1), "tanh");
    y = linear(h, m.w2, m.b2);
  }
  Tensor loss = (y.to(DType::f32) * m.r).sum();
  if (second_use) loss = loss + h.to(DType::f32).sum() * 0.5;
  loss.backward();
  return {y, m.x.grad(), m.w1.grad(), m.b1.grad(), m.w2.grad(), m.b2.grad()};
}

void expect_bitwise(const Out& a, const Out& b) {
  EXPECT_EQ(doubles(a.y), doubles(b.y));
  EXPECT_EQ(doubles(a.dx), doubles(b.dx));
  EXPECT_EQ(doubles(a.dw1), doubles(b.dw1));
  EXPECT_EQ(doubles(a.dw2), doubles(b.dw2));
  EXPECT_EQ(doubles(a.db2), doubles(b.db2));
  EXPECT_LT(rel_error(a.db1, b.db1), 1e-6);  // the same sums, in another order
}

// Every output and gradient of `got` within `tol` (rel_error) of `want`'s.
void expect_within(const Out& got, const Out& want, double tol) {
  const std::pair<const Tensor*, const Tensor*> pairs[] = {
      {&got.y, &want.y},     {&got.dx, &want.dx},   {&got.dw1, &want.dw1},
      {&got.db1, &want.db1}, {&got.dw2, &want.dw2}, {&got.db2, &want.db2}};
  for (const auto& [g, w] : pairs) EXPECT_LT(rel_error(*g, *w), tol);
}

TEST(GeluLinear, CpuF32IsTheUnfusedPath) {
  const GeluMlp m = make(Device::cpu(), DType::f32, 24, 16, 64);
  const Out a = run(m, true), b = run(m, false);
  expect_bitwise(a, b);
}

TEST(GeluLinear, CpuF64OddSizes) {
  const GeluMlp m = make(Device::cpu(), DType::f64, 7, 5, 13);
  expect_bitwise(run(m, true), run(m, false));
}

// h also feeds the loss directly: the second linear must not apply GELU's backward to its
// share (the derivative would be applied to part of the sum only, or twice).
TEST(GeluLinear, ASecondConsumerOfTheActivationIsNotFolded) {
  const GeluMlp m = make(Device::cpu(), DType::f32, 24, 16, 64);
  expect_bitwise(run(m, true, true), run(m, false, true));
}

// autograd::grad asking for h's gradient gets dL/dh, not the pre-activation's gradient.
TEST(GeluLinear, AnObservedActivationGradientIsTheActivations) {
  const GeluMlp m = make(Device::cpu(), DType::f32, 12, 8, 32);
  Tensor h = linear(m.x * 1.0, m.w1, m.b1, Activation::gelu_tanh);
  Tensor loss = (linear(h, m.w2, m.b2) * m.r).sum();
  const std::vector<Tensor> g = grad({loss}, {h, m.w1});
  // dL/dh = r·W2, the plain product.
  EXPECT_LT(rel_error(g[0], matmul(m.r, m.w2.detach())), 1e-6);
  Tensor h2 = gelu(linear(m.x * 1.0, m.w1, m.b1), "tanh");
  const std::vector<Tensor> g2 = grad({(linear(h2, m.w2, m.b2) * m.r).sum()}, {h2, m.w1});
  EXPECT_EQ(doubles(g[1]), doubles(g2[1]));
}

// Recomputed in the backward (activation checkpointing): the same gradients.
TEST(GeluLinear, UnderCheckpointTheGradientsAreThePlainOnes) {
  const GeluMlp m = make(Device::cpu(), DType::f32, 16, 8, 32);
  const Out plain = run(m, true);
  const std::vector<double> dx = doubles(plain.dx), dw1 = doubles(plain.dw1);
  m.x.zero_grad();
  m.w1.zero_grad();
  Tensor y = checkpoint(
      [&](const std::vector<Tensor>& in) {
        return linear(linear(in[0] * 1.0, m.w1, m.b1, Activation::gelu_tanh), m.w2, m.b2);
      },
      {m.x});
  (y * m.r).sum().backward();
  EXPECT_EQ(doubles(m.x.grad()), dx);
  EXPECT_EQ(doubles(m.w1.grad()), dw1);
}

TEST(GeluLinear, CudaF32MatchesTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const GeluMlp c = make(Device::cpu(), DType::f32, 64, 96, 384);
  const GeluMlp g = make(Device::cuda(0), DType::f32, 64, 96, 384);
  expect_within(run(g, true), run(c, true), 2e-5);
}

// GPT-2's MLP under autocast (f32 parameters, bf16 GEMMs): the epilogues against the unfused
// path, within bf16 rounding (the pre-activation and the folded gradient are rounded once).
TEST(GeluLinear, CudaBf16AutocastWithinARoundingOfTheUnfusedPath) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const GeluMlp m = make(Device::cuda(0), DType::f32, 256, 768, 3072);
  const Out a = run(m, true, false, true);
  expect_within(a, run(m, false, false, true), 1.5e-2);
  EXPECT_EQ(a.dw1.dtype(), DType::f32);
  // Both far from a wrong fold: GELU's derivative applied twice or not at all is O(1) off.
  const Out twice_check = run(m, true, true, true), plain_check = run(m, false, true, true);
  EXPECT_LT(rel_error(twice_check.dx, plain_check.dx), 1.5e-2);
}

}  // namespace
