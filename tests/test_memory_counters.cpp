// tests/test_memory_counters.cpp — memory_stats' counters (docs/memory.md, "Counters"):
// kernel_launches and the host<->device copies beside their bytes, and the profiler's
// per-step figures built on them. A steady training step on a GPU launches the same kernels
// every step and moves no byte across the bus (the batch is made on the device); a captured
// step's replays likewise. On the CPU nothing is launched and nothing is transferred.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/train/capture.hpp"

namespace {

using namespace ember;  // NOLINT: test file

// An MLP training on `device` (Adam, or SGD with momentum) with a batch made there; one call
// is one step on that batch (or on the given inputs, returning the loss).
struct MlpTraining {
  MlpTraining(Device device, uint64_t seed, bool adam, int64_t batch) {
    manual_seed(seed);
    net->to(device);
    if (adam)
      opt = std::make_unique<optim::Adam>(net->parameters(), optim::AdamOptions{.lr = 1e-3});
    else
      opt = std::make_unique<optim::SGD>(net->parameters(),
                                         optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    x = randn({batch, 64}, {.device = device});
    y = randint(0, 10, {batch}, {.device = device});
  }
  Tensor step(const Tensor& in, const Tensor& target) {
    opt->zero_grad();
    Tensor loss = cross_entropy(net(in), target);
    loss.backward();
    opt->step();
    return loss;
  }
  void operator()(bool read_loss = false) {
    const Tensor loss = step(x, y);
    if (read_loss) (void)loss.item<float>();
  }
  nn::Sequential net{nn::Linear(64, 128), nn::ReLU(), nn::Linear(128, 10)};
  std::unique_ptr<optim::Optimizer> opt;
  Tensor x, y;
};

// The counters' change over `steps` calls of `step`, one reading per step.
struct Delta {
  int64_t launches = 0, h2d_copies = 0, h2d_bytes = 0, d2h_copies = 0, d2h_bytes = 0;
};
template <typename Step>
std::vector<Delta> per_step(Device device, int steps, Step&& step) {
  std::vector<Delta> out;
  MemoryStats before = memory_stats(device);
  for (int i = 0; i < steps; ++i) {
    step();
    const MemoryStats after = memory_stats(device);
    out.push_back({after.kernel_launches - before.kernel_launches,
                   after.host_to_device_copies - before.host_to_device_copies,
                   after.host_to_device_bytes - before.host_to_device_bytes,
                   after.device_to_host_copies - before.device_to_host_copies,
                   after.device_to_host_bytes - before.device_to_host_bytes});
    before = after;
  }
  return out;
}

TEST(MemoryCounters, CpuLaunchesNothingAndTransfersNothing) {
  const Device cpu = Device::cpu();
  MlpTraining train(cpu, 1, /*adam=*/true, 32);
  const auto deltas = per_step(cpu, 3, [&] { train(/*read_loss=*/true); });
  for (const Delta& d : deltas) {
    EXPECT_EQ(d.launches, 0) << "the CPU's kernels are calls, not launches";
    EXPECT_EQ(d.h2d_copies, 0);
    EXPECT_EQ(d.d2h_copies, 0);
    EXPECT_EQ(d.h2d_bytes, 0);
    EXPECT_EQ(d.d2h_bytes, 0);
  }
  const MemoryStats s = memory_stats(cpu);
  EXPECT_EQ(s.kernel_launches, 0);
  EXPECT_EQ(s.host_to_device_copies, 0);
  EXPECT_EQ(s.device_to_host_copies, 0);
}

// Runs `steps` training steps under `prof`, one profiler step each, then stops it.
void run_profiled(MlpTraining& train, Profiler& prof, int steps) {
  for (int i = 0; i < steps; ++i) {
    train();
    prof.step();
  }
  prof.stop();
}

TEST(MemoryCounters, ProfilerStepCountersOnTheCpuAreZeroPerStep) {
  MlpTraining train(Device::cpu(), 2, /*adam=*/false, 16);
  Profiler prof;
  run_profiled(train, prof, 3);
  ASSERT_EQ(prof.step_counters().size(), 3u);
  for (const ProfileStepCounters& c : prof.step_counters()) {
    EXPECT_EQ(c.kernel_launches, 0);
    EXPECT_EQ(c.host_to_device_copies + c.device_to_host_copies, 0);
  }
  const std::string table = prof.table();
  EXPECT_NE(table.find("last step: 0 kernel launches (0 to 0 over 3 steps)"), std::string::npos)
      << table;
}

TEST(MemoryCountersCuda, CopiesAreCountedBesideTheirBytes) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const MemoryStats before = memory_stats(gpu);
  const Tensor host = arange(0, 1000, 1, {.dtype = DType::f32});  // 4000 bytes
  const Tensor on_gpu = host.to(gpu);
  const Tensor back = on_gpu.to(Device::cpu());
  const MemoryStats after = memory_stats(gpu);
  EXPECT_EQ(after.host_to_device_copies - before.host_to_device_copies, 1);
  EXPECT_EQ(after.host_to_device_bytes - before.host_to_device_bytes, 4000);
  EXPECT_EQ(after.device_to_host_copies - before.device_to_host_copies, 1);
  EXPECT_EQ(after.device_to_host_bytes - before.device_to_host_bytes, 4000);
  EXPECT_EQ(back.to_vector<float>()[999], 999.0f);
  const MemoryStats read = memory_stats(gpu);
  EXPECT_EQ(read.device_to_host_copies - after.device_to_host_copies, 0)
      << "back is on the CPU: reading it copies nothing";
  // A kernel on the device counts; the CPU's do not.
  const int64_t launches = memory_stats(gpu).kernel_launches;
  const Tensor sum = on_gpu + on_gpu;
  EXPECT_EQ(memory_stats(gpu).kernel_launches - launches, 1) << "one add, one launch";
  EXPECT_EQ(memory_stats(Device::cpu()).kernel_launches, 0);
}

TEST(MemoryCountersCuda, SteadyEagerStepMovesNoBytesAndLaunchesAConstantNumber) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  MlpTraining train(gpu, 3, /*adam=*/true, 32);
  train();  // the optimizer's state and the GEMM plans
  train();
  const auto deltas = per_step(gpu, 4, [&] { train(); });
  for (size_t i = 0; i < deltas.size(); ++i) {
    const Delta& d = deltas[i];
    SCOPED_TRACE("step " + std::to_string(i));
    EXPECT_GT(d.launches, 5) << "forward, backward and the update are several kernels";
    EXPECT_EQ(d.launches, deltas[0].launches) << "a steady step launches the same kernels";
    EXPECT_EQ(d.h2d_copies, 0);
    EXPECT_EQ(d.h2d_bytes, 0) << "no weight (nor anything else) crosses the bus";
    EXPECT_EQ(d.d2h_copies, 0);
    EXPECT_EQ(d.d2h_bytes, 0);
  }
  // Reading the loss is one device-to-host copy of 4 bytes.
  const auto read = per_step(gpu, 1, [&] { train(/*read_loss=*/true); });
  EXPECT_EQ(read[0].launches, deltas[0].launches);
  EXPECT_EQ(read[0].d2h_copies, 1);
  EXPECT_EQ(read[0].d2h_bytes, 4);
  EXPECT_EQ(read[0].h2d_bytes, 0);
}

TEST(MemoryCountersCuda, CapturedStepReplaysCountTheirGraphsKernels) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  MlpTraining train(gpu, 4, /*adam=*/true, 32);
  train::CapturedStep step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{train.step(in[0], in[1])}; });
  const std::vector<Tensor> batch = {train.x, train.y};
  step(batch);  // eager warm-up
  step(batch);  // capture and first launch
  ASSERT_EQ(step.graph_count(), 1);
  const int64_t kernels = step.kernels_per_step();
  ASSERT_GT(kernels, 5);
  const auto deltas = per_step(gpu, 4, [&] { step(batch); });
  for (size_t i = 0; i < deltas.size(); ++i) {
    const Delta& d = deltas[i];
    SCOPED_TRACE("replay " + std::to_string(i));
    EXPECT_EQ(d.launches, deltas[0].launches);
    // The graph's kernels, the upload of its per-step scalars (one launch) and the copies of
    // the two inputs into the graph's buffers (one copy kernel each).
    EXPECT_EQ(d.launches, kernels + 1 + 2);
    EXPECT_EQ(d.h2d_bytes, 0);
    EXPECT_EQ(d.d2h_bytes, 0);
    EXPECT_EQ(d.h2d_copies + d.d2h_copies, 0);
  }
}

TEST(MemoryCountersCuda, ProfilerShowsConstantLaunchesPerStep) {
  SKIP_WITHOUT_CUDA();
  MlpTraining train(Device::cuda(0), 5, /*adam=*/false, 16);
  train();
  Profiler prof;
  run_profiled(train, prof, 3);
  ASSERT_EQ(prof.step_counters().size(), 3u);
  const ProfileStepCounters first = prof.step_counters()[0];
  EXPECT_GT(first.kernel_launches, 5);
  for (const ProfileStepCounters& c : prof.step_counters()) {
    EXPECT_EQ(c.kernel_launches, first.kernel_launches);
    EXPECT_EQ(c.host_to_device_bytes + c.device_to_host_bytes, 0);
  }
}

}  // namespace
