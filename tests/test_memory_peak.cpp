// tests/test_memory_peak.cpp — the overall peaks of memory_stats (docs/memory.md): peak_allocated
// and peak_reserved are the high-water marks of the bytes in use and reserved over every pool
// of a device (Persistent, Pass and captured steps' private pools), like PyTorch's
// max_memory_allocated / max_memory_reserved; reset_peak_memory_stats sets them (and the pass
// peak) to the figures now, while reset_peak_stats resets only the pass peak. The CPU figures
// are checked exactly; the CUDA tests skip without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/train/capture.hpp"
#include "memory_stats.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::in_use;
using ember_test::kMiB;
using ember_test::reserved;

// A tensor of `bytes` (a multiple of 4) in `pool`.
Tensor block_in(Pool pool, int64_t bytes, Device device) {
  PoolGuard guard(pool);
  return empty({bytes / 4}, {.device = device});
}

// The checks every device shares: tensors in both pools raise both peaks to the figures at
// their highest, the peaks stay after the tensors go, and a reset brings them down to now.
void check_peaks_follow_both_pools(Device device) {
  reset_peak_memory_stats(device);
  const MemoryStats base = memory_stats(device);
  EXPECT_EQ(base.peak_allocated, in_use(base));
  EXPECT_EQ(base.peak_reserved, reserved(base));
  EXPECT_EQ(base.pass_peak, base.pass_in_use);  // reset_peak_memory_stats resets it too

  MemoryStats high;
  {
    Tensor a = block_in(Pool::Pass, 4 * kMiB, device);
    Tensor b = block_in(Pool::Persistent, 8 * kMiB, device);
    high = memory_stats(device);
    // Nothing was freed since the reset: the highest figures are the ones now.
    EXPECT_EQ(in_use(high), in_use(base) + 12 * kMiB);
    EXPECT_EQ(high.peak_allocated, in_use(high));
    EXPECT_EQ(high.peak_reserved, reserved(high));
    EXPECT_GE(high.peak_reserved, high.peak_allocated);
  }
  // Freed: the bytes in use fall back, the peaks stay.
  const MemoryStats after = memory_stats(device);
  EXPECT_EQ(in_use(after), in_use(base));
  EXPECT_EQ(after.peak_allocated, high.peak_allocated);
  EXPECT_EQ(after.peak_reserved, high.peak_reserved);

  // reset_peak_stats is the pass peak alone: the overall peaks are untouched.
  reset_peak_stats(device);
  const MemoryStats pass_reset = memory_stats(device);
  EXPECT_EQ(pass_reset.pass_peak, pass_reset.pass_in_use);
  EXPECT_EQ(pass_reset.peak_allocated, high.peak_allocated);
  EXPECT_EQ(pass_reset.peak_reserved, high.peak_reserved);

  // reset_peak_memory_stats: both fall to the figures now (the freed blocks stay cached, so
  // reserved does not fall until empty_cache).
  reset_peak_memory_stats(device);
  const MemoryStats reset = memory_stats(device);
  EXPECT_EQ(reset.peak_allocated, in_use(reset));
  EXPECT_EQ(reset.peak_allocated, in_use(base));
  EXPECT_EQ(reset.peak_reserved, reserved(reset));
  EXPECT_EQ(reset.pass_peak, reset.pass_in_use);

  empty_cache(device);
  const MemoryStats emptied = memory_stats(device);
  EXPECT_EQ(emptied.peak_reserved, reset.peak_reserved);  // a peak never falls by itself
  reset_peak_memory_stats(device);
  EXPECT_EQ(memory_stats(device).peak_reserved, reserved(memory_stats(device)));
}

TEST(MemoryPeak, CpuPeaksFollowBothPoolsExactly) {
  const Device cpu = Device::cpu();
  check_peaks_follow_both_pools(cpu);

  // With the cache empty, every block comes from the system and adds its size to reserved:
  // 4 MiB and 8 MiB are size classes of their own (no rounding).
  empty_cache(cpu);
  reset_peak_memory_stats(cpu);
  const MemoryStats base = memory_stats(cpu);
  ASSERT_EQ(reserved(base), in_use(base));  // nothing cached
  {
    Tensor a = block_in(Pool::Pass, 4 * kMiB, cpu);
    Tensor b = block_in(Pool::Persistent, 8 * kMiB, cpu);
  }
  {
    Tensor c = block_in(Pool::Pass, 2 * kMiB, cpu);  // one at a time: lower than a + b
  }
  MemoryStats s = memory_stats(cpu);
  EXPECT_EQ(s.peak_allocated, in_use(base) + 12 * kMiB);
  EXPECT_EQ(s.peak_reserved, reserved(base) + 14 * kMiB);  // c was not cached: a new block
  EXPECT_EQ(reserved(s), reserved(base) + 14 * kMiB);
  EXPECT_EQ(s.pass_peak, base.pass_in_use + 4 * kMiB);

  // The reused cached block adds nothing reserved; the peak of bytes in use is per moment.
  reset_peak_memory_stats(cpu);
  { Tensor again = block_in(Pool::Pass, 4 * kMiB, cpu); }
  s = memory_stats(cpu);
  EXPECT_EQ(s.peak_allocated, in_use(base) + 4 * kMiB);
  EXPECT_EQ(s.peak_reserved, reserved(base) + 14 * kMiB);
  EXPECT_EQ(s.cache_hits - base.cache_hits, 1);
  empty_cache(cpu);
}

TEST(MemoryPeak, CpuATrainingStepsPeakCoversItsGradientsAndActivations) {
  const Device cpu = Device::cpu();
  manual_seed(0);
  Tensor w = parameter(randn({256, 256}) * 0.05);
  const Tensor x = randn({512, 256});
  reset_peak_memory_stats(cpu);
  const MemoryStats before = memory_stats(cpu);
  relu(matmul(x, w)).sum().backward();  // the gradient is stolen into the Persistent pool
  const MemoryStats s = memory_stats(cpu);
  // The activation [512, 256] and the gradient [256, 256] were alive together at some point.
  EXPECT_GE(s.peak_allocated, in_use(before) + (512 * 256 + 256 * 256) * 4);
  EXPECT_GE(s.peak_allocated, in_use(s));
  EXPECT_GE(s.peak_reserved, reserved(s));
  EXPECT_GE(s.peak_reserved, s.peak_allocated);
  EXPECT_GE(s.peak_allocated, s.pass_peak);
}

TEST(MemoryPeak, CudaPeaksFollowBothPools) {
  SKIP_WITHOUT_CUDA();
  check_peaks_follow_both_pools(Device::cuda(0));
}

TEST(MemoryPeak, CudaPeaksIncludeCapturedPrivatePools) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const Tensor x = randn({1 << 20}, {.device = gpu});  // 4 MiB
  const int64_t captured_before = memory_stats(gpu).captured_reserved;
  {
    train::CapturedStep step(
        [](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0] * 2.0) + 1.0}; });
    (void)step({x});  // eager warm-up
    synchronize(gpu);
    reset_peak_memory_stats(gpu);
    const MemoryStats base = memory_stats(gpu);
    (void)step({x});  // captures into a private pool, then launches
    synchronize(gpu);
    const MemoryStats s = memory_stats(gpu);
    ASSERT_GT(s.captured_reserved, 0);
    ASSERT_GT(s.captured_in_use, 0);
    // The capture borrowed the warm-up's cached Pass blocks (Note [A capture borrows the eager
    // cache] in src/cuda/allocator.cpp); the peak covers the figures before and after.
    EXPECT_LE(s.pass_reserved, base.pass_reserved);
    EXPECT_GE(s.peak_reserved, reserved(base));
    EXPECT_GE(s.peak_allocated, in_use(s));
    EXPECT_GE(s.peak_reserved, reserved(s));
    EXPECT_GE(s.peak_reserved, s.peak_allocated);
    // A replay allocates nothing: the peaks reset now stay where they are.
    reset_peak_memory_stats(gpu);
    const MemoryStats steady = memory_stats(gpu);
    EXPECT_EQ(steady.peak_allocated, in_use(steady));
    EXPECT_EQ(steady.peak_reserved, reserved(steady));
    (void)step({x});
    synchronize(gpu);
    const MemoryStats replayed = memory_stats(gpu);
    EXPECT_EQ(replayed.captured_reserved, steady.captured_reserved);
    EXPECT_EQ(replayed.peak_reserved, steady.peak_reserved);
  }
  // The graph and its outputs are gone: the private pool's bytes leave the figures, the peak
  // keeps them until the next reset.
  const MemoryStats gone = memory_stats(gpu);
  EXPECT_EQ(gone.captured_reserved, captured_before);
  reset_peak_memory_stats(gpu);
  EXPECT_EQ(memory_stats(gpu).peak_reserved, reserved(memory_stats(gpu)));
}

// A captured training step reserves about what the same eager step does (issue 28's bound:
// 1.1x): the graph's private pool borrows the warm-up's cache (Note [A capture borrows the
// eager cache]) instead of reserving beside it (2x at first, then 1.26x on the H200 when the
// cache was given back to the device before capturing: 154 MiB against 122).
TEST(MemoryPeak, CudaCapturedStepNoLongerReservesTheWarmUpsCacheToo) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const auto run = [&](bool captured) {
    synchronize(gpu);
    empty_cache(gpu);
    manual_seed(0);
    Tensor w1 = randn({1024, 1024}, {.device = gpu}).requires_grad_(true);
    Tensor w2 = randn({1024, 1024}, {.device = gpu}).requires_grad_(true);
    const auto step_fn = [&](const std::vector<Tensor>& in) {
      w1.zero_grad();
      w2.zero_grad();
      Tensor loss = mean(square(matmul(tanh(matmul(in[0], w1)), w2)));
      loss.backward();
      NoGradGuard g;
      w1.sub_(w1.grad() * 1e-3);
      w2.sub_(w2.grad() * 1e-3);
      return std::vector<Tensor>{loss};
    };
    const Tensor x = randn({4096, 1024}, {.device = gpu});
    train::CapturedStep graph(step_fn, {.device = gpu});
    for (int i = 0; i < 3; ++i) (void)(captured ? graph({x}) : step_fn({x}));
    synchronize(gpu);
    reset_peak_memory_stats(gpu);
    for (int i = 0; i < 3; ++i) (void)(captured ? graph({x}) : step_fn({x}));
    synchronize(gpu);
    return memory_stats(gpu).peak_reserved;
  };
  const int64_t eager = run(false), captured = run(true);
  EXPECT_GT(eager, 16 * kMiB);
  // The graph's copy of its input x (16 MiB) is memory the eager step does not have: the
  // bound is on the rest (H200: 138 MiB captured against 122 eager, 16 of it the copy).
  const double input_copy = 4096.0 * 1024 * 4;
  EXPECT_LE(static_cast<double>(captured) - input_copy, 1.1 * static_cast<double>(eager))
      << "eager " << eager / kMiB << " MiB, captured " << captured / kMiB << " MiB";
}

// Note [Private pools] (src/cuda/allocator.cpp): a step that drops the last step's gradient
// (set to none) makes the new one in the old one's block, as its eager steps do, instead of
// reserving a second: the captured run reserves what the eager run does, and its values are
// the eager run's; a tensor made in a held block outlives the graph, then returns to its pool.
TEST(MemoryPeak, CudaCaptureReusesTheEagerBlocksItFrees) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  constexpr int64_t kRows = 4096;  // w and its gradient: 64 MiB each
  const Tensor x = full({kRows, kRows}, 0.5, {.device = gpu});
  const auto step_with = [&x](Tensor& w) {
    return [&w, &x](const std::vector<Tensor>&) {
      w.zero_grad();  // frees the last step's gradient: in a capture, an eager block held
      Tensor loss = sum(square(w * x));
      loss.backward();
      NoGradGuard g;
      w.sub_(w.grad() * 1e-4);
      return std::vector<Tensor>{loss};
    };
  };
  // Peak reserved over steps 3-5 (after 2 warm-up steps), with the losses and final weights.
  const auto run = [&](bool captured, std::vector<float>* losses, Tensor* w_out, Tensor* g_out) {
    synchronize(gpu);
    empty_cache(gpu);
    manual_seed(3);
    Tensor w = randn({kRows, kRows}, {.device = gpu}).requires_grad_(true);
    const auto step = step_with(w);
    train::CapturedStep graph(step, {.device = gpu});
    const auto once = [&] { return (captured ? graph({}) : step({}))[0].item<float>(); };
    for (int i = 0; i < 2; ++i) losses->push_back(once());
    synchronize(gpu);
    reset_peak_memory_stats(gpu);
    for (int i = 0; i < 3; ++i) losses->push_back(once());
    synchronize(gpu);
    const int64_t peak = memory_stats(gpu).peak_reserved;
    *w_out = w.detach().to(Device::cpu());
    *g_out = w.grad();  // on the GPU: a captured run's lives in the graph's memory
    return peak;
  };
  std::vector<float> eager_losses, graph_losses;
  Tensor w_eager, w_graph, g_eager, g_graph;
  const int64_t eager = run(false, &eager_losses, &w_eager, &g_eager);
  g_eager = g_eager.to(Device::cpu());
  synchronize(gpu);
  const int64_t pass_before = memory_stats(gpu).pass_in_use;
  const int64_t captured = run(true, &graph_losses, &w_graph, &g_graph);  // the graph is gone
  EXPECT_EQ(eager_losses, graph_losses);
  NoGradGuard no_grad;
  EXPECT_EQ(max(abs(w_eager - w_graph)).item<float>(), 0.0f);
  EXPECT_EQ(max(abs(g_eager - g_graph.to(Device::cpu()))).item<float>(), 0.0f);
  EXPECT_LE(static_cast<double>(captured), 1.05 * static_cast<double>(eager) + 4.0 * kMiB)
      << "eager " << eager / kMiB << " MiB, captured " << captured / kMiB << " MiB";
  g_graph = Tensor();  // the last tensor in graph memory goes back to its own pool
  synchronize(gpu);
  EXPECT_EQ(memory_stats(gpu).pass_in_use, pass_before);
  EXPECT_EQ(memory_stats(gpu).captured_reserved, 0);
}

}  // namespace
