// tests/test_threads.cpp — ember used from several threads at once (issue 31 item 8;
// docs/threads.md states what is and is not safe, citing these tests).
//
// Shared inference: one model in eval mode, 8 std::threads each running forwards under
// NoGradGuard on inputs of their own, every output bitwise equal to the one-thread output for
// the same input (an MLP with a fused Linear+ReLU, a transformer encoder layer, a CNN with
// BatchNorm; on the CPU and on CUDA). Separate training: two threads each training a model of
// their own (optimizer, loss, backward) end with the weights of the same two trainings run one
// after the other, bitwise, while a third thread runs inference beside them. The global
// generator: draws from several threads never share counters. make test runs this file (with
// the other threading tests) under ThreadSanitizer too (ember_tests_tsan, label `tsan`).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/memory.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/optim.hpp"
#include "ember/random.hpp"

namespace {

using namespace ember;  // NOLINT: test file

// ThreadSanitizer runs code 5-15 times slower: fewer rounds there, the same checks.
#if defined(__SANITIZE_THREAD__)
constexpr int kRounds = 3;
constexpr int kSteps = 4;
#else
constexpr int kRounds = 20;
constexpr int kSteps = 12;
#endif
constexpr int kThreads = 8;

// Whether two tensors hold the same shape, dtype and bytes (read on the CPU).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(),
                     static_cast<size_t>(x.numel()) * element_size(x.dtype())) == 0;
}

struct Model {
  std::string name;
  nn::Module module;
  std::function<Tensor(int64_t batch)> input;  // draws an input with `batch` rows
};

std::vector<Model> inference_models() {
  manual_seed(31);
  std::vector<Model> models;
  // Linear followed by ReLU: Sequential runs them as one GEMM with a fused epilogue.
  nn::Sequential mlp{nn::Linear(64, 128), nn::ReLU(), nn::Linear(128, 96), nn::GELU(),
                     nn::Linear(96, 10)};
  models.push_back({"mlp", mlp, [](int64_t b) { return randn({b, 64}); }});
  nn::TransformerEncoderLayer encoder(nn::TransformerEncoderLayerOptions{
      .d_model = 32, .nhead = 4, .dim_feedforward = 64, .batch_first = true});
  models.push_back({"transformer", encoder, [](int64_t b) { return randn({b, 6, 32}); }});
  nn::Sequential cnn{nn::Conv2d(3, 8, 3, 1, 1), nn::BatchNorm2d(8), nn::ReLU(),
                     nn::MaxPool2d(2),          nn::Flatten(),      nn::Linear(8 * 4 * 4, 10)};
  models.push_back({"cnn", cnn, [](int64_t b) { return randn({b, 3, 8, 8}); }});
  for (Model& m : models) m.module->eval();
  return models;
}

// Runs kThreads threads, each forwarding its own inputs kRounds times under NoGradGuard, all
// against the one-thread outputs; returns the mismatches found (empty: every output equal).
std::vector<std::string> forward_from_threads(const Model& m, Device device) {
  // Two inputs per thread, of different batch sizes, so different shapes run at once.
  std::vector<std::vector<Tensor>> inputs(kThreads), want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int64_t batch : {int64_t{1} + t, int64_t{9} + 2 * t}) {
      const Tensor x = m.input(batch).to(device);
      NoGradGuard no_grad;
      inputs[t].push_back(x);
      want[t].push_back(m.module(x).to(Device::cpu()));
    }
  }
  std::vector<std::vector<std::string>> bad(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      try {
        NoGradGuard no_grad;
        for (int r = 0; r < kRounds; ++r) {
          for (size_t i = 0; i < inputs[t].size(); ++i) {
            const Tensor y = m.module(inputs[t][i]);
            if (y.requires_grad())
              bad[t].push_back(m.name + ": an output under NoGradGuard requires grad");
            if (!same_bits(y, want[t][i]))
              bad[t].push_back(m.name + ": thread " + std::to_string(t) + " round " +
                               std::to_string(r) + " input " + std::to_string(i) + " " +
                               inputs[t][i].shape().to_string() +
                               " differs from the one-thread output");
          }
        }
      } catch (const std::exception& e) {
        bad[t].push_back(m.name + ": thread " + std::to_string(t) + " threw: " + e.what());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::vector<std::string> all;
  for (const auto& b : bad) all.insert(all.end(), b.begin(), b.end());
  return all;
}

void expect_shared_inference_matches(Device device) {
  for (Model& m : inference_models()) {
    m.module->to(device);
    const std::vector<std::string> bad = forward_from_threads(m, device);
    EXPECT_TRUE(bad.empty()) << bad.size() << " mismatches, the first: " << bad.front();
    EXPECT_FALSE(m.module->is_training()) << m.name;
  }
}

TEST(Threads, SharedEvalModelGivesEveryThreadTheOneThreadOutputs) {
  expect_shared_inference_matches(Device::cpu());
}

TEST(ThreadsCuda, SharedEvalModelGivesEveryThreadTheOneThreadOutputs) {
  SKIP_WITHOUT_CUDA();
  expect_shared_inference_matches(Device::cuda(0));
}

// ---- separate models trained on separate threads ----

// One training run: its own model, optimizer, batch and loss; the seed fixes the model's
// initial weights and the batch (drawn here, before any thread starts).
struct Training {
  nn::Module model;
  std::unique_ptr<optim::Optimizer> opt;
  Tensor x, target;
  bool classify = false;  // cross_entropy on class indices, else mse_loss

  void run(int steps) {
    for (int s = 0; s < steps; ++s) {
      opt->zero_grad();
      const Tensor out = model(x);
      const Tensor loss = classify ? cross_entropy(out, target) : mse_loss(out, target);
      loss.backward();
      opt->step();
    }
  }
};

// An MLP with Adam and cross-entropy.
Training mlp_training() {
  manual_seed(7);
  Training t;
  t.model = nn::Sequential{nn::Linear(16, 32), nn::ReLU(), nn::Linear(32, 5)};
  t.opt = std::make_unique<optim::Adam>(t.model->parameters(), optim::AdamOptions{.lr = 1e-2});
  t.x = randn({24, 16});
  t.target = randint(0, 5, {24});
  t.classify = true;
  return t;
}

// A CNN with BatchNorm in training mode (its running statistics are buffers the forward
// writes), SGD with momentum and MSE.
Training cnn_training() {
  manual_seed(8);
  Training t;
  t.model = nn::Sequential{nn::Conv2d(2, 4, 3, 1, 1), nn::BatchNorm2d(4), nn::ReLU(), nn::Flatten(),
                           nn::Linear(4 * 6 * 6, 3)};
  t.opt = std::make_unique<optim::SGD>(t.model->parameters(),
                                       optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  t.x = randn({10, 2, 6, 6});
  t.target = randn({10, 3});
  return t;
}

void expect_same_state(const nn::Module& got, const nn::Module& want, const std::string& what) {
  const nn::StateDict g = got->state_dict(), w = want->state_dict();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].first, w[i].first) << what;
    EXPECT_TRUE(same_bits(g[i].second, w[i].second))
        << what << ": " << g[i].first << " differs from the run one after the other";
  }
}

TEST(Threads, TwoThreadsTrainingTwoModelsMatchTheRunsOneAfterTheOther) {
  // The reference: the two trainings one after the other on this thread.
  Training mlp_alone = mlp_training(), cnn_alone = cnn_training();
  mlp_alone.run(kSteps);
  cnn_alone.run(kSteps);
  // The same two at once, each on its own thread, with a third thread running inference on a
  // shared eval-mode model beside them (its NoGradGuard must not reach the trainers).
  Training mlp = mlp_training(), cnn = cnn_training();
  std::vector<Model> shared = inference_models();
  const Model& infer = shared[0];
  const Tensor probe = infer.input(5);
  Tensor want;
  {
    NoGradGuard no_grad;
    want = infer.module(probe);
  }
  std::atomic<bool> done{false};
  std::atomic<int> probes{0}, probe_mismatches{0};
  std::thread inference([&] {
    NoGradGuard no_grad;
    while (!done.load() || probes.load() == 0) {
      if (!same_bits(infer.module(probe), want)) probe_mismatches.fetch_add(1);
      probes.fetch_add(1);
    }
  });
  std::thread a([&] { mlp.run(kSteps); });
  std::thread b([&] { cnn.run(kSteps); });
  a.join();
  b.join();
  done.store(true);
  inference.join();
  expect_same_state(mlp.model, mlp_alone.model, "mlp (Adam, cross_entropy)");
  expect_same_state(cnn.model, cnn_alone.model, "cnn (BatchNorm, SGD momentum, mse)");
  EXPECT_GT(probes.load(), 0);
  EXPECT_EQ(probe_mismatches.load(), 0) << "of " << probes.load() << " inference probes";
  // The trainings did move the weights (so equality above says something).
  Training fresh = mlp_training();
  EXPECT_FALSE(same_bits(mlp.model->parameters()[0], fresh.model->parameters()[0]));
}

// ---- set_memory_limit under concurrent allocations ----

// Two threads at once ask for a block each where the limit leaves room for one: in every round
// one gets it and the other OutOfMemory, and the pools never pass the limit. (The CPU allocator
// once checked the limit in one critical section and charged the block in a later one: both
// threads could pass the check.)
void expect_limit_holds_for_concurrent_allocations(Device d) {
  constexpr int64_t kFloats = int64_t{1} << 20;  // 4 MiB blocks: aligned_alloc maps them
  synchronize(d);
  empty_cache(d);
  const auto reserved = [d] {
    const MemoryStats m = memory_stats(d);
    return m.persistent_reserved + m.pass_reserved;
  };
  const int64_t base = reserved();
  const int64_t limit = base + 6 * kFloats;  // room for one block of 4 * kFloats, not two
  set_memory_limit(d, limit);
  int both = 0, neither = 0, over = 0;
#if defined(__SANITIZE_THREAD__)
  constexpr int kTries = 150;
#else
  constexpr int kTries = 300;
#endif
  for (int round = 0; round < kTries; ++round) {
    std::atomic<int> ready{0}, got{0};
    std::vector<Tensor> held(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        try {
          held[t] = empty({kFloats}, {.device = d});
          got.fetch_add(1);
        } catch (const OutOfMemory&) {
        }
      });
    }
    for (std::thread& th : threads) th.join();
    both += got.load() == 2;
    neither += got.load() == 0;
    over += reserved() > limit;
    held.clear();
    empty_cache(d);
  }
  set_memory_limit(d, 0);
  EXPECT_EQ(both, 0) << "rounds (of " << kTries
                     << ") where both threads got a block past the limit";
  EXPECT_EQ(neither, 0) << "rounds where neither thread got the block that fits";
  EXPECT_EQ(over, 0) << "rounds that left the pools past the limit";
}

TEST(Threads, MemoryLimitHoldsWhenThreadsAllocateAtOnce) {
  expect_limit_holds_for_concurrent_allocations(Device::cpu());
}

TEST(ThreadsCuda, MemoryLimitHoldsWhenThreadsAllocateAtOnce) {
  SKIP_WITHOUT_CUDA();
  expect_limit_holds_for_concurrent_allocations(Device::cuda(0));
}

// ---- the global generator ----

// advance_rng hands every draw its own counters, whichever thread asks: concurrent draws
// never overlap (they are not reproducible across runs either: which thread gets which block
// depends on timing; docs/threads.md).
TEST(Threads, GlobalGeneratorDrawsFromThreadsNeverShareCounters) {
  manual_seed(5);
  constexpr int kDraws = 2000;
  std::vector<std::vector<uint64_t>> offsets(4);
  std::vector<std::thread> threads;
  for (auto& o : offsets) {
    threads.emplace_back([&o] {
      for (int i = 0; i < kDraws; ++i) o.push_back(advance_rng(6));  // 6 rounds up to 8
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<uint64_t> all;
  for (const auto& o : offsets) all.insert(all.end(), o.begin(), o.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), size_t{4 * kDraws});
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], 8 * i) << "draw " << i;
  EXPECT_EQ(get_rng_state().offset, uint64_t{8 * 4 * kDraws});
  EXPECT_EQ(get_rng_state().seed, 5u);
}

}  // namespace
