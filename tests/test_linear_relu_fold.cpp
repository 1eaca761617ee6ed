// tests/test_linear_relu_fold.cpp — ReLU's backward folded into the next linear's GEMM (Note
// [ReLU backward in the next GEMM] in src/ops/linalg.cpp; Note [ReLU masks] in
// src/backend/backend.hpp): gradients through linear + ReLU → linear equal the composed path
// (linear, then relu, each with its own backward) on the CPU and on CUDA, whatever else reads
// the hidden output; the fold is seen at work where it differs on purpose (a non-finite
// gradient where ReLU was off gives PyTorch's 0); and the masks cuBLASLt writes and reads
// have the layout the CPU backend uses. CUDA cases skip without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::devices;

struct ReluMlp {
  std::vector<Tensor> w, b;  // leaves on one device
};

ReluMlp make_mlp(const std::vector<int64_t>& sizes, DType dtype, Device device, uint64_t seed) {
  manual_seed(seed);
  ReluMlp m;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(sizes[i]));
    m.w.push_back((randn({sizes[i + 1], sizes[i]}) * scale).to(dtype).to(device).requires_grad_());
    m.b.push_back((randn({sizes[i + 1]}) * 0.1).to(dtype).to(device).requires_grad_());
  }
  return m;
}

ReluMlp copy_of(const ReluMlp& m) {
  ReluMlp c;
  for (const Tensor& w : m.w) c.w.push_back(w.detach().clone().requires_grad_());
  for (const Tensor& b : m.b) c.b.push_back(b.detach().clone().requires_grad_());
  return c;
}

// Every layer but the last with ReLU; `fused`: the epilogue form (the fold applies), else
// linear then relu (no mask, no fold). `hidden` receives the first hidden output.
Tensor forward(const ReluMlp& m, Tensor x, bool fused, Tensor* hidden = nullptr) {
  for (size_t i = 0; i < m.w.size(); ++i) {
    const bool last = i + 1 == m.w.size();
    if (last)
      x = linear(x, m.w[i], m.b[i]);
    else
      x = fused ? linear(x, m.w[i], m.b[i], Activation::relu) : relu(linear(x, m.w[i], m.b[i]));
    if (i == 0 && hidden) *hidden = x;
  }
  return x;
}

// The fold on for both device types while a test runs (CUDA starts with it off).
struct FoldOn {
  bool cpu = relu_fold(DeviceType::cpu), cuda = relu_fold(DeviceType::cuda);
  FoldOn() {
    set_relu_fold(DeviceType::cpu, true);
    set_relu_fold(DeviceType::cuda, true);
  }
  ~FoldOn() {
    set_relu_fold(DeviceType::cpu, cpu);
    set_relu_fold(DeviceType::cuda, cuda);
  }
};

void expect_same_grads(const ReluMlp& got, const ReluMlp& want, double tol,
                       const std::string& what) {
  for (size_t i = 0; i < want.w.size(); ++i) {
    ember_test::expect_close(got.w[i].grad().to(Device::cpu()), want.w[i].grad().to(Device::cpu()),
                             tol, tol, what + " dW" + std::to_string(i));
    ember_test::expect_close(got.b[i].grad().to(Device::cpu()), want.b[i].grad().to(Device::cpu()),
                             tol, tol, what + " db" + std::to_string(i));
  }
}

TEST(LinearReluFold, GradientsMatchTheComposedPath) {
  const FoldOn fold;
  // 130 hidden units: a mask row spans two 128-bit words; 3-D input: rows from leading dims.
  for (const Device dev : devices())
    for (const DType dt : {DType::f64, DType::f32}) {
      if (dev.is_cuda() && dt == DType::f64)
        continue;  // cuBLASLt has no f64 ReLU epilogues:
                   // covered by the f32 run's fallbacks
      const std::string what =
          std::string(dev.is_cuda() ? "cuda " : "cpu ") + std::string(dtype_name(dt));
      const ReluMlp a = make_mlp({29, 130, 45, 7}, dt, dev, 5), b = copy_of(a);
      manual_seed(6);
      const Tensor x0 = randn({4, 9, 29}).to(dt).to(dev);
      const Tensor xa = x0.clone().requires_grad_(), xb = x0.clone().requires_grad_();
      const Tensor wout = randn({4, 9, 7}).to(dt).to(dev);
      sum(forward(a, xa, true) * wout).backward();
      sum(forward(b, xb, false) * wout).backward();
      const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
      expect_same_grads(a, b, tol, what);
      ember_test::expect_close(xa.grad().to(Device::cpu()), xb.grad().to(Device::cpu()), tol, tol,
                               what + " dx");
    }
}

// The benchmark MLP's shapes: on the H200 cuBLASLt splits K in these forward GEMMs, so no mask
// is written there (Note [ReLU masks]) and ReLU's backward takes the saved output.
TEST(LinearReluFold, GradientsMatchWhereTheGpuWritesNoMask) {
  const FoldOn fold;
  for (const Device dev : devices()) {
    const ReluMlp a = make_mlp({784, 256, 256, 10}, DType::f32, dev, 7), b = copy_of(a);
    manual_seed(8);
    const Tensor x = rand({128, 784}).to(dev), wout = randn({128, 10}).to(dev);
    sum(forward(a, x, true) * wout).backward();
    sum(forward(b, x, false) * wout).backward();
    expect_same_grads(a, b, 2e-5, dev.is_cuda() ? "cuda" : "cpu");
  }
}

TEST(LinearReluFold, SequentialOfLinearAndReluMatchesTheComposedPath) {
  const FoldOn fold;
  for (const Device dev : devices()) {
    manual_seed(11);
    nn::Sequential net(
        {nn::Linear(20, 64), nn::ReLU(), nn::Linear(64, 33), nn::ReLU(), nn::Linear(33, 5)});
    net->to(dev);
    const std::vector<Tensor> params = net->parameters();  // weight, bias of each Linear
    ASSERT_EQ(params.size(), 6u);
    ReluMlp ref;
    for (size_t i = 0; i < 3; ++i) {
      ref.w.push_back(params[2 * i].detach().clone().requires_grad_());
      ref.b.push_back(params[2 * i + 1].detach().clone().requires_grad_());
    }
    manual_seed(12);
    const Tensor x = randn({16, 20}).to(dev);
    sum(square(net->forward(x))).backward();
    sum(square(forward(ref, x, false))).backward();
    for (size_t i = 0; i < 3; ++i) {
      ember_test::expect_close(params[2 * i].grad().to(Device::cpu()),
                               ref.w[i].grad().to(Device::cpu()), 2e-5, 2e-5, "Sequential dW");
      ember_test::expect_close(params[2 * i + 1].grad().to(Device::cpu()),
                               ref.b[i].grad().to(Device::cpu()), 2e-5, 2e-5, "Sequential db");
    }
  }
}

// A gradient that overflows to ±inf (or NaN) reaches a hidden unit ReLU kept off: PyTorch's
// ReLU backward gives 0 there, and so does the folded GEMM (the composed path's mask
// multiplies by 0 and gives NaN). A zero row here shows the fold at work.
TEST(LinearReluFold, NonFiniteGradientWhereReluWasOffGivesZero) {
  const FoldOn fold;
  for (const Device dev : devices()) {
    ReluMlp m = make_mlp({8, 16, 4}, DType::f32, dev, 21);
    {
      NoGradGuard g;
      m.b[0].narrow(0, 0, 1).fill_(-1e4);  // unit 0 never on
      m.w[1].mul_(1e3);                    // g·W2 overflows below
    }
    manual_seed(22);
    const Tensor x = randn({6, 8}).to(dev);
    sum(forward(m, x, true) * 3e38).backward();
    const Tensor dw = m.w[0].grad().to(Device::cpu()), db = m.b[0].grad().to(Device::cpu());
    ember_test::expect_close(dw.select(0, 0), zeros({8}), 0, 0, "dW0 row of the unit kept off");
    EXPECT_EQ(db.select(0, 0).item<float>(), 0.0f) << (dev.is_cuda() ? "cuda" : "cpu");
    EXPECT_FALSE(std::isfinite(dw.select(0, 1).sum().item<float>()))
        << "units that were on should see the overflow";
  }
}

TEST(LinearReluFold, ASecondConsumerOfTheHiddenOutputGetsItsShare) {
  const FoldOn fold;
  for (const Device dev : devices()) {
    const ReluMlp a = make_mlp({12, 40, 9}, DType::f32, dev, 31), b = copy_of(a);
    manual_seed(32);
    const Tensor x = randn({10, 12}).to(dev), c = randn({10, 40}).to(dev);
    Tensor ha, hb;
    const Tensor ya = forward(a, x, true, &ha), yb = forward(b, x, false, &hb);
    const Tensor la = sum(square(ya)) + sum(ha * c);
    const Tensor lb = sum(square(yb)) + sum(hb * c);
    la.backward();
    lb.backward();
    expect_same_grads(a, b, 2e-5, dev.is_cuda() ? "cuda" : "cpu");
  }
}

TEST(LinearReluFold, AutogradGradOfTheHiddenOutputIsTheTrueGradient) {
  const FoldOn fold;
  for (const Device dev : devices()) {
    const ReluMlp a = make_mlp({12, 40, 9}, DType::f32, dev, 41), b = copy_of(a);
    manual_seed(42);
    const Tensor x = randn({10, 12}).to(dev);
    Tensor ha, hb;
    const Tensor la = sum(square(forward(a, x, true, &ha)));
    const Tensor lb = sum(square(forward(b, x, false, &hb)));
    const std::vector<Tensor> ga = grad({la}, {ha, a.w[0]});
    const std::vector<Tensor> gb = grad({lb}, {hb, b.w[0]});
    // dL/dh is not masked: it is nonzero where h is 0 too.
    ember_test::expect_close(ga[0].to(Device::cpu()), gb[0].to(Device::cpu()), 2e-5, 2e-5, "dL/dh");
    ember_test::expect_close(ga[1].to(Device::cpu()), gb[1].to(Device::cpu()), 2e-5, 2e-5,
                             "dL/dW0");
    EXPECT_GT(sum(mul(eq(hb, 0.0).to(DType::f32), abs(gb[0]))).item<float>(), 0.0f);
  }
}

TEST(LinearReluFold, BackwardTwiceWithRetainGraphAccumulatesTwice) {
  const FoldOn fold;
  for (const Device dev : devices()) {
    const ReluMlp a = make_mlp({12, 40, 30, 9}, DType::f32, dev, 51), b = copy_of(a);
    manual_seed(52);
    const Tensor x = randn({10, 12}).to(dev);
    const Tensor la = sum(square(forward(a, x, true)));
    la.backward({}, /*retain_graph=*/true);
    la.backward();
    sum(square(forward(b, x, false))).backward();
    for (size_t i = 0; i < b.w.size(); ++i) {
      ember_test::expect_close(a.w[i].grad().to(Device::cpu()),
                               (b.w[i].grad() * 2.0).to(Device::cpu()), 2e-5, 2e-5, "2 dW");
      ember_test::expect_close(a.b[i].grad().to(Device::cpu()),
                               (b.b[i].grad() * 2.0).to(Device::cpu()), 2e-5, 2e-5, "2 db");
    }
  }
}

// The backend slot itself: the mask of C [m, n] (bit (i, j) at i·relu_mask_ld(n) + j, low
// bit first) from a ReLU GEMM, and a GEMM masked by it with its column sums.
backend::GemmArgs plain(const Tensor& a, const Tensor& bt, Tensor& c) {
  backend::GemmArgs g;
  g.dtype = a.dtype();
  g.device = a.device().index;
  g.trans_b = true;  // c = a · btᵀ
  g.m = a.shape()[0];
  g.k = a.shape()[1];
  g.n = bt.shape()[0];
  g.a = a.data_ptr();
  g.lda = g.k;
  g.b = bt.data_ptr();
  g.ldb = g.k;
  g.c = c.data_ptr();
  g.ldc = g.n;
  return g;
}

TEST(LinearReluFold, OnForTheCpuOffForCudaUnlessSet) {
  const FoldOn restore;  // restores the settings below at exit
  if (!std::getenv("EMBER_RELU_FOLD")) {
    EXPECT_TRUE(restore.cpu);
    EXPECT_FALSE(restore.cuda);
  }
  set_relu_fold(DeviceType::cuda, false);
  EXPECT_FALSE(relu_fold(DeviceType::cuda));
  EXPECT_TRUE(relu_fold(DeviceType::cpu));
  // Off: the plain path, whose ReLU backward multiplies by 0 and keeps a NaN.
  set_relu_fold(DeviceType::cpu, false);
  ReluMlp m = make_mlp({4, 6, 3}, DType::f32, Device::cpu(), 91);
  {
    NoGradGuard g;
    m.b[0].narrow(0, 0, 1).fill_(-1e4);
    m.w[1].mul_(1e3);
  }
  sum(forward(m, randn({5, 4}), true) * 3e38).backward();
  EXPECT_TRUE(std::isnan(m.b[0].grad().select(0, 0).item<float>()));
}

TEST(LinearReluFold, CpuMaskHasTheDocumentedLayout) {
  manual_seed(61);
  const int64_t m = 5, n = 131, k = 7;
  const Tensor a = randn({m, k}), bt = randn({n, k});
  Tensor c = empty({m, n});
  Tensor mask = zeros({backend::relu_mask_bytes(m, n)}, {.dtype = DType::u8});
  backend::GemmArgs g = plain(a, bt, c);
  g.epilogue = backend::GemmEpilogue::relu;
  bool written = false;
  g.relu_mask_out = mask.data_ptr();
  g.relu_mask_written = &written;
  backend::backend_for(Device::cpu()).gemm(g);
  ASSERT_TRUE(written);
  const std::vector<float> cv = c.to_vector<float>();
  const std::vector<uint8_t> bits = mask.to_vector<uint8_t>();
  const int64_t ld = backend::relu_mask_ld(n);
  ASSERT_EQ(ld, 256);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ld; ++j) {
      const int64_t bit = i * ld + j;
      const bool set = (bits[static_cast<size_t>(bit / 8)] >> (bit % 8)) & 1;
      EXPECT_EQ(set, j < n && cv[static_cast<size_t>(i * n + j)] > 0.0f) << i << "," << j;
    }
}

TEST(LinearReluFold, CudaEpiloguesReadAndWriteTheCpuLayout) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the cuBLASLt mask layout is not checked";
  for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const std::string what(dtype_name(dt));
    manual_seed(71);
    const int64_t m = 64, n = 200, k = 48;
    const Tensor a = randn({m, k}).to(dt), bt = randn({n, k}).to(dt), bias = randn({n}).to(dt);
    Tensor out[2], masks[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d ? Device::cuda(0) : Device::cpu();
      const Tensor ad = a.to(dev), bd = bt.to(dev), biasd = bias.to(dev);
      out[d] = empty({m, n}, {.dtype = dt, .device = dev});
      masks[d] = zeros({backend::relu_mask_bytes(m, n)}, {.dtype = DType::u8, .device = dev});
      backend::GemmArgs g = plain(ad, bd, out[d]);
      g.bias = biasd.data_ptr();
      g.epilogue = backend::GemmEpilogue::relu;
      bool written = false;
      g.relu_mask_out = masks[d].data_ptr();
      g.relu_mask_written = &written;
      backend::backend_for(dev).gemm(g);
      ASSERT_TRUE(written) << what << (d ? " cuda" : " cpu") << ": no mask written at m=" << m
                           << " n=" << n << " k=" << k;
    }
    const double tol = dt == DType::f32 ? 1e-5 : 2e-2;
    ember_test::expect_close(out[1].to(Device::cpu()), out[0], tol, tol, what + " relu(a·bᵀ + b)");
    // Bits may differ only where the two products straddle 0 (GEMM rounding).
    const std::vector<uint8_t> mc = masks[0].to_vector<uint8_t>(),
                               mg = masks[1].to(Device::cpu()).to_vector<uint8_t>();
    const std::vector<double> oc = ember_test::values_f64(out[0]);
    const int64_t ld = backend::relu_mask_ld(n);
    int differ = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t bit = i * ld + j;
        const bool c = (mc[static_cast<size_t>(bit / 8)] >> (bit % 8)) & 1;
        const bool g = (mg[static_cast<size_t>(bit / 8)] >> (bit % 8)) & 1;
        if (c != g && std::abs(oc[static_cast<size_t>(i * n + j)]) > tol) ++differ;
      }
    EXPECT_EQ(differ, 0) << what << ": mask bits differ away from 0";

    // ReLU's backward from the CPU's mask: C = mask ? a·bᵀ : 0 and its column sums, on the
    // CPU, on CUDA through DRELU_BGRAD, and on CUDA from a mask one byte off its alignment
    // (cuBLASLt is not offered it: relu_mask_apply and the reduce slot run instead).
    Tensor dc[3], db[3];
    for (int d = 0; d < 3; ++d) {
      const Device dev = d ? Device::cuda(0) : Device::cpu();
      const Tensor ad = a.to(dev), bd = bt.to(dev);
      const int64_t bytes = masks[0].numel();
      Tensor md = zeros({bytes + 1}, {.dtype = DType::u8, .device = dev});
      const int64_t at = d == 2 ? 1 : 0;
      md.narrow(0, at, bytes).copy_(masks[0].to(dev));
      dc[d] = empty({m, n}, {.dtype = dt, .device = dev});
      db[d] = empty({n}, {.dtype = dt, .device = dev});
      backend::GemmArgs g = plain(ad, bd, dc[d]);
      g.relu_mask_in = static_cast<const uint8_t*>(md.data_ptr()) + at;
      g.relu_bias_grad = db[d].data_ptr();
      backend::backend_for(dev).gemm(g);
    }
    for (int d = 1; d < 3; ++d) {
      const std::string how = what + (d == 1 ? " DRELU_BGRAD" : " fallback");
      ember_test::expect_close(dc[d].to(Device::cpu()), dc[0], tol, tol, how + " masked product");
      ember_test::expect_close(db[d].to(Device::cpu()), db[0], tol * 4, tol * 4,
                               how + " column sums");
    }
  }
}

TEST(LinearReluFold, SixteenBitGradientsOnCudaMatchTheCpu) {
  const FoldOn fold;
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: 16-bit folded gradients not checked";
  for (const DType dt : {DType::bf16, DType::f16}) {
    const ReluMlp c = make_mlp({32, 72, 40, 8}, dt, Device::cpu(), 81);
    ReluMlp g;
    for (const Tensor& w : c.w) g.w.push_back(w.detach().to(Device::cuda(0)).requires_grad_());
    for (const Tensor& b : c.b) g.b.push_back(b.detach().to(Device::cuda(0)).requires_grad_());
    manual_seed(82);
    const Tensor x = randn({24, 32}).to(dt);
    sum(forward(c, x, true)).backward();
    sum(forward(g, x.to(Device::cuda(0)), true)).backward();
    expect_same_grads(g, c, 3e-2, std::string(dtype_name(dt)));
  }
}

}  // namespace
