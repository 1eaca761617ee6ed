// tests/test_few_rows_gemm.cpp — the CUDA product of a few rows with a weight matrix (Note
// [Products of a few rows] in src/cuda/gemv.cu): a bf16/f16 linear of 1 to 4 rows, with bias
// and each epilogue, against the CPU's f32 computation of the same rounded operands, and
// equal to itself run to run; and linear with a residual (Note [A residual in the product] in
// src/ops/linalg.cpp) on both backends against the composite residual + linear.
#include <gtest/gtest.h>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"

namespace {

using namespace ember;

TEST(FewRowsGemm, CudaLinearOfFewRowsMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(11);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const int64_t m : {1, 2, 3, 4, 5}) {  // 5 rows: cuBLASLt, the same answers
      for (const Activation act : {Activation::none, Activation::relu, Activation::gelu_tanh}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " m " + std::to_string(m));
        const Tensor x = randn({m, 264}).to(dtype), w = (randn({72, 264}) * 0.1).to(dtype);
        const Tensor b = randn({72}).to(dtype);
        const Tensor want = linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), act);
        const Tensor gx = x.to(Device::cuda(0)), gw = w.to(Device::cuda(0)),
                     gb = b.to(Device::cuda(0));
        const Tensor got = linear(gx, gw, gb, act).to(Device::cpu());
        EXPECT_EQ(got.dtype(), dtype);
        // One rounding to the 16-bit dtype of an f32 sum: within 1% of the largest value.
        const double scale = max(abs(want)).item<double>();
        EXPECT_LT(max(abs(got.to(DType::f32) - want)).item<double>(), 1e-2 * scale);
        // no bias, and the same bits again
        const Tensor plain = linear(gx, gw, Tensor(), act).to(Device::cpu());
        EXPECT_EQ(max(abs(plain.to(DType::f32) -
                          linear(gx, gw, Tensor(), act).to(Device::cpu()).to(DType::f32)))
                      .item<double>(),
                  0.0);
      }
    }
  }
}

// The sum's one rounding against the composite's two: within one unit of the dtype's last
// place at the largest value, per element.
void expect_near_composite(const Tensor& got, const Tensor& composite, double rel) {
  ASSERT_EQ(got.shape(), composite.shape());
  ASSERT_EQ(got.dtype(), composite.dtype());
  const Tensor a = got.to(Device::cpu()).to(DType::f64),
               b = composite.to(Device::cpu()).to(DType::f64);
  const double scale = max(abs(b)).item<double>();
  EXPECT_LE(max(abs(a - b)).item<double>(), rel * scale);
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         max(abs(a.to(DType::f64) - b.to(DType::f64))).item<double>() == 0.0;
}

TEST(ResidualLinear, CpuEqualsTheCompositeAndKeepsItsGradients) {
  manual_seed(12);
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    NoGradGuard no_grad;
    for (const int64_t rows : {1, 3, 17}) {
      const Tensor x = randn({rows, 2, 40}).to(dtype), w = randn({24, 40}).to(dtype);
      const Tensor b = randn({24}).to(dtype), r = randn({rows, 2, 24}).to(dtype);
      const double rel = dtype == DType::bf16 ? 8e-3 : dtype == DType::f32 ? 1e-6 : 1e-14;
      expect_near_composite(linear(x, w, b, r), r + linear(x, w, b), rel);
      expect_near_composite(linear(x, w, Tensor(), r), r + linear(x, w), rel);
      // an empty inner dimension: the bias plus the residual
      const Tensor x0 = zeros({rows, 2, 0}, {.dtype = dtype}),
                   w0 = zeros({24, 0}, {.dtype = dtype});
      expect_near_composite(linear(x0, w0, b, r), r + b, rel);
    }
  }
  // a residual that only broadcasts, or of another dtype: the composite, exactly
  const Tensor x = randn({3, 8}), w = randn({5, 8}), b = randn({5}), row = randn({5});
  EXPECT_TRUE(same(linear(x, w, b, row), row + linear(x, w, b)));
  const Tensor r64 = randn({3, 5}, {.dtype = DType::f64});
  EXPECT_TRUE(same(linear(x, w, b, r64), r64 + linear(x, w, b)));
  // with a gradient: the composite's values and gradients
  const Tensor xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_(),
               rg = randn({3, 5}).requires_grad_();
  const Tensor y = linear(xg, wg, b, rg);
  EXPECT_TRUE(same(y, rg + linear(x, w, b)));
  (y * y).sum().backward();
  const Tensor xc = x.clone().requires_grad_(), wc = w.clone().requires_grad_(),
               rc = rg.detach().clone().requires_grad_();
  (square(rc + linear(xc, wc, b))).sum().backward();
  EXPECT_TRUE(same(rg.grad(), rc.grad()));
  EXPECT_TRUE(same(xg.grad(), xc.grad()));
  EXPECT_TRUE(same(wg.grad(), wc.grad()));
  // Linear::forward(x, residual): a forward hook sees the layer's own output, the add after it
  nn::Linear layer(8, 5);
  Tensor hooked;
  auto handle = layer->register_forward_hook(
      [&](nn::ModuleImpl&, const Tensor&, const Tensor& out) -> std::optional<Tensor> {
        hooked = out;
        return out * 2.0;
      });
  NoGradGuard no_grad;
  const Tensor r = randn({3, 5});
  const Tensor out = layer->forward(x, r);
  EXPECT_TRUE(same(hooked, linear(x, layer->weight(), layer->bias())));
  EXPECT_TRUE(same(out, r + hooked * 2.0));
  handle.remove();
  expect_near_composite(layer->forward(x, r), r + layer(x), 1e-6);
}

// On the GPU: the few-rows kernel adds the residual (1-4 rows, bf16/f16), cuBLASLt gets it
// copied into C (more rows, and f32); both against the composite on the same device.
TEST(ResidualLinear, CudaEqualsTheComposite) {
  SKIP_WITHOUT_CUDA();
  manual_seed(13);
  NoGradGuard no_grad;
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    for (const int64_t m : {1, 2, 4, 5, 64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " m " + std::to_string(m));
      const Tensor x = randn({m, 264}).to(dtype).to(gpu),
                   w = (randn({72, 264}) * 0.1).to(dtype).to(gpu);
      const Tensor b = randn({72}).to(dtype).to(gpu), r = (randn({m, 72}) * 4).to(dtype).to(gpu);
      const double rel = dtype == DType::f32 ? 1e-5 : 1e-2;
      expect_near_composite(linear(x, w, b, r), r + linear(x, w, b), rel);
      expect_near_composite(linear(x, w, Tensor(), r), r + linear(x, w), rel);
      // against the CPU's f64 sum of the same operands
      const Tensor want =
          r.to(Device::cpu()).to(DType::f64) + linear(x.to(Device::cpu()).to(DType::f64),
                                                      w.to(Device::cpu()).to(DType::f64),
                                                      b.to(Device::cpu()).to(DType::f64));
      expect_near_composite(linear(x, w, b, r).to(DType::f64), want, rel);
    }
  }
}

}  // namespace
