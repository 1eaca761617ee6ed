// tests/test_batch_norm_half.cpp — batch_norm of f16/bf16 inputs with f32 statistics and
// parameters (Note [16-bit batch norm] in src/ops/norm.cpp): the dtypes each result comes in,
// autocast keeping a convolutional network's activations 16-bit, the running statistics, the
// CPU against the f32 computation, and the GPU's kernels (16-bit data, f32 per-channel values;
// NCHW and channels_last) against the CPU. The catalogue's dtype and device tiers run the
// all-16-bit case (parameters of the input's dtype) from the op fixtures.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/norm.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"

namespace ember {
namespace {

using ember_test::expect_close;
using test_util::error_of;

struct NormRun {
  Tensor y, gx, gw, gb, running_mean, running_var;
};

// batch_norm of x (cast to `dtype`) with f32 weight, bias and running statistics on `device`;
// the gradients of sum(y · r) for a fixed r. Everything comes back to the CPU.
NormRun run(const Tensor& x, DType dtype, Device device, bool training, MemoryFormat format) {
  manual_seed(7);
  const int64_t c = x.size(1);
  Tensor xl = x.to(device).to(dtype).to(format).detach();
  xl.requires_grad_(true);
  Tensor w = (randn({c}) * 0.5f + 1.0f).to(device).detach(), b = randn({c}).to(device).detach();
  w.requires_grad_(true);
  b.requires_grad_(true);
  Tensor rm = (randn({c}) * 0.1f).to(device), rv = (rand({c}) + 0.5f).to(device);
  NormRun r;
  Tensor y = batch_norm(xl, rm, rv, w, b, training, 0.1, 1e-5);
  EXPECT_EQ(y.dtype(), dtype) << "the output keeps the input's dtype";
  EXPECT_EQ(rm.dtype(), DType::f32);
  (y.to(DType::f32) * randn(y.shape()).to(device)).sum().backward();
  EXPECT_EQ(xl.grad().dtype(), dtype);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  const auto host = [](const Tensor& t) { return t.to(Device::cpu()).to(DType::f32); };
  return {host(y), host(xl.grad()), host(w.grad()), host(b.grad()), host(rm), host(rv)};
}

void expect_runs_close(const NormRun& got, const NormRun& want, double tol,
                       const std::string& what) {
  expect_close(got.y, want.y, tol, tol, what + " output");
  expect_close(got.gx, want.gx, tol, tol, what + " input gradient");
  expect_close(got.gw, want.gw, tol, tol, what + " weight gradient");
  expect_close(got.gb, want.gb, tol, tol, what + " bias gradient");
  expect_close(got.running_mean, want.running_mean, 1e-5, 1e-5, what + " running_mean");
  expect_close(got.running_var, want.running_var, 1e-5, 1e-5, what + " running_var");
}

Tensor input() {
  manual_seed(3);
  return randn({4, 6, 5, 3}) * 2.0f + 0.5f;
}

TEST(BatchNormHalf, Bf16AndF16AgainstTheF32Computation) {
  // A 16-bit input is normalised in f32 and rounded once: against the f32 run on the same
  // (16-bit-representable) values, within the 16-bit dtype's rounding.
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Tensor x = input().to(dtype).to(DType::f32);
    for (bool training : {true, false}) {
      const std::string what = std::string(dtype_name(dtype)) + (training ? " train" : " eval");
      const NormRun want = run(x, DType::f32, Device::cpu(), training, MemoryFormat::contiguous);
      const double tol = dtype == DType::bf16 ? 2e-2 : 4e-3;
      expect_runs_close(run(x, dtype, Device::cpu(), training, MemoryFormat::contiguous), want, tol,
                        what);
    }
  }
}

TEST(BatchNormHalf, SixteenBitRunningStatisticsAreWidenedAndWrittenBack) {
  const Tensor x = input().to(DType::bf16);
  Tensor rm = zeros({6}, {.dtype = DType::bf16}), rv = ones({6}, {.dtype = DType::bf16});
  Tensor w = ones({6}, {.dtype = DType::bf16}), b = zeros({6}, {.dtype = DType::bf16});
  const Tensor y = batch_norm(x, rm, rv, w, b, true, 0.5, 1e-5);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(rm.dtype(), DType::bf16) << "a buffer keeps its dtype";
  const Tensor xf = x.to(DType::f32);
  expect_close(rm.to(DType::f32), mean(xf, Shape{0, 2, 3}) * 0.5f, 1e-2, 1e-2, "running_mean");
}

TEST(BatchNormHalf, AutocastKeepsConvolutionActivationsSixteenBit) {
  nn::Sequential net{nn::Conv2d(3, 8, 3, 1, 1), nn::BatchNorm2d(8), nn::ReLU()};
  manual_seed(5);
  const Tensor x = randn({2, 3, 8, 8});
  Tensor y;
  {
    AutocastGuard autocast(DType::bf16);
    y = net(x);
  }
  EXPECT_EQ(y.dtype(), DType::bf16) << "conv (bf16) -> batch_norm (bf16 with f32 statistics)";
  const Tensor want = net(x);  // f32 all the way
  expect_close(y.to(DType::f32), want, 3e-2, 3e-2, "autocast against f32");
}

TEST(BatchNormHalf, ParametersOfAnotherWideDtypeAreRefused) {
  const Tensor x = input().to(DType::bf16);
  const Tensor w = ones({6}, {.dtype = DType::f64});
  const std::string e =
      error_of([&] { (void)batch_norm(x, Tensor(), Tensor(), w, Tensor(), true, 0.1, 1e-5); });
  EXPECT_NE(e.find("batch_norm"), std::string::npos) << e;
  EXPECT_NE(e.find("f64"), std::string::npos) << e;
}

TEST(BatchNormHalfCuda, KernelsAgainstTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::bf16, DType::f16})
    for (MemoryFormat format : {MemoryFormat::contiguous, MemoryFormat::channels_last})
      for (bool training : {true, false}) {
        const std::string what = std::string(dtype_name(dtype)) + (training ? " train" : " eval") +
                                 (format == MemoryFormat::channels_last ? " NHWC" : " NCHW");
        const Tensor x = input().to(dtype).to(DType::f32);
        const double tol = dtype == DType::bf16 ? 2e-2 : 4e-3;
        expect_runs_close(run(x, dtype, Device::cuda(0), training, format),
                          run(x, dtype, Device::cpu(), training, MemoryFormat::contiguous), tol,
                          what);
      }
}

}  // namespace
}  // namespace ember
