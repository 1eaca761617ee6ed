// tests/test_poison.cpp — set_poison_allocations (ember/runtime.hpp): while on, every block the
// caching allocators hand out starts as 0xFF bytes (NaN in every float dtype, -1 in signed
// integers), so a kernel that reads memory nothing wrote turns its result NaN. The fresh-block
// tests show the poison is there (on the CPU and the GPU, captured steps included); the step
// tests show a whole training step (forward, backward, optimizer) reads nothing it did not
// write: poisoned, it equals the unpoisoned step bitwise. The GPU suite is also run with
// EMBER_POISON_ALLOCATIONS=1 on the GPU machine (docs/cuda.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/capture.hpp"
#include "ember/train/models.hpp"

namespace poison_test {

using namespace ember;  // NOLINT: test file

using ember_test::PoisonScope;

// Fresh tensors of four dtypes read as the poison; ops that initialise (zeros, full) still do.
void check_fresh_blocks_are_poisoned(Device device) {
  const PoisonScope poison;
  for (int64_t n : {int64_t{3}, int64_t{1000}, int64_t{1} << 20}) {
    const std::vector<float> f = empty({n}, {.device = device}).to_vector<float>();
    ASSERT_EQ(static_cast<int64_t>(f.size()), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isnan(f[i])) << "f32 element " << i;
    const std::vector<float> d =
        empty({n}, {.dtype = DType::f64, .device = device}).to(DType::f32).to_vector<float>();
    for (int64_t i = 0; i < n; i += 97) ASSERT_TRUE(std::isnan(d[i])) << "f64 element " << i;
    const std::vector<float> h =
        empty({n}, {.dtype = DType::bf16, .device = device}).to(DType::f32).to_vector<float>();
    for (int64_t i = 0; i < n; i += 97) ASSERT_TRUE(std::isnan(h[i])) << "bf16 element " << i;
    const std::vector<int32_t> k =
        empty({n}, {.dtype = DType::i32, .device = device}).to_vector<int32_t>();
    for (int64_t i = 0; i < n; i += 97) ASSERT_EQ(k[i], -1) << "i32 element " << i;
  }
  const std::vector<float> z = zeros({4096}, {.device = device}).to_vector<float>();
  for (float v : z) ASSERT_EQ(v, 0.0f);
  EXPECT_TRUE(poison_allocations());
}

// Losses and weights of three Adam steps of the Fashion CNN (batch norm, pooling, dropout-free)
// on fixed data; `captured` runs them as a CapturedStep (its first call eager).
std::vector<float> cnn_steps(Device device, bool captured) {
  manual_seed(7);
  nn::Module net = train::fashion_cnn();
  net->to(device);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  const Tensor x = randn({16, 1, 28, 28}).to(device);
  const Tensor y = randint(0, 10, {16}).to(device);
  const auto step_fn = [&](const std::vector<Tensor>& in) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net->forward(in[0]), in[1]);
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss.detach()};
  };
  std::unique_ptr<train::CapturedStep> graph;
  if (captured)
    graph = std::make_unique<train::CapturedStep>(step_fn, train::CaptureOptions{.device = device});
  std::vector<float> out;
  for (int i = 0; i < 3; ++i) {
    const std::vector<Tensor> r = captured ? (*graph)({x, y}) : step_fn({x, y});
    out.push_back(r[0].item<float>());
  }
  for (const Tensor& p : net->parameters())
    for (float v : p.to(Device::cpu()).to_vector<float>()) out.push_back(v);
  return out;
}

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_FALSE(std::isnan(b[i])) << "value " << i << " read the poison";
    ASSERT_EQ(a[i], b[i]) << "value " << i;
  }
}

TEST(Poison, FreshCpuBlocksReadAsNaNAndMinusOne) { check_fresh_blocks_are_poisoned(Device::cpu()); }

TEST(Poison, CpuTrainingStepReadsOnlyWhatItWrote) {
  const std::vector<float> plain = cnn_steps(Device::cpu(), false);
  std::vector<float> poisoned;
  {
    const PoisonScope poison;
    poisoned = cnn_steps(Device::cpu(), false);
  }
  expect_bitwise(plain, poisoned);
}

TEST(Poison, OffByDefaultAndTheSetterRestores) {
  const bool before = poison_allocations();
  {
    const PoisonScope poison(!before);
    EXPECT_EQ(poison_allocations(), !before);
  }
  EXPECT_EQ(poison_allocations(), before);
}

TEST(PoisonCuda, FreshGpuBlocksReadAsNaNAndMinusOne) {
  SKIP_WITHOUT_CUDA();
  check_fresh_blocks_are_poisoned(Device::cuda(0));
}

TEST(PoisonCuda, EagerAndCapturedStepsReadOnlyWhatTheyWrote) {
  SKIP_WITHOUT_CUDA();
  const ember_test::DeterministicScope deterministic;
  const Device gpu = Device::cuda(0);
  const std::vector<float> plain = cnn_steps(gpu, false);
  std::vector<float> eager, captured;
  {
    const PoisonScope poison;
    eager = cnn_steps(gpu, false);
    captured = cnn_steps(gpu, true);
  }
  expect_bitwise(plain, eager);
  expect_bitwise(plain, captured);
}

// A block the captured step allocates is poisoned once, when the capture allocates it (not by a
// fill inside the graph, which would also wipe the step's static inputs on every replay): one
// the step never writes reads as the poison after every replay, and the step's input and
// output are this replay's.
TEST(PoisonCuda, BlocksAllocatedInsideACaptureArePoisonedOnce) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const PoisonScope poison;
  train::CapturedStep step([](const std::vector<Tensor>& in) {
    Tensor fresh = empty({512}, {.device = in[0].device()});
    return std::vector<Tensor>{fresh, in[0] + 1.0};
  });
  Tensor x = zeros({512}, {.device = gpu});
  for (int i = 0; i < 3; ++i) {
    x.fill_(static_cast<float>(i));
    const std::vector<Tensor> r = step({x});
    for (float v : r[0].to_vector<float>()) ASSERT_TRUE(std::isnan(v)) << "call " << i;
    for (float v : r[1].to_vector<float>()) ASSERT_EQ(v, i + 1.0f) << "call " << i;
  }
}

}  // namespace poison_test
