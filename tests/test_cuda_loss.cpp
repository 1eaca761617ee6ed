// tests/test_cuda_loss.cpp — the fused softmax cross-entropy kernels, the GEMM epilogues and
// the deferred device errors on CUDA, against the CPU (tier 3 of STYLE §8).
//
// Cross-entropy cases cover every reduction, ignore_index, label smoothing, spatial dims,
// i32 targets, f64 and wide rows; each compares the loss and the logits' gradient. The
// deferred-error cases check that a bad label or index does not throw at the call on a GPU
// but at the next synchronisation (item(), to_vector()), with a message naming the op, the
// value, its position and the valid range, and that the device stays usable afterwards.
// Skips when no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/device_runtime.hpp"
#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;

using LossFn = std::function<Tensor(const Tensor& logits, const Tensor& target)>;
using ember_test::kGpu;

// Runs fn on CPU and cuda:0 copies of (logits, target); compares the result and the logits'
// gradient of sum(result · w).
void expect_same(const std::string& what, const LossFn& fn, const Tensor& logits,
                 const Tensor& target, double tol = 1e-5) {
  Tensor xc = logits.detach().clone().requires_grad_();
  Tensor xg = logits.detach().to(kGpu).requires_grad_();
  const Tensor tg = target.to(kGpu);
  const Tensor want = fn(xc, target);
  const Tensor got = fn(xg, tg);
  ASSERT_EQ(got.device(), kGpu) << what;
  EXPECT_TRUE(
      ember_test::check_close(got.detach().to(Device::cpu()), want.detach(), tol, tol, what));
  manual_seed(99);
  const Tensor w = randn(want.shape(), {.dtype = want.dtype()});
  sum(want * w).backward();
  sum(got * w.to(kGpu)).backward();
  ASSERT_TRUE(xg.grad().defined()) << what;
  EXPECT_TRUE(
      ember_test::check_close(xg.grad().to(Device::cpu()), xc.grad(), tol, tol, what + " grad"));
}

Tensor labels(int64_t n, int64_t classes, uint64_t seed, DType dtype = DType::i64) {
  manual_seed(seed);
  return randint(0, classes, {n}, {.dtype = dtype});
}

// The host waits for cuda:0 (a synchronisation point: pending device errors throw here).
void synchronize_gpu() { backend::runtime_for(kGpu).synchronize(kGpu.index); }

TEST(CudaLoss, CrossEntropyMatchesCpuForEveryOption) {
  SKIP_WITHOUT_CUDA();
  manual_seed(5);
  const Tensor x = randn({64, 10}) * 3.0;
  Tensor t = labels(64, 10, 6);
  t = where(lt(rand({64}), 0.2), full({64}, -100.0, {.dtype = DType::i64}), t);
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    for (double eps : {0.0, 0.1}) {
      const std::string name =
          "cross_entropy r=" + std::to_string(static_cast<int>(r)) + " eps=" + std::to_string(eps);
      expect_same(
          name,
          [r, eps](const Tensor& a, const Tensor& b) {
            return cross_entropy(a, b, {.reduction = r, .label_smoothing = eps});
          },
          x, t);
    }
  }
  expect_same(
      "cross_entropy ignore_index=3",
      [](const Tensor& a, const Tensor& b) {
        return cross_entropy(a, b, {.ignore_index = 3, .label_smoothing = 0.2});
      },
      x, labels(64, 10, 7));
  expect_same(
      "cross_entropy i32 targets",
      [](const Tensor& a, const Tensor& b) { return cross_entropy(a, b); }, x,
      labels(64, 10, 8, DType::i32));
  expect_same(
      "cross_entropy f64",
      [](const Tensor& a, const Tensor& b) {
        return cross_entropy(a, b, {.label_smoothing = 0.05});
      },
      x.to(DType::f64), labels(64, 10, 9), 1e-12);
  expect_same(
      "cross_entropy wide rows",
      [](const Tensor& a, const Tensor& b) { return cross_entropy(a, b); }, randn({9, 5000}) * 4.0,
      labels(9, 5000, 10));
  expect_same(
      "cross_entropy many rows",
      [](const Tensor& a, const Tensor& b) {
        return cross_entropy(a, b, {.reduction = Reduction::sum});
      },
      randn({3000, 7}), labels(3000, 7, 11));
  manual_seed(12);
  const Tensor spatial = randint(0, 4, {2, 5, 3});
  expect_same(
      "cross_entropy [N, C, d1, d2]",
      [](const Tensor& a, const Tensor& b) {
        return cross_entropy(a, b, {.reduction = Reduction::none});
      },
      randn({2, 4, 5, 3}), spatial);
  expect_same(
      "cross_entropy [C]", [](const Tensor& a, const Tensor& b) { return cross_entropy(a, b); },
      randn({6}), from_vector(std::vector<int64_t>{2}, {1}).reshape(Shape{}));
}

TEST(CudaLoss, AllRowsIgnoredGivesNanMeanAsPyTorch) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({3, 4}).to(kGpu);
  const Tensor t = full({3}, -100.0, {.dtype = DType::i64}).to(kGpu);
  EXPECT_TRUE(std::isnan(cross_entropy(x, t).item<float>()));
  EXPECT_EQ(cross_entropy(x, t, {.reduction = Reduction::sum}).item<float>(), 0.0f);
}

TEST(CudaLoss, OutOfRangeLabelSurfacesAtTheNextSync) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({4, 10}).to(kGpu);
  const Tensor bad = from_vector(std::vector<int64_t>{0, 1, 2, 12}, {4}).to(kGpu);
  Tensor loss;
  ASSERT_NO_THROW(loss = cross_entropy(x, bad));  // no host sync inside the op
  const std::string msg = error_of([&] { (void)loss.item<float>(); });
  EXPECT_NE(msg.find("cross_entropy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("label 12"), std::string::npos) << msg;
  EXPECT_NE(msg.find("position 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("10 classes"), std::string::npos) << msg;
  // Cleared: the device is usable and a good call reads back the CPU's value.
  const Tensor good = from_vector(std::vector<int64_t>{0, 1, 2, 9}, {4});
  const float want = cross_entropy(x.to(Device::cpu()), good).item<float>();
  EXPECT_NEAR(cross_entropy(x, good.to(kGpu)).item<float>(), want, 1e-5 * std::abs(want) + 1e-6);
  // A negative label that is not ignore_index is out of range too; synchronize() reports it.
  (void)cross_entropy(x, from_vector(std::vector<int64_t>{0, -1, 2, 3}, {4}).to(kGpu));
  EXPECT_THROW(synchronize_gpu(), Error);
  EXPECT_NO_THROW(synchronize_gpu());
}

TEST(CudaLoss, TrainingStepMovesOnlyTheLossValue) {
  SKIP_WITHOUT_CUDA();
  manual_seed(3);
  Tensor w = randn({10, 32}).to(kGpu).requires_grad_();
  const Tensor x = randn({128, 32}).to(kGpu);
  const Tensor t = labels(128, 10, 4).to(kGpu);
  (void)cross_entropy(linear(x, w), t).item<float>();
  const MemoryStats before = memory_stats(kGpu);
  for (int i = 0; i < 5; ++i) {
    Tensor loss = cross_entropy(linear(x, w), t);
    loss.backward();
  }
  const MemoryStats after = memory_stats(kGpu);
  EXPECT_EQ(after.device_to_host_bytes, before.device_to_host_bytes);
  EXPECT_EQ(after.host_to_device_bytes, before.host_to_device_bytes);
}

TEST(CudaLoss, LinearEpiloguesMatchCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(21);
  const Tensor x = randn({37, 19}), w = randn({23, 19}), b = randn({23});
  for (Activation act : {Activation::relu, Activation::gelu_tanh}) {
    const std::string name = act == Activation::relu ? "linear relu" : "linear gelu_tanh";
    {
      NoGradGuard no_grad;  // gelu_tanh is fused only without grad
      const Tensor want = linear(x, w, b, act);
      const Tensor got = linear(x.to(kGpu), w.to(kGpu), b.to(kGpu), act);
      EXPECT_TRUE(ember_test::check_close(got.to(Device::cpu()), want, 1e-5, 1e-4, name));
      const Tensor got_nobias = linear(x.to(kGpu), w.to(kGpu), Tensor(), act);
      EXPECT_TRUE(ember_test::check_close(got_nobias.to(Device::cpu()), linear(x, w, Tensor(), act),
                                          1e-5, 1e-4, name + " no bias"));
      // An unaligned bias (a view at offset 1) takes the separate-kernel path.
      const Tensor b2 = randn({24});
      const Tensor got_unaligned = linear(x.to(kGpu), w.to(kGpu), b2.to(kGpu).slice(0, 1, 24), act);
      EXPECT_TRUE(ember_test::check_close(got_unaligned.to(Device::cpu()),
                                          linear(x, w, b2.slice(0, 1, 24), act), 1e-5, 1e-4,
                                          name + " unaligned bias"));
    }
    Tensor xc = x.clone().requires_grad_(), wc = w.clone().requires_grad_(),
           bc = b.clone().requires_grad_();
    Tensor xg = x.to(kGpu).requires_grad_(), wg = w.to(kGpu).requires_grad_(),
           bg = b.to(kGpu).requires_grad_();
    const Tensor r = randn({37, 23});
    sum(linear(xc, wc, bc, act) * r).backward();
    sum(linear(xg, wg, bg, act) * r.to(kGpu)).backward();
    EXPECT_TRUE(ember_test::check_close(xg.grad().to(Device::cpu()), xc.grad(), 1e-5, 1e-4,
                                        name + " grad x"));
    EXPECT_TRUE(ember_test::check_close(wg.grad().to(Device::cpu()), wc.grad(), 1e-5, 1e-4,
                                        name + " grad w"));
    EXPECT_TRUE(ember_test::check_close(bg.grad().to(Device::cpu()), bc.grad(), 1e-5, 1e-4,
                                        name + " grad b"));
  }
}

TEST(CudaLoss, OutOfRangeIndexSurfacesAtTheNextSyncAndOutputIsUnwritten) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({4, 3}).to(kGpu);
  const Tensor bad = from_vector(std::vector<int64_t>{0, 4}, {2}).to(kGpu);
  Tensor out;
  ASSERT_NO_THROW(out = index_select(x, 0, bad));
  const std::string msg = error_of([&] { (void)out.to_vector<float>(); });
  EXPECT_NE(msg.find("index_select"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("position 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 4"), std::string::npos) << msg;
  // Only the first error is kept until it is reported.
  const Tensor bad2 = from_vector(std::vector<int64_t>{0, 3, 1, 0}, {2, 2}).to(kGpu);
  (void)gather(x, 1, bad2);
  (void)gather(x, 1, from_vector(std::vector<int64_t>{7, 0, 0, 0}, {2, 2}).to(kGpu));
  const std::string g = error_of([&] { synchronize_gpu(); });
  EXPECT_NE(g.find("gather: index 3 (at position 1)"), std::string::npos) << g;
  EXPECT_NO_THROW(synchronize_gpu());
}

}  // namespace
