// tests/test_cuda_kernels.cpp — the CUDA kernels of src/cuda/{index,conv,optim,norm}_kernels.cu
// against the CPU kernels, through the public ops API (tier 3 of STYLE §8).
//
// Each test builds its inputs on the CPU, runs the op (and its backward) there and on cuda:0
// from copies of the same values, and compares outputs and gradients. Gather-form kernels
// (col2im, pool backwards) and the optimizer steps match the CPU to f32 rounding; GEMM-based
// convolution within GEMM rounding. The multi-tensor optimizer and clipping entry points
// (not yet Backend slots) are called directly. Every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/optim.hpp"
#include "ember/optim/clip.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::kGpu;

Tensor gpu_leaf(const Tensor& cpu, bool grad) {
  Tensor t = cpu.to(kGpu).detach();
  if (grad) t.requires_grad_();
  return t;
}

Tensor cpu_leaf(const Tensor& cpu, bool grad) {
  Tensor t = cpu.detach().clone();
  if (grad) t.requires_grad_();
  return t;
}

// Names the op, the shape and the first mismatches; both tensors any device, same shape.
::testing::AssertionResult close(const Tensor& want, const Tensor& got, double rtol, double atol,
                                 const std::string& what) {
  if (!got.defined() || !want.defined())
    return ::testing::AssertionFailure() << what << ": undefined tensor";
  if (want.shape() != got.shape())
    return ::testing::AssertionFailure() << what << ": shape " << got.shape().to_string()
                                         << ", expected " << want.shape().to_string();
  const std::vector<double> a =
      want.to(Device::cpu()).to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> b =
      got.to(Device::cpu()).to(DType::f64).contiguous().to_vector<double>();
  std::ostringstream msg;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (both_nan || std::abs(a[i] - b[i]) <= atol + rtol * std::abs(a[i])) continue;
    if (bad < 5) msg << " [" << i << "] cuda " << b[i] << " cpu " << a[i] << ";";
    ++bad;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " " << want.shape().to_string() << ": " << bad
                                       << " of " << a.size() << " differ:" << msg.str();
}

// sum(y * r) for a fixed random r: a backward seed with distinct values per element.
Tensor weighted_sum(const Tensor& y, const Tensor& r_cpu) {
  return (y * r_cpu.to(y.device())).sum();
}

// ---- convolution ----

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  Size2d stride, padding, dilation;
  int64_t groups;
  DType dtype;
};

TEST(CudaConvKernels, Conv2dForwardBackwardMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(1);
  const ConvCase cases[] = {
      {2, 3, 8, 7, 4, 3, 3, 1, 1, 1, 1, DType::f32},
      {2, 4, 9, 8, 6, 3, 2, {2, 1}, {1, 2}, 1, 2, DType::f32},
      {1, 4, 11, 10, 4, 3, 3, 2, 2, {2, 3}, 4, DType::f32},
      {3, 2, 6, 6, 5, 1, 1, 1, 0, 1, 1, DType::f32},
      {2, 6, 7, 9, 6, 3, 3, {1, 2}, {0, 1}, 1, 3, DType::f64},
      // N·L >= 8192 with a small weight: the split-K weight gradient (Note [Split-K weight
      // gradients on the GPU]), with a remainder slice (10125 = 4·2531 + 1) and without.
      {5, 3, 45, 45, 4, 3, 3, 1, 1, 1, 1, DType::f32},
      {4, 2, 64, 64, 3, 3, 3, 1, 1, 1, 1, DType::f64},
  };
  for (const ConvCase& k : cases) {
    const std::string name = "conv2d " + std::to_string(k.kh) + "x" + std::to_string(k.kw) +
                             " groups " + std::to_string(k.groups) + " " +
                             std::string(dtype_name(k.dtype));
    const TensorOptions opt{.dtype = k.dtype};
    const Tensor x0 = randn({k.n, k.c, k.h, k.w}, opt);
    const Tensor w0 = randn({k.o, k.c / k.groups, k.kh, k.kw}, opt);
    const Tensor b0 = randn({k.o}, opt);
    Tensor xc = cpu_leaf(x0, true), wc = cpu_leaf(w0, true), bc = cpu_leaf(b0, true);
    Tensor xg = gpu_leaf(x0, true), wg = gpu_leaf(w0, true), bg = gpu_leaf(b0, true);
    const Tensor yc = conv2d(xc, wc, bc, k.stride, k.padding, k.dilation, k.groups);
    const Tensor yg = conv2d(xg, wg, bg, k.stride, k.padding, k.dilation, k.groups);
    // f32 sums over N·L >= 8192 products in another order on each device: a looser bound.
    const double tol = k.dtype == DType::f64 ? 1e-10 : (k.n * k.h * k.w > 4096 ? 1e-3 : 1e-4);
    ASSERT_TRUE(close(yc, yg, tol, tol, name + " out"));
    const Tensor r = randn(yc.shape(), opt);
    weighted_sum(yc, r).backward();
    weighted_sum(yg, r).backward();
    EXPECT_TRUE(close(xc.grad(), xg.grad(), tol, tol, name + " grad_input"));
    EXPECT_TRUE(close(wc.grad(), wg.grad(), tol, tol, name + " grad_weight"));
    EXPECT_TRUE(close(bc.grad(), bg.grad(), tol, tol, name + " grad_bias"));
  }
}

// ---- pooling ----

struct PoolCase {
  Size2d kernel, stride, padding, dilation;
  bool ceil_mode;
};

const PoolCase kPoolCases[] = {
    {2, 2, 0, 1, false},
    {3, 2, 1, 1, false},
    {3, 1, 1, 1, false},
    {3, 2, 1, 2, true},
    {{2, 3}, {1, 2}, {1, 0}, 1, true},
};

TEST(CudaPoolKernels, MaxPoolIndicesAndGradientMatchCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(2);
  // Planes of 9 x 10 and, where 2 x 2 windows tile them, 8 x 10 (Note [Max pooling's backward
  // over tiling windows]).
  for (const Shape& shape : {Shape{2, 3, 9, 10}, Shape{2, 3, 8, 10}})
    for (DType dtype : {DType::f32, DType::f64}) {
      for (const PoolCase& k : kPoolCases) {
        const std::string name = std::string("max_pool2d ") + shape.to_string() + " k" +
                                 std::to_string(k.kernel.h) + "x" + std::to_string(k.kernel.w) +
                                 " d" + std::to_string(k.dilation.h) +
                                 (k.ceil_mode ? " ceil " : " ") + std::string(dtype_name(dtype));
        // Rounded values make ties; a NaN and a -inf test the PyTorch rules.
        std::vector<double> v = randn(shape, {.dtype = DType::f64}).to_vector<double>();
        for (double& e : v) e = std::round(e * 2.0);
        v[7] = std::numeric_limits<double>::quiet_NaN();
        v[100] = -std::numeric_limits<double>::infinity();
        const Tensor x0 = from_vector(v, shape).to(dtype);
        Tensor xc = cpu_leaf(x0, true), xg = gpu_leaf(x0, true);
        const auto [yc, ic] =
            max_pool2d_with_indices(xc, k.kernel, k.stride, k.padding, k.dilation, k.ceil_mode);
        const auto [yg, ig] =
            max_pool2d_with_indices(xg, k.kernel, k.stride, k.padding, k.dilation, k.ceil_mode);
        ASSERT_TRUE(close(yc, yg, 0, 0, name + " out"));
        ASSERT_TRUE(close(ic, ig, 0, 0, name + " indices"));
        const Tensor r = randn(yc.shape(), {.dtype = dtype});
        weighted_sum(yc, r).backward();
        weighted_sum(yg, r).backward();
        EXPECT_TRUE(close(xc.grad(), xg.grad(), 0, 0, name + " grad_input"));
      }
    }
}

TEST(CudaPoolKernels, AvgPoolMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(3);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (bool include_pad : {true, false}) {
      for (const PoolCase& k : kPoolCases) {
        if (k.dilation.h != 1) continue;  // avg_pool2d has no dilation
        if (k.padding.h * 2 > k.kernel.h || k.padding.w * 2 > k.kernel.w) continue;
        const std::string name = std::string("avg_pool2d k") + std::to_string(k.kernel.h) + "x" +
                                 std::to_string(k.kernel.w) + (include_pad ? " pad" : " nopad") +
                                 (k.ceil_mode ? " ceil " : " ") + std::string(dtype_name(dtype));
        const Tensor x0 = randn({2, 3, 9, 10}, {.dtype = dtype});
        Tensor xc = cpu_leaf(x0, true), xg = gpu_leaf(x0, true);
        const Tensor yc = avg_pool2d(xc, k.kernel, k.stride, k.padding, k.ceil_mode, include_pad);
        const Tensor yg = avg_pool2d(xg, k.kernel, k.stride, k.padding, k.ceil_mode, include_pad);
        ASSERT_TRUE(close(yc, yg, 0, 0, name + " out"));
        const Tensor r = randn(yc.shape(), {.dtype = dtype});
        weighted_sum(yc, r).backward();
        weighted_sum(yg, r).backward();
        EXPECT_TRUE(close(xc.grad(), xg.grad(), 0, 0, name + " grad_input"));
      }
    }
  }
}

// ---- indexing ----

TEST(CudaIndexKernels, IndexSelectAndBackwardMatchCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(4);
  for (DType index_dtype : {DType::i64, DType::i32}) {
    for (int64_t dim : {0, 1, 2}) {
      const std::string name = std::string("index_select dim ") + std::to_string(dim) + " " +
                               std::string(dtype_name(index_dtype));
      const Tensor x0 = randn({5, 6, 7});
      const Tensor idx = randint(0, x0.shape()[dim], {9}, {.dtype = index_dtype});
      Tensor xc = cpu_leaf(x0, true), xg = gpu_leaf(x0, true);
      const Tensor yc = index_select(xc, dim, idx);
      const Tensor yg = index_select(xg, dim, idx.to(kGpu));
      ASSERT_TRUE(close(yc, yg, 0, 0, name + " out"));
      const Tensor r = randn(yc.shape());
      weighted_sum(yc, r).backward();
      weighted_sum(yg, r).backward();
      EXPECT_TRUE(close(xc.grad(), xg.grad(), 1e-6, 1e-6, name + " grad"));
    }
  }
}

// f16/bf16: index_select's backward (index_add with atomics on the GPU) against the CPU; the
// order duplicates add in differs, so the two may round apart by a 16-bit step.
TEST(CudaIndexKernels, SixteenBitIndexSelectBackwardMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(6);
  for (DType dt : {DType::f16, DType::bf16}) {
    const std::string name = "index_select backward " + std::string(dtype_name(dt));
    const Tensor x0 = randn({40, 24}).to(dt);
    const Tensor idx = randint(0, 40, {120});  // duplicates accumulate
    Tensor xc = cpu_leaf(x0, true), xg = gpu_leaf(x0, true);
    const Tensor yc = index_select(xc, 0, idx), yg = index_select(xg, 0, idx.to(kGpu));
    ASSERT_TRUE(close(yc, yg, 0, 0, name + " out"));
    const Tensor r = randn(yc.shape()).to(dt);
    (yc.to(DType::f32) * r.to(DType::f32)).sum().backward();
    (yg.to(DType::f32) * r.to(kGpu).to(DType::f32)).sum().backward();
    ASSERT_EQ(xg.grad().dtype(), dt);
    EXPECT_TRUE(close(xc.grad().to(DType::f32), xg.grad().to(DType::f32), 2e-2, 2e-2, name));
  }
}

TEST(CudaIndexKernels, EmbeddingForwardBackwardMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(5);
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor w0 = randn({50, 16}, {.dtype = dtype});
    const Tensor idx = randint(0, 50, {8, 12});  // duplicates accumulate
    Tensor wc = cpu_leaf(w0, true), wg = gpu_leaf(w0, true);
    const Tensor yc = embedding(wc, idx), yg = embedding(wg, idx.to(kGpu));
    ASSERT_TRUE(close(yc, yg, 0, 0, std::string("embedding ") + std::string(dtype_name(dtype))));
    const Tensor r = randn(yc.shape(), {.dtype = dtype});
    weighted_sum(yc, r).backward();
    weighted_sum(yg, r).backward();
    EXPECT_TRUE(close(wc.grad(), wg.grad(), 1e-5, 1e-6,
                      std::string("embedding grad ") + std::string(dtype_name(dtype))));
  }
}

TEST(CudaIndexKernels, GatherScatterAddMatchCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(6);
  for (DType index_dtype : {DType::i64, DType::i32}) {
    for (int64_t dim : {0, 1}) {
      const std::string name =
          std::string("dim ") + std::to_string(dim) + " " + std::string(dtype_name(index_dtype));
      const Tensor x0 = randn({6, 7});
      const Tensor idx = randint(0, x0.shape()[dim], {4, 5}, {.dtype = index_dtype});
      Tensor xc = cpu_leaf(x0, true), xg = gpu_leaf(x0, true);
      const Tensor yc = gather(xc, dim, idx), yg = gather(xg, dim, idx.to(kGpu));
      ASSERT_TRUE(close(yc, yg, 0, 0, "gather " + name));
      const Tensor r = randn(yc.shape());
      weighted_sum(yc, r).backward();
      weighted_sum(yg, r).backward();
      EXPECT_TRUE(close(xc.grad(), xg.grad(), 1e-6, 1e-6, "gather grad " + name));

      const Tensor src = randn({4, 5});
      const Tensor sc = scatter_add(x0, dim, idx, src);
      const Tensor sg = scatter_add(x0.to(kGpu), dim, idx.to(kGpu), src.to(kGpu));
      EXPECT_TRUE(close(sc, sg, 1e-6, 1e-6, "scatter_add " + name));
    }
  }
  // Integer data through scatter_add (atomics on i64 and i32).
  for (DType dtype : {DType::i64, DType::i32}) {
    const Tensor x0 = randint(-5, 5, {4, 6}, {.dtype = dtype});
    const Tensor idx = randint(0, 6, {4, 9});
    const Tensor src = randint(-5, 5, {4, 9}, {.dtype = dtype});
    EXPECT_TRUE(close(scatter_add(x0, 1, idx, src),
                      scatter_add(x0.to(kGpu), 1, idx.to(kGpu), src.to(kGpu)), 0, 0,
                      std::string("scatter_add ") + std::string(dtype_name(dtype))));
  }
}

TEST(CudaIndexKernels, OutOfRangeIndexThrowsAndDeviceStaysUsable) {
  SKIP_WITHOUT_CUDA();
  // On a GPU an index error is reported at the next synchronisation (Note [Deferred device
  // errors]): the call returns, the read that follows throws.
  const Tensor x = randn({4, 3}).to(kGpu);
  const Tensor bad = from_vector(std::vector<int64_t>{0, 4}, {2}).to(kGpu);
  const Tensor neg = from_vector(std::vector<int64_t>{-1, 1}, {2}).to(kGpu);
  EXPECT_THROW(index_select(x, 0, bad).to_vector<float>(), Error);
  EXPECT_THROW(index_select(x, 0, neg).sum().item<float>(), Error);
  EXPECT_THROW(embedding(x, bad).to_vector<float>(), Error);
  const Tensor bad2 = from_vector(std::vector<int64_t>{0, 3, 1, 0}, {2, 2}).to(kGpu);
  EXPECT_THROW(gather(x, 1, bad2).to_vector<float>(), Error);
  EXPECT_THROW(scatter_add(x, 1, bad2, randn({2, 2}).to(kGpu)).to_vector<float>(), Error);
  // The next good call works and sees no stale flag.
  const Tensor good = from_vector(std::vector<int64_t>{3, 0}, {2}).to(kGpu);
  EXPECT_TRUE(close(index_select(x.to(Device::cpu()), 0, good.to(Device::cpu())),
                    index_select(x, 0, good), 0, 0, "index_select after an error"));
}

// ---- batch norm ----

TEST(CudaNormKernels, BatchNormTrainForwardBackwardMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(7);
  // Planes of 30, 7 and 561 elements and 3 channels take the element-wise affine; planes of 48
  // and 16 channels innermost (BatchNorm1d, and channels_last) its packs of 16 bytes (Note
  // [Channel affine in packs]). Channels of 37,000 and 100,352 elements are cut into 9 and 8
  // parts, the last of the 9 shorter (Note [Batch norm's channels in parts]).
  const std::vector<std::pair<Shape, bool>> shapes = {
      {{8, 4, 5, 6}, false},    {{16, 3}, false},         {{2, 5, 7}, false},
      {{64, 2, 33, 17}, false}, {{8, 4, 8, 6}, false},    {{32, 16}, false},
      {{4, 16, 5, 3}, true},    {{37, 3, 25, 40}, false}, {{128, 32, 28, 28}, false}};
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const auto& [shape, channels_last] : shapes) {
      const std::string name = "batch_norm " + shape.to_string() +
                               (channels_last ? " channels_last " : " ") +
                               std::string(dtype_name(dtype));
      const TensorOptions opt{.dtype = dtype};
      const int64_t c = shape[1];
      Tensor x0 = randn(shape, opt, 3.0, 2.0);  // an offset mean tests the variance
      if (channels_last) x0 = x0.contiguous(MemoryFormat::channels_last);
      const Tensor w0 = randn({c}, opt), b0 = randn({c}, opt);
      Tensor xc = cpu_leaf(x0, true), wc = cpu_leaf(w0, true), bc = cpu_leaf(b0, true);
      Tensor xg = gpu_leaf(x0, true), wg = gpu_leaf(w0, true), bg = gpu_leaf(b0, true);
      if (channels_last) {
        ASSERT_TRUE(xg.is_contiguous(MemoryFormat::channels_last)) << name;
      }
      Tensor rmc = zeros({c}, opt), rvc = ones({c}, opt);
      Tensor rmg = rmc.to(kGpu), rvg = rvc.to(kGpu);
      const Tensor yc = batch_norm(xc, rmc, rvc, wc, bc, true);
      const Tensor yg = batch_norm(xg, rmg, rvg, wg, bg, true);
      const double tol = dtype == DType::f32 ? 2e-5 : 1e-12;
      ASSERT_TRUE(close(yc, yg, tol, tol, name + " out"));
      EXPECT_TRUE(close(rmc, rmg, tol, tol, name + " running_mean"));
      EXPECT_TRUE(close(rvc, rvg, tol, tol, name + " running_var"));
      const Tensor r = randn(yc.shape(), opt);
      weighted_sum(yc, r).backward();
      weighted_sum(yg, r).backward();
      EXPECT_TRUE(close(xc.grad(), xg.grad(), 10 * tol, 10 * tol, name + " grad_input"));
      EXPECT_TRUE(close(wc.grad(), wg.grad(), 10 * tol, 10 * tol, name + " grad_weight"));
      EXPECT_TRUE(close(bc.grad(), bg.grad(), 10 * tol, 10 * tol, name + " grad_bias"));
      // Eval mode: the channel affine with running statistics.
      EXPECT_TRUE(close(batch_norm(x0, rmc, rvc, w0, b0, false),
                        batch_norm(x0.to(kGpu), rmg, rvg, w0.to(kGpu), b0.to(kGpu), false), tol,
                        tol, name + " eval"));
    }
  }
}

// ---- optimizers ----

// Three steps of `make(params)` on the CPU and on the GPU from the same start, with
// gradients target + p·p (recomputed each step on each device); parameters agree to 1e-5.
template <typename Make>
void expect_optimizer_matches(const std::string& name, Make make, DType dtype = DType::f32) {
  const std::vector<Shape> shapes = {{37, 11}, {11}, {1000}, {3, 5, 7}};
  std::vector<Tensor> pc, pg, targets;
  for (const Shape& s : shapes) {
    const Tensor init = randn(s, {.dtype = dtype});
    pc.push_back(parameter(init));
    pg.push_back(parameter(init.to(kGpu)));
    targets.push_back(randn(s, {.dtype = dtype}));
  }
  auto oc = make(pc);
  auto og = make(pg);
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      pc[i].set_grad(targets[i] + pc[i].detach() * pc[i].detach());
      pg[i].set_grad(targets[i].to(kGpu) + pg[i].detach() * pg[i].detach());
    }
    oc->step();
    og->step();
    for (size_t i = 0; i < shapes.size(); ++i)
      ASSERT_TRUE(
          close(pc[i], pg[i], 1e-5, 1e-6,
                name + " step " + std::to_string(step + 1) + " param " + std::to_string(i)));
  }
}

TEST(CudaOptimKernels, AdamAdamWMatchCpuOverThreeSteps) {
  SKIP_WITHOUT_CUDA();
  manual_seed(8);
  const optim::AdamOptions adams[] = {
      {.lr = 1e-2},
      {.lr = 1e-2, .weight_decay = 0.1},
      {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true},
      {.lr = 1e-2, .amsgrad = true, .maximize = true},
  };
  int i = 0;
  for (const optim::AdamOptions& o : adams) {
    expect_optimizer_matches("adam " + std::to_string(i++), [&](const std::vector<Tensor>& p) {
      return std::make_unique<optim::Adam>(p, o);
    });
  }
  expect_optimizer_matches(
      "adam f64",
      [&](const std::vector<Tensor>& p) { return std::make_unique<optim::Adam>(p, adams[2]); },
      DType::f64);
  const optim::AdamWOptions adamws[] = {
      {.lr = 1e-2},
      {.lr = 1e-2, .weight_decay = 0.5, .amsgrad = true},
      {.lr = 1e-2, .maximize = true},
  };
  i = 0;
  for (const optim::AdamWOptions& o : adamws) {
    expect_optimizer_matches("adamw " + std::to_string(i++), [&](const std::vector<Tensor>& p) {
      return std::make_unique<optim::AdamW>(p, o);
    });
  }
}

TEST(CudaOptimKernels, SgdMatchesCpuOverThreeSteps) {
  SKIP_WITHOUT_CUDA();
  manual_seed(9);
  const optim::SGDOptions sgds[] = {
      {.lr = 1e-2},
      {.lr = 1e-2, .weight_decay = 0.1},
      {.lr = 1e-2, .momentum = 0.9},
      {.lr = 1e-2, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 1e-2, .momentum = 0.9, .nesterov = true},
      {.lr = 1e-2, .momentum = 0.5, .maximize = true},
  };
  int i = 0;
  for (const optim::SGDOptions& o : sgds) {
    expect_optimizer_matches("sgd " + std::to_string(i++), [&](const std::vector<Tensor>& p) {
      return std::make_unique<optim::SGD>(p, o);
    });
  }
  expect_optimizer_matches(
      "sgd f64",
      [&](const std::vector<Tensor>& p) { return std::make_unique<optim::SGD>(p, sgds[4]); },
      DType::f64);
}

TEST(CudaOptimKernels, LargeAdamStepSpansSeveralLaunches) {
  SKIP_WITHOUT_CUDA();
  manual_seed(10);
  // 34M elements: more (tensor, chunk) blocks than one launch holds, so a tensor continues
  // from one launch into the next (Note [Multi-tensor apply]).
  const int64_t n = 34'000'000 + 13;
  const Tensor init = randn({n});
  Tensor pc = parameter(init), pg = parameter(init.to(kGpu));
  const Tensor g = randn({n});
  pc.set_grad(g);
  pg.set_grad(g.to(kGpu));
  optim::Adam oc({pc}, {.lr = 1e-2, .weight_decay = 0.1}),
      og({pg}, {.lr = 1e-2, .weight_decay = 0.1});
  oc.step();
  og.step();
  EXPECT_TRUE(close(pc, pg, 1e-6, 1e-7, "adam 34M"));
}

#if defined(EMBER_WITH_CUDA)

// The multi-tensor entry points against per-tensor CPU steps, over 150 tensors (two launches).
TEST(CudaOptimKernels, MultiTensorAdamAndSgdMatchPerTensorCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(11);
  const int count = 150;
  std::vector<Tensor> pc, gc, mc, vc, pg, gg, mg, vg;
  std::vector<backend::OptimSlot> slots;
  for (int i = 0; i < count; ++i) {
    const int64_t numel = 1 + (i * 7919) % 5000;
    pc.push_back(randn({numel}));
    gc.push_back(randn({numel}));
    mc.push_back(zeros({numel}));
    vc.push_back(zeros({numel}));
    pg.push_back(pc.back().to(kGpu));
    gg.push_back(gc.back().to(kGpu));
    mg.push_back(mc.back().to(kGpu));
    vg.push_back(vc.back().to(kGpu));
    slots.push_back({.param = pg.back().data_ptr(),
                     .grad = gg.back().data_ptr(),
                     .state = {mg.back().data_ptr(), vg.back().data_ptr(), nullptr},
                     .numel = numel});
  }
  const backend::Backend& cpu = backend::backend_for(Device::cpu());
  // The CPU reference runs each tensor as its own one-slot call.
  auto one_slot = [](const Tensor& p, const Tensor& g, const Tensor& m, const Tensor* v) {
    return backend::OptimSlot{.param = p.data_ptr(),
                              .grad = g.data_ptr(),
                              .state = {m.data_ptr(), v ? v->data_ptr() : nullptr, nullptr},
                              .numel = p.numel()};
  };
  for (int64_t step = 1; step <= 3; ++step) {
    const backend::AdamArgs a{
        .lr = 1e-2, .weight_decay = 0.01, .decoupled_weight_decay = true, .step = step};
    for (int i = 0; i < count; ++i) {
      const backend::OptimSlot s = one_slot(pc[i], gc[i], mc[i], &vc[i]);
      cpu.adam_step_multi(0, DType::f32, &s, 1, a);
    }
    backend::backend_for(Device::cuda()).adam_step_multi(0, DType::f32, slots.data(), count, a);
  }
  for (int i = 0; i < count; ++i)
    ASSERT_TRUE(close(pc[i], pg[i], 1e-6, 1e-7, "adam_step_multi tensor " + std::to_string(i)));
  for (int step = 0; step < 2; ++step) {
    const backend::SgdArgs s{
        .lr = 1e-2, .momentum = 0.9, .nesterov = true, .first_step = step == 0};
    for (int i = 0; i < count; ++i) {
      const backend::OptimSlot one = one_slot(pc[i], gc[i], mc[i], nullptr);
      cpu.sgd_step_multi(0, DType::f32, &one, 1, s);
      slots[i].state[0] = mg[i].data_ptr();
    }
    backend::backend_for(Device::cuda()).sgd_step_multi(0, DType::f32, slots.data(), count, s);
  }
  for (int i = 0; i < count; ++i)
    ASSERT_TRUE(close(pc[i], pg[i], 1e-6, 1e-7, "sgd_step_multi tensor " + std::to_string(i)));
}

TEST(CudaOptimKernels, DeviceClipGradNormMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(12);
  for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
    for (double max_norm : {0.5, 1e6}) {
      const std::string name =
          "clip norm_type " + std::to_string(norm_type) + " max_norm " + std::to_string(max_norm);
      std::vector<Tensor> pc, pg;
      std::vector<void*> ptrs;
      std::vector<int64_t> numels;
      for (int64_t numel : {300, 1, 70000, 17}) {
        const Tensor g = randn({numel});
        pc.push_back(parameter(zeros({numel})));
        pc.back().set_grad(g.clone());
        pg.push_back(g.to(kGpu));
        ptrs.push_back(pg.back().data_ptr());
        numels.push_back(numel);
      }
      const double want = optim::clip_grad_norm(pc, max_norm, norm_type);
      Tensor total = zeros({}, {.device = kGpu});
      backend::backend_for(Device::cuda())
          .grad_norm_multi(0, DType::f32, ptrs.data(), numels.data(), 4, norm_type,
                           total.data_ptr());
      backend::backend_for(Device::cuda())
          .clip_grads_by_norm(0, DType::f32, ptrs.data(), numels.data(), 4, max_norm,
                              total.data_ptr());
      EXPECT_NEAR(total.item<float>(), want, 1e-5 * want) << name;
      for (size_t i = 0; i < pc.size(); ++i)
        EXPECT_TRUE(close(pc[i].grad(), pg[i], 1e-5, 1e-7, name + " grad " + std::to_string(i)));
    }
  }
}

#endif  // EMBER_WITH_CUDA

}  // namespace
