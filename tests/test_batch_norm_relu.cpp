// tests/test_batch_norm_relu.cpp — batch_norm_relu (relu(batch_norm(x) + residual) in one pass,
// ReLU's backward folded into batch norm's: src/ops/norm.cpp) against the composite it stands
// for: outputs, running statistics and every gradient bit for bit, on the CPU and the GPU, in
// each memory format, training and eval; its f64 gradients against finite differences; the
// modules that use it (BatchNorm2d::forward_relu, Sequential's BatchNorm-ReLU fusion, ResNet's
// blocks) and the batch norm per-channel kernels (Note [Batch norm's per-channel arithmetic in
// one kernel]) by the kernels they launch.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/norm.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "slot_calls.hpp"

namespace ember {
namespace {

using test_util::error_of;

// Bit-for-bit equality of two tensors' values (same shape and dtype; NaN nowhere).
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_TRUE(want.defined()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor a = got.to(Device::cpu()).to(DType::f64), b = want.to(Device::cpu()).to(DType::f64);
  EXPECT_EQ(max(abs(a - b)).item<double>(), 0.0) << what;
}

struct BnCase {
  bool training, residual, residual_grad;
  MemoryFormat format;
};

struct BnRun {
  Tensor y, gx, gw, gb, gr, running_mean, running_var;
};

// One forward and backward of the fused op (fused) or the composite, from the same values.
BnRun bn_run(bool fused, const BnCase& c, DType dtype, Device device) {
  manual_seed(31);
  const int64_t channels = 8;
  Tensor x = (randn({4, channels, 5, 6}) * 2.0f + 0.3f).to(dtype).to(device);
  x = x.contiguous(c.format).detach().requires_grad_(true);
  Tensor r = randn({4, channels, 5, 6}).to(dtype).to(device).contiguous(c.format).detach();
  if (c.residual_grad) r.requires_grad_(true);
  Tensor w = (randn({channels}) * 0.5f + 1.0f).to(dtype).to(device).detach().requires_grad_(true);
  Tensor b = randn({channels}).to(dtype).to(device).detach().requires_grad_(true);
  Tensor rm = randn({channels}).to(dtype).to(device), rv = (rand({channels}) + 0.5f).to(dtype);
  rv = rv.to(device);
  const Tensor res = c.residual ? r : Tensor();
  Tensor y = fused ? batch_norm_relu(x, rm, rv, w, b, c.training, 0.1, 1e-5, res)
                   : relu(c.residual ? add(batch_norm(x, rm, rv, w, b, c.training, 0.1, 1e-5), r)
                                     : batch_norm(x, rm, rv, w, b, c.training, 0.1, 1e-5));
  const Tensor weight = randn({4, channels, 5, 6}).to(dtype).to(device);
  sum(mul(y, weight)).backward();
  return {y, x.grad(), w.grad(), b.grad(), c.residual_grad ? r.grad() : Tensor(), rm, rv};
}

std::vector<BnCase> bn_cases() {
  std::vector<BnCase> cases;
  for (const bool training : {true, false})
    for (const MemoryFormat format : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
      cases.push_back({training, false, false, format});
      cases.push_back({training, true, false, format});
      cases.push_back({training, true, true, format});
    }
  return cases;
}

std::string bn_describe(const BnCase& c, DType dtype, Device device) {
  return std::string(dtype_name(dtype)) + (device.is_cpu() ? " cpu" : " cuda") +
         (c.training ? " training" : " eval") + (c.residual ? " residual" : "") +
         (c.residual_grad ? " (with grad)" : "") +
         (c.format == MemoryFormat::channels_last ? " channels_last" : " contiguous");
}

void expect_fused_equals_composite(DType dtype, Device device) {
  for (const BnCase& c : bn_cases()) {
    const std::string what = bn_describe(c, dtype, device);
    SCOPED_TRACE(what);
    const BnRun f = bn_run(true, c, dtype, device), u = bn_run(false, c, dtype, device);
    expect_same_bits(f.y, u.y, "output");
    EXPECT_EQ(f.y.suggest_memory_format(), c.format);
    expect_same_bits(f.gx, u.gx, "input gradient");
    expect_same_bits(f.gw, u.gw, "weight gradient");
    expect_same_bits(f.gb, u.gb, "bias gradient");
    if (c.residual_grad) expect_same_bits(f.gr, u.gr, "residual gradient");
    expect_same_bits(f.running_mean, u.running_mean, "running mean");
    expect_same_bits(f.running_var, u.running_var, "running var");
    // The ReLU clipped a good part of the output (the test reaches both sides of the gate).
    const double zeros = eq(f.y, 0.0).to(DType::f64).mean().item<double>();
    EXPECT_GT(zeros, 0.1);
    EXPECT_LT(zeros, 0.9);
  }
}

TEST(BatchNormRelu, CpuEqualsTheCompositeBitForBit) {
  expect_fused_equals_composite(DType::f32, Device::cpu());
  expect_fused_equals_composite(DType::f64, Device::cpu());
}

TEST(BatchNormRelu, CudaEqualsTheCompositeBitForBit) {
  SKIP_WITHOUT_CUDA();
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16})
    expect_fused_equals_composite(dtype, Device::cuda(0));
}

// The GPU's fused op against the CPU's (f32: within rounding of the f64 sums' order).
TEST(BatchNormRelu, CudaMatchesTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (const BnCase& c : bn_cases()) {
    SCOPED_TRACE(bn_describe(c, DType::f32, Device::cuda(0)));
    const BnRun g = bn_run(true, c, DType::f32, Device::cuda(0));
    const BnRun h = bn_run(true, c, DType::f32, Device::cpu());
    ember_test::expect_close(g.y.to(Device::cpu()), h.y, 1e-5, 1e-5, "output");
    ember_test::expect_close(g.gx.to(Device::cpu()), h.gx, 1e-4, 1e-5, "input gradient");
    ember_test::expect_close(g.gw.to(Device::cpu()), h.gw, 1e-4, 1e-5, "weight gradient");
    ember_test::expect_close(g.gb.to(Device::cpu()), h.gb, 1e-4, 1e-5, "bias gradient");
    ember_test::expect_close(g.running_var.to(Device::cpu()), h.running_var, 1e-6, 1e-6,
                             "running var");
  }
}

// Channels-last shapes that take the 16-byte packs of src/cuda/batch_norm.cu (Notes [Column
// sums in packs] and [Channel affine in packs]): 64 channels over parts long enough for the
// unrolled rows and a tail (33·32·32 rows), 320 channels over two column blocks whose second is
// mostly past the last channel, 24 channels (a whole pack for f32 and f64, none for 16-bit
// data), and a batch smaller than a block's rows; training with a residual and the ReLU gate.
// The GPU against the CPU on the same values: the statistics (through the running buffers)
// and the backward's sums (the weight and bias gradients) tightly, the 16-bit outputs and
// input gradient within a rounding of their dtype.
TEST(BatchNormRelu, CudaChannelsLastPacksMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  struct Dims {
    int64_t n, c, h, w;
  };
  for (const Dims s :
       {Dims{33, 64, 32, 32}, Dims{8, 320, 32, 32}, Dims{4, 24, 20, 20}, Dims{2, 8, 3, 5}})
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " [" + std::to_string(s.n) + ", " +
                   std::to_string(s.c) + ", " + std::to_string(s.h) + ", " + std::to_string(s.w) +
                   "] channels_last");
      const bool half = dtype == DType::bf16 || dtype == DType::f16;
      const DType per_channel = half ? DType::f32 : dtype;
      const auto run = [&](Device device) {
        manual_seed(12);
        const Shape shape{s.n, s.c, s.h, s.w};
        Tensor x = (randn(shape) * 1.5f + 0.7f).to(dtype).to(device);
        x = x.contiguous(MemoryFormat::channels_last).detach().requires_grad_(true);
        const Tensor r = randn(shape).to(dtype).to(device).contiguous(MemoryFormat::channels_last);
        Tensor w = (randn({s.c}) * 0.5f + 1.0f).to(per_channel).to(device).detach();
        Tensor b = randn({s.c}).to(per_channel).to(device).detach();
        w.requires_grad_(true);
        b.requires_grad_(true);
        Tensor rm = zeros({s.c}, {.dtype = per_channel}).to(device);
        Tensor rv = ones({s.c}, {.dtype = per_channel}).to(device);
        const Tensor y = batch_norm_relu(x, rm, rv, w, b, true, 0.5, 1e-5, r);
        sum(mul(y, randn(shape).to(dtype).to(device))).backward();
        const auto host = [](const Tensor& t) { return t.to(Device::cpu()).to(DType::f64); };
        return BnRun{host(y),  host(x.grad()), host(w.grad()), host(b.grad()),
                     Tensor(), host(rm),       host(rv)};
      };
      const BnRun g = run(Device::cuda(0)), h = run(Device::cpu());
      const double sums = dtype == DType::f64 ? 1e-12 : half ? 1e-4 : 1e-5;
      const double data = dtype == DType::f64    ? 1e-12
                          : dtype == DType::bf16 ? 1e-2
                          : dtype == DType::f16  ? 2e-3
                                                 : 1e-4;
      ember_test::expect_close(g.running_mean, h.running_mean, sums, sums, "running mean");
      ember_test::expect_close(g.running_var, h.running_var, sums, sums, "running var");
      ember_test::expect_close(g.gw, h.gw, sums, sums, "weight gradient");
      ember_test::expect_close(g.gb, h.gb, sums, sums, "bias gradient");
      ember_test::expect_close(g.y, h.y, data, data, "output");
      ember_test::expect_close(g.gx, h.gx, data, data, "input gradient");
    }
}

TEST(BatchNormRelu, F64GradientsMatchFiniteDifferences) {
  manual_seed(5);
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    const Tensor rm = randn({3}, {.dtype = DType::f64});
    const Tensor rv = rand({3}, {.dtype = DType::f64}) + 0.5;
    const auto fn = [&](const std::vector<Tensor>& in) {
      // Copies of the running statistics: each evaluation starts from the same ones.
      return batch_norm_relu(in[0], rm.clone(), rv.clone(), in[1], in[2], training, 0.1, 1e-5,
                             in[3]);
    };
    const std::vector<Tensor> in = {
        randn({2, 3, 2, 3}, {.dtype = DType::f64}), randn({3}, {.dtype = DType::f64}) + 1.0,
        randn({3}, {.dtype = DType::f64}), randn({2, 3, 2, 3}, {.dtype = DType::f64})};
    const GradcheckResult r = gradcheck(fn, in);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(BatchNormRelu, RefusesAResidualOfAnotherShape) {
  const Tensor x = randn({2, 3, 4, 4}), w = ones({3}), b = zeros({3});
  const std::string e = error_of([&] {
    batch_norm_relu(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5, randn({2, 3, 4, 5}));
  });
  EXPECT_NE(e.find("batch_norm_relu: residual shape [2, 3, 4, 5]"), std::string::npos) << e;
  EXPECT_NE(e.find("[2, 3, 4, 4]"), std::string::npos) << e;
  const std::string u =
      error_of([&] { batch_norm_relu(Tensor(), Tensor(), Tensor(), w, b, true); });
  EXPECT_NE(u.find("batch_norm"), std::string::npos) << u;
}

TEST(BatchNormRelu, CudaRefusesAResidualOnAnotherDevice) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({2, 3, 4, 4}).to(Device::cuda(0));
  const Tensor w = ones({3}).to(Device::cuda(0)), b = zeros({3}).to(Device::cuda(0));
  const std::string e = error_of([&] {
    batch_norm_relu(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5, randn({2, 3, 4, 4}));
  });
  EXPECT_NE(e.find("batch_norm_relu"), std::string::npos) << e;
  EXPECT_NE(e.find("cpu"), std::string::npos) << e;
}

// A residual of another dtype promotes in the add, as the composite does.
TEST(BatchNormRelu, AResidualOfAnotherDtypePromotes) {
  manual_seed(2);
  const Tensor x = randn({2, 3, 4, 4}), w = ones({3}), b = zeros({3});
  const Tensor r = randn({2, 3, 4, 4}, {.dtype = DType::f64});
  const Tensor y = batch_norm_relu(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5, r);
  EXPECT_EQ(y.dtype(), DType::f64);
  expect_same_bits(y, relu(add(batch_norm(x, Tensor(), Tensor(), w, b, true), r)), "promoted");
}

// Training: batch norm is stats, the per-channel arithmetic and the affine: one kernel each
// (the per-channel arithmetic once was a dozen); with the fused ReLU no ReLU kernel runs, and
// in the backward neither ReLU's backward nor any per-channel element kernel.
void expect_batch_norm_kernels(Device device) {
  manual_seed(4);
  nn::BatchNorm2d bn(8);
  bn->to(device);
  const Tensor x = randn({2, 8, 4, 4}).to(device).detach().requires_grad_(true);
  Tensor y;
  const auto forward = ember_test::slot_calls([&] { y = bn->forward_relu(x); });
  EXPECT_EQ(forward.count("batch_norm_prepare"), 1u);
  EXPECT_EQ(forward.at("batch_norm_prepare"), 1);
  EXPECT_EQ(forward.at("channel_affine"), 1);
  EXPECT_EQ(forward.count("unary"), 0u);  // no ReLU, no rsqrt, no per-channel mul/add
  const auto backward = ember_test::slot_calls([&] { sum(y).backward(); });
  EXPECT_EQ(backward.at("batch_norm_backward_prepare"), 1);
  EXPECT_EQ(backward.at("batch_norm_backward_reduce"), 1);
  EXPECT_EQ(backward.at("channel_affine"), 1);
  EXPECT_EQ(backward.count("binary"), 0u);  // no relu_backward, no per-channel arithmetic
}

TEST(BatchNormRelu, OneKernelForThePerChannelArithmetic) {
  expect_batch_norm_kernels(Device::cpu());
}

TEST(BatchNormRelu, CudaOneKernelForThePerChannelArithmetic) {
  SKIP_WITHOUT_CUDA();
  expect_batch_norm_kernels(Device::cuda(0));
}

// Sequential(BatchNorm2d, ReLU) runs the fused op; with a forward hook on either, the two
// modules run apart (each hook sees its own module's input and output); the same values.
TEST(BatchNormRelu, SequentialFusesBatchNormAndRelu) {
  manual_seed(9);
  nn::Sequential seq{nn::BatchNorm2d(6), nn::ReLU()};
  nn::Sequential twin{nn::BatchNorm2d(6), nn::ReLU()};
  const Tensor x = randn({3, 6, 4, 4});
  Tensor fused, apart;
  const auto calls = ember_test::slot_calls([&] { fused = seq(x); });
  EXPECT_EQ(calls.count("unary"), 0u) << "the ReLU ran as its own kernel";
  int seen = 0;
  twin->operator[](1)->register_forward_hook(
      [&](nn::ModuleImpl&, const Tensor&, const Tensor& out) {
        ++seen;
        EXPECT_GE(min(out).item<float>(), 0.0f);
        return std::optional<Tensor>();
      });
  const auto hooked = ember_test::slot_calls([&] { apart = twin(x); });
  EXPECT_EQ(seen, 1);
  EXPECT_GE(hooked.count("unary"), 1u);
  expect_same_bits(fused, apart, "fused against the modules apart");
  // Both updated their running statistics alike.
  expect_same_bits(seq->operator[](0)->named_buffers()[0].second,
                   twin->operator[](0)->named_buffers()[0].second, "running mean");
}

// forward_relu with a hook on the BatchNorm: the hook sees batch norm's own output (negative
// values included), and the result is relu of it plus the residual.
TEST(BatchNormRelu, ForwardReluKeepsTheBatchNormsHooks) {
  manual_seed(10);
  nn::BatchNorm2d bn(4);
  const Tensor x = randn({2, 4, 3, 3}), r = randn({2, 4, 3, 3});
  Tensor seen;
  bn->register_forward_hook([&](nn::ModuleImpl&, const Tensor&, const Tensor& out) {
    seen = out;
    return std::optional<Tensor>();
  });
  bn->eval();
  const Tensor y = bn->forward_relu(x, r);
  ASSERT_TRUE(seen.defined());
  EXPECT_LT(min(seen).item<float>(), 0.0f);
  expect_same_bits(y, relu(add(seen, r)), "relu(hooked output + residual)");
}

}  // namespace
}  // namespace ember
