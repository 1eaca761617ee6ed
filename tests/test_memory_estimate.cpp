// tests/test_memory_estimate.cpp — estimate_training_memory (docs/memory.md, "Estimating a
// training step") against the measured peak of real steps: memory_stats(d).peak_allocated
// over steady steps after reset_peak_memory_stats, less what the device held before the
// model was made, within 15% on three models (an MLP, a CNN with batch norm and pooling, a
// small GPT-2) on the CPU and, on the GPU machine, on CUDA. Also: the parts follow from the
// parameters exactly, the estimate leaves the model and the process as they were, and bad
// input is refused with a clear error; a dry run for a cuDNN target traces no im2col temporaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "core/alloc_trace.hpp"
#include "cuda_skip.hpp"
#include "ember/conv_backend.hpp"
#include "ember/ember.hpp"
#include "ember/memory_estimate.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"
#include "memory_stats.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::in_use;

// A model, its batch shape, the input's dtype and the loss its step computes.
struct EstimateCase {
  std::string name;
  std::function<nn::Module()> make;
  Shape input;
  DType input_dtype = DType::f32;
};

// The step's loss: cross-entropy against random classes, one per row of the output (a
// language model's [B, T, V] logits are B·T rows), made on the output's device.
Tensor class_loss(const Tensor& out) {
  const int64_t classes = out.shape()[out.dim() - 1];
  const Tensor logits = out.reshape({-1, classes});
  return cross_entropy(logits, randint(0, classes, {logits.shape()[0]}, {.device = out.device()}));
}

EstimateCase mlp_case() {
  return {
      "MLP",
      [] {
        return nn::Module(nn::Sequential({nn::Linear(512, 1024), nn::ReLU(), nn::Linear(1024, 1024),
                                          nn::GELU(), nn::Linear(1024, 10)}));
      },
      Shape{128, 512}};
}

EstimateCase cnn_case() {
  return {
      "CNN",
      [] {
        return nn::Module(nn::Sequential(
            {nn::Conv2d(nn::Conv2dOptions{3, 32, 3, 1, 1}), nn::BatchNorm2d(32), nn::ReLU(),
             nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions{32, 64, 3, 1, 1}), nn::BatchNorm2d(64),
             nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(64 * 8 * 8, 10)}));
      },
      Shape{32, 3, 32, 32}};
}

constexpr int64_t kGptVocab = 512, kSeq = 64, kGptBatch = 16;

EstimateCase gpt_case() {
  return {"GPT",
          [] {
            nn::GPT2Config c;
            c.vocab_size = kGptVocab;
            c.n_positions = kSeq;
            c.n_embd = 128;
            c.n_layer = 2;
            c.n_head = 4;
            return nn::Module(nn::GPT2(c));
          },
          Shape{kGptBatch, kSeq}, DType::i64};
}

// The estimate for `c` on `device`, then the measured peak of steady Adam steps there.
void check_estimate(const EstimateCase& c, Device device) {
  SCOPED_TRACE(c.name + " on " + device.str());
  empty_cache(device);
  const int64_t before = in_use(memory_stats(device));
  manual_seed(7);
  nn::Module model = c.make();  // on the CPU
  const int64_t batch = c.input[0];
  const MemoryEstimateOptions options{.device = device,
                                      .optimizer = OptimizerKind::adam,
                                      .input_dtype = c.input_dtype,
                                      .loss = class_loss};
  const MemoryEstimate e = estimate_training_memory(model, c.input, options);
  EXPECT_EQ(e.batch, batch);
  EXPECT_EQ(e.total, e.parameters + e.buffers + e.gradients + e.optimizer_state + e.activations);
  EXPECT_EQ(e.gradients, e.parameters) << "every parameter is trained";
  EXPECT_EQ(e.optimizer_state, 2 * e.parameters) << "Adam keeps two tensors per parameter";
  EXPECT_GT(e.activations, 0);
  EXPECT_FALSE(e.assumptions.empty());

  model->to(device);
  optim::Adam opt(model->parameters(), {.lr = 1e-4});
  auto step = [&] {
    opt.zero_grad();
    const Tensor x = c.input_dtype == DType::i64
                         ? randint(0, kGptVocab, c.input, {.device = device})
                         : randn(c.input, {.device = device});
    Tensor loss = class_loss(model(x));
    loss.backward();
    opt.step();
  };
  step();  // the optimizer's state
  step();
  reset_peak_memory_stats(device);
  step();
  step();
  const int64_t measured = memory_stats(device).peak_allocated - before;
  const double error = static_cast<double>(e.total - measured) / static_cast<double>(measured);
  EXPECT_LE(std::abs(error), 0.15)
      << "estimated " << e.total << " bytes, measured " << measured << " (" << 100 * error << "%)\n"
      << e.to_string();
}

TEST(MemoryEstimate, MlpWithinFifteenPercentOnTheCpu) { check_estimate(mlp_case(), Device::cpu()); }
TEST(MemoryEstimate, CnnWithinFifteenPercentOnTheCpu) { check_estimate(cnn_case(), Device::cpu()); }
TEST(MemoryEstimate, GptWithinFifteenPercentOnTheCpu) { check_estimate(gpt_case(), Device::cpu()); }

TEST(MemoryEstimateCuda, MlpWithinFifteenPercent) {
  SKIP_WITHOUT_CUDA();
  check_estimate(mlp_case(), Device::cuda(0));
}
// cuDNN for every convolution (true) or none, the previous mode restored after.
using CudnnSwitch = ember_test::CudnnConvolutionsScope;

TEST(MemoryEstimateCuda, CnnWithinFifteenPercent) {
  SKIP_WITHOUT_CUDA();
  for (const bool cudnn : {false, true}) {
    SCOPED_TRACE(cudnn ? "cuDNN convolutions" : "im2col convolutions");
    const CudnnSwitch use(cudnn);
    check_estimate(cnn_case(), Device::cuda(0));
  }
}

// The largest request a conv2d's forward and backward on the CPU make while planning for a GPU
// (a memory estimate's dry run), with cuDNN convolutions on or off.
int64_t largest_request_planning_for_gpu(bool cudnn) {
  struct Largest final : core::AllocationObserver {
    void allocated(const Storage*, size_t bytes) override {
      largest = std::max(largest, static_cast<int64_t>(bytes));
    }
    void freed(const Storage*) override {}
    int64_t largest = 0;
  } observer;
  const CudnnSwitch use(cudnn);
  manual_seed(3);
  const Tensor x = randn({4, 8, 16, 16}).requires_grad_();
  const Tensor w = randn({16, 8, 3, 3}).requires_grad_();
  const Tensor b = randn({16}).requires_grad_();
  core::AllocationObserver* previous = core::set_allocation_observer(&observer);
  {
    const core::PlanningDeviceGuard plan(Device::cuda(0));
    conv2d(x, w, b, {1, 1}, {1, 1}).sum().backward();
  }
  core::set_allocation_observer(previous);
  return observer.largest;
}

// Note [A dry run for a cuDNN target]: the target's cuDNN makes the output [4, 16, 16, 16]
// (65,536 bytes) and the gradients, never im2col's columns over the batch ([72, 4·256] f32:
// 294,912 bytes), which a dry run for an im2col target does trace.
TEST(MemoryEstimate, DryRunForACudnnTargetTracesNoIm2colColumns) {
  constexpr int64_t kOutput = 4 * 16 * 16 * 16 * 4, kColumns = 72 * 4 * 256 * 4;
  EXPECT_GE(largest_request_planning_for_gpu(false), kColumns);
  EXPECT_EQ(largest_request_planning_for_gpu(true), kOutput);
}
TEST(MemoryEstimateCuda, GptWithinFifteenPercent) {
  SKIP_WITHOUT_CUDA();
  check_estimate(gpt_case(), Device::cuda(0));
}

TEST(MemoryEstimate, PartsFollowTheParametersAndTheOptimizer) {
  nn::Sequential net({nn::Linear(100, 200), nn::BatchNorm1d(200), nn::Linear(200, 3)});
  // CPU blocks: 64-byte minimum, 8 size classes per power of two (src/cpu/allocator.cpp).
  // 100*200*4 = 80000 -> 81920; 200*4 = 800 -> 832; 200*3*4 = 2400 -> 2560; 3*4 = 12 -> 64.
  const int64_t params = 81920 + 832 + 832 + 832 + 2560 + 64;  // weights, biases, bn gamma/beta
  const int64_t buffers = 832 + 832 + 64;  // running mean, running var, num_batches_tracked
  for (const auto& [kind, tensors] :
       {std::pair{OptimizerKind::none, 0}, std::pair{OptimizerKind::sgd, 0},
        std::pair{OptimizerKind::sgd_momentum, 1}, std::pair{OptimizerKind::adam, 2},
        std::pair{OptimizerKind::adam_amsgrad, 3}}) {
    const MemoryEstimate e = estimate_training_memory(net, Shape{8, 100}, {.optimizer = kind});
    EXPECT_EQ(e.parameters, params);
    EXPECT_EQ(e.buffers, buffers);
    EXPECT_EQ(e.gradients, params);
    EXPECT_EQ(e.optimizer_state, tensors * params);
  }
}

TEST(MemoryEstimate, ActivationsGrowWithTheBatch) {
  nn::Sequential net({nn::Linear(256, 512), nn::ReLU(), nn::Linear(512, 256)});
  const int64_t a64 = estimate_training_memory(net, Shape{64, 256}).activations;
  const int64_t a256 = estimate_training_memory(net, Shape{256, 256}).activations;
  const int64_t a3 = estimate_training_memory(net, Shape{3, 256}).activations;
  EXPECT_GT(a256, 3 * a64) << "4x the batch, about 4x the activations";
  EXPECT_LT(a256, 5 * a64);
  EXPECT_LT(a3, a64);
}

TEST(MemoryEstimate, LeavesTheModelAndTheProcessAsTheyWere) {
  manual_seed(11);
  nn::Sequential net(
      {nn::Linear(16, 32), nn::BatchNorm1d(32), nn::Dropout(0.5), nn::Linear(32, 4)});
  net->eval();
  const Tensor mean_before = net->named_buffers()[0].second.clone();
  const RngState rng = get_rng_state();
  const int64_t before = in_use(memory_stats(Device::cpu()));
  (void)estimate_training_memory(net, Shape{64, 16});
  EXPECT_FALSE(net->is_training()) << "the mode is restored";
  for (const Tensor& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(net->named_buffers()[0].second.to_vector<float>(), mean_before.to_vector<float>())
      << "batch norm's running mean is restored";
  EXPECT_EQ(get_rng_state().offset, rng.offset) << "dropout's draws are given back";
  EXPECT_EQ(in_use(memory_stats(Device::cpu())), before) << "nothing of the dry run stays";
}

TEST(MemoryEstimate, RefusesBadInput) {
  nn::Sequential net({nn::Linear(4, 2)});
  std::string msg = error_of([&] { (void)estimate_training_memory(net, Shape{}); });
  EXPECT_NE(msg.find("estimate_training_memory: the input shape has no batch dimension"),
            std::string::npos)
      << msg;
  msg = error_of([&] { (void)estimate_training_memory(net, Shape{0, 4}); });
  EXPECT_NE(msg.find("dimension 0 of the input shape is 0 (got [0, 4]"), std::string::npos) << msg;
  msg = error_of([&] { (void)estimate_training_memory(net, Shape{8, -4}); });
  EXPECT_NE(msg.find("dimension 1 of the input shape is -4"), std::string::npos) << msg;
  msg = error_of([&] {
    (void)estimate_training_memory(net, Shape{8, 4},
                                   {.loss = [](const Tensor& out) { return out * 2.0; }});
  });
  // The dry run's first batch is 2 (Note [Estimating a training step's memory]).
  EXPECT_NE(msg.find("estimate_training_memory: the loss gave [2, 2] (expected one value"),
            std::string::npos)
      << msg;
  msg = error_of([&] { (void)estimate_training_memory(nn::Module(), Shape{8, 4}); });
  EXPECT_NE(msg.find("estimate_training_memory: the module handle is empty"), std::string::npos)
      << msg;
}

TEST(MemoryEstimateCuda, RefusesAModelAlreadyOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  nn::Sequential net({nn::Linear(4, 2)});
  net->to(Device::cuda(0));
  const std::string msg = error_of([&] {
    (void)estimate_training_memory(net, Shape{8, 4}, {.device = Device::cuda(0)});
  });
  EXPECT_NE(msg.find("parameter '0.weight' is on cuda:0 (expected the model on the CPU"),
            std::string::npos)
      << msg;
}

}  // namespace
