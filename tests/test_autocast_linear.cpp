// tests/test_autocast_linear.cpp — under autocast, a linear of f32 inputs writes its gradients
// in f32 straight from the 16-bit GEMMs (Note [Autocast's linear writes f32 gradients] in
// src/ops/linalg.cpp): the forward is the cast path's bit for bit, and each gradient is the
// exact sum of the bf16 products to f32 accuracy, where the cast path rounds it to bf16 first.
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
double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

struct Grads {
  Tensor y, x, w, b;
};

// loss = Σ y·r through linear(x, W, b, act) with autocast on (the folded path) or with the
// casts written out (the cast path), both from the same f32 values.
Grads run(bool folded, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& r,
          Activation act, DType low) {
  Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
         b = b0.clone().requires_grad_(true);
  Tensor y;
  if (folded) {
    AutocastGuard autocast(low);
    y = linear(x * 1.0, w, b, act);  // x·1: a non-leaf input, as a layer's activations are
  } else {
    y = linear((x * 1.0).to(low), w.to(low), b.to(low), act);
  }
  (y.to(DType::f32) * r).sum().backward();
  return {y, x.grad(), w.grad(), b.grad()};
}

// The f64 gradients of the 16-bit product: gy = r rounded to `low` (the gradient reaching y),
// dX = gy·Wl, dW = gyᵀ·xl, db = Σ gy, from the rounded operands xl, Wl.
Grads expected(const Tensor& x0, const Tensor& w0, const Tensor& r, const Tensor& y, Activation act,
               DType low) {
  const int64_t in = w0.shape()[1], out = w0.shape()[0];
  Tensor gy = r.to(low).to(DType::f64).reshape({-1, out});
  if (act == Activation::relu)
    gy = gy * gt(y.to(DType::f64).reshape({-1, out}), 0.0).to(DType::f64);
  const Tensor xl = x0.to(low).to(DType::f64).reshape({-1, in});
  const Tensor wl = w0.to(low).to(DType::f64);
  return {Tensor(), matmul(gy, wl).reshape(x0.shape()), matmul(gy.t(), xl), sum(gy, Shape{0})};
}

void check(Device device, DType low, Activation act, std::vector<int64_t> xs, int64_t out) {
  manual_seed(11);
  const int64_t in = xs.back();
  const Tensor x0 = randn(Shape(xs)).to(device);
  const Tensor w0 = (randn({out, in}) * 0.2).to(device);
  const Tensor b0 = (randn({out}) * 0.1).to(device);
  Shape ys(xs);
  ys[ys.size() - 1] = out;
  const Tensor r = randn(ys).to(device);
  const Grads f = run(true, x0, w0, b0, r, act, low);
  const Grads c = run(false, x0, w0, b0, r, act, low);
  // The forward is the cast path's.
  ASSERT_EQ(f.y.dtype(), low);
  EXPECT_EQ(doubles(f.y), doubles(c.y));
  // ... and equals the f64 product of the rounded operands within the low dtype's rounding
  // (the loss's gradient does not depend on y: without this an unwritten y would pass).
  {
    const Tensor xl = x0.to(low).to(DType::f64).reshape({-1, in});
    Tensor yl = matmul(xl, w0.to(low).to(DType::f64).t()) + b0.to(low).to(DType::f64);
    if (act == Activation::relu) yl = relu(yl);
    const double round = low == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
    EXPECT_LT(rel_error(doubles(f.y), doubles(yl)), round);
  }
  // f32 gradients, as exact as f32 accumulation allows; the cast path's are bf16-rounded.
  ASSERT_EQ(f.x.dtype(), DType::f32);
  ASSERT_EQ(f.w.dtype(), DType::f32);
  ASSERT_EQ(f.b.dtype(), DType::f32);
  const Grads e = expected(x0, w0, r, f.y, act, low);
  const double tol = 1e-5;  // f32 sums of up to 2304 products, in another order
  EXPECT_LT(rel_error(doubles(f.x), doubles(e.x)), tol);
  EXPECT_LT(rel_error(doubles(f.w), doubles(e.w)), tol);
  EXPECT_LT(rel_error(doubles(f.b), doubles(e.b)), tol);
  // The cast path rounds each gradient to the low dtype: within its half-ulp of the same values.
  const double round = low == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
  EXPECT_LT(rel_error(doubles(c.x), doubles(f.x)), round);
  EXPECT_LT(rel_error(doubles(c.w), doubles(f.w)), round);
  EXPECT_LT(rel_error(doubles(c.b), doubles(f.b)), round);
}

TEST(AutocastLinear, CpuGradientsAreF32FromTheBf16Product) {
  check(Device::cpu(), DType::bf16, Activation::none, {3, 5, 40}, 24);
}
TEST(AutocastLinear, CpuReluKeepsItsMask) {
  check(Device::cpu(), DType::bf16, Activation::relu, {17, 33}, 9);
}
TEST(AutocastLinear, CpuF16) { check(Device::cpu(), DType::f16, Activation::none, {6, 64}, 48); }

TEST(AutocastLinear, CudaGradientsAreF32FromTheBf16Product) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  // 768 → 2304 over 64 rows: cuBLASLt's BGRADB epilogue writes the f32 bias gradient.
  check(Device::cuda(0), DType::bf16, Activation::none, {2, 32, 768}, 2304);
  // Odd sizes: unaligned rows, the heuristic's other algorithms and the fallbacks.
  check(Device::cuda(0), DType::bf16, Activation::none, {3, 5, 41}, 23);
}
TEST(AutocastLinear, CudaReluAndF16) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check(Device::cuda(0), DType::bf16, Activation::relu, {64, 256}, 128);
  check(Device::cuda(0), DType::f16, Activation::none, {64, 256}, 128);
}

// CUDA's f32 gradients against the CPU's: the same bf16 products summed in f32.
TEST(AutocastLinear, CudaMatchesTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  manual_seed(5);
  const Tensor x0 = randn({128, 96}), w0 = randn({160, 96}) * 0.1, b0 = randn({160}) * 0.1;
  const Tensor r = randn({128, 160});
  const Grads c = run(true, x0, w0, b0, r, Activation::none, DType::bf16);
  const Grads g = run(true, x0.to(Device::cuda(0)), w0.to(Device::cuda(0)), b0.to(Device::cuda(0)),
                      r.to(Device::cuda(0)), Activation::none, DType::bf16);
  EXPECT_LT(rel_error(doubles(g.x), doubles(c.x)), 2e-6);
  EXPECT_LT(rel_error(doubles(g.w), doubles(c.w)), 2e-6);
  EXPECT_LT(rel_error(doubles(g.b), doubles(c.b)), 2e-6);
}

// A 16-bit input (attention's output into its projection) keeps a 16-bit gradient while the
// f32 weight gets an f32 one; a weight used by two linears gets the sum; without a gradient
// the plain autocast path runs and agrees.
TEST(AutocastLinear, MixedInputsSharedWeightsAndNoGrad) {
  manual_seed(3);
  Tensor x = randn({8, 16}).to(DType::bf16).requires_grad_(true);
  Tensor w = (randn({12, 16}) * 0.3).requires_grad_(true);
  Tensor b = (randn({12}) * 0.1).requires_grad_(true);
  Tensor y1, y2;
  {
    AutocastGuard autocast(DType::bf16);
    y1 = linear(x, w, b);
    y2 = linear(x * 2.0, w, b);
  }
  (y1.to(DType::f32).sum() + y2.to(DType::f32).sum()).backward();
  ASSERT_EQ(x.grad().dtype(), DType::bf16);
  ASSERT_EQ(w.grad().dtype(), DType::f32);
  // dW = Σ_rows (1·x + 1·2x) = 3·Σ_rows x for every output row; db = 2·rows.
  const std::vector<double> dw = doubles(w.grad());
  const std::vector<double> sx = doubles(sum(x.to(DType::f64), Shape{0}));
  for (int64_t o = 0; o < 12; ++o)
    for (int64_t i = 0; i < 16; ++i)
      EXPECT_NEAR(dw[static_cast<size_t>(o * 16 + i)], 3.0 * sx[static_cast<size_t>(i)],
                  1e-5 * (1 + std::abs(sx[static_cast<size_t>(i)])));
  for (double v : doubles(b.grad())) EXPECT_EQ(v, 16.0);
  Tensor plain;
  {
    NoGradGuard no_grad;
    AutocastGuard autocast(DType::bf16);
    plain = linear(x, w, b);
  }
  EXPECT_EQ(doubles(plain), doubles(y1));
}

// The checks still name the op: a weight of the wrong width under autocast.
TEST(AutocastLinear, BadShapesStillNameLinear) {
  Tensor x = randn({4, 8}).requires_grad_(true), w = randn({3, 9}).requires_grad_(true);
  AutocastGuard autocast(DType::bf16);
  try {
    (void)linear(x, w, Tensor());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear"), std::string::npos) << e.what();
  }
}

}  // namespace
