// tests/test_cuda_runtime.cpp — the CUDA runtime and memory model (ARCHITECTURE §3, issue 5):
// device queries, the caching allocator (split, coalesce, stats, out of memory), transfers,
// release_device, and the residency rules that users rely on. Every test that needs a GPU
// skips with a message when none is present; CudaBuild.* checks the CPU-only build's error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/runtime.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::kGpu;

std::vector<float> host_values(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

// A small MLP on `device` with fixed initial weights (seeded on the CPU, then moved).
nn::Sequential make_mlp(Device device, uint64_t seed = 7) {
  manual_seed(seed);
  nn::Sequential net;
  net->push_back(nn::Linear(20, 32));
  net->push_back(nn::ReLU());
  net->push_back(nn::Linear(32, 5));
  net->to(device);
  return net;
}

struct Batch {
  Tensor x, y;
};

Batch make_batch(Device device) {
  manual_seed(11);
  Tensor x = randn({64, 20});
  Tensor y = randint(0, 5, {64});
  return {x.to(device), y.to(device)};
}

// ---- build and devices ----

TEST(CudaBuild, CpuOnlyBuildSaysBuiltWithoutCuda) {
  if (ember_test::cuda_built())
    GTEST_SKIP() << "ember was built with CUDA: this checks the CPU-only build";
  EXPECT_FALSE(cuda_available());
  EXPECT_EQ(cuda_device_count(), 0);
  try {
    zeros({2}, {.device = kGpu});
    FAIL() << "allocating on cuda:0 in a CPU-only build should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
  }
  EXPECT_THROW(set_default_device(kGpu), Error);
  EXPECT_THROW(release_device(kGpu), Error);
}

TEST(CudaRuntime, NoDeviceIsAClearError) {
  if (!ember_test::cuda_built()) GTEST_SKIP() << "ember was built without CUDA (see CudaBuild.*)";
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: this checks a machine without";
  try {
    zeros({2}, {.device = kGpu});
    FAIL() << "allocating on cuda:0 without a device should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(CudaRuntime, DevicesAndDefaultDevice) {
  SKIP_WITHOUT_CUDA();
  EXPECT_GE(cuda_device_count(), 1);
  EXPECT_NE(cuda_device_description(0).find("sm_"), std::string::npos);
  const Device missing = Device::cuda(cuda_device_count());
  try {
    zeros({2}, {.device = missing});
    FAIL() << "a missing device should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.str() + " does not exist"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(set_default_device(missing), Error);
  set_default_device(kGpu);
  Tensor t = ones({3});
  set_default_device(Device::cpu());
  EXPECT_EQ(t.device(), kGpu);
  EXPECT_EQ(host_values(t), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(zeros({1}).device(), Device::cpu());
}

// ---- allocator ----

TEST(CudaAllocator, SplitsAndCoalescesBlocks) {
  SKIP_WITHOUT_CUDA();
  empty_cache(kGpu);
  const int64_t big = int64_t{16} << 20;  // floats: 64 MiB, a large segment of its own
  const MemoryStats s0 = memory_stats(kGpu);
  void* base = nullptr;
  {
    Tensor a = empty({big});
    ASSERT_EQ(a.device(), Device::cpu());  // default device is the CPU
    Tensor g = empty({big}, {.device = kGpu});
    base = g.data_ptr();
    const MemoryStats s1 = memory_stats(kGpu);
    EXPECT_EQ(s1.system_allocs, s0.system_allocs + 1);
    EXPECT_EQ(s1.pass_reserved - s0.pass_reserved, big * 4);
    EXPECT_EQ(s1.pass_in_use - s0.pass_in_use, big * 4);
  }
  const MemoryStats s2 = memory_stats(kGpu);
  EXPECT_EQ(s2.pass_in_use, s0.pass_in_use) << "the block went back to the cache";
  EXPECT_EQ(s2.pass_reserved - s0.pass_reserved, big * 4) << "and stays reserved";
  EXPECT_GT(s2.fragmentation, 0.0);
  {
    // Two quarters are split off the cached segment, back to back, without cudaMalloc.
    Tensor q1 = empty({big / 4}, {.device = kGpu});
    Tensor q2 = empty({big / 4}, {.device = kGpu});
    EXPECT_EQ(q1.data_ptr(), base);
    EXPECT_EQ(static_cast<char*>(q2.data_ptr()), static_cast<char*>(base) + big);
    const MemoryStats s3 = memory_stats(kGpu);
    EXPECT_EQ(s3.system_allocs, s2.system_allocs);
    EXPECT_EQ(s3.cache_hits, s2.cache_hits + 2);
    EXPECT_EQ(s3.pass_in_use - s0.pass_in_use, big * 2);
  }
  {
    // Freed quarters merged with the rest: the whole segment serves a full-size request.
    Tensor again = empty({big}, {.device = kGpu});
    EXPECT_EQ(again.data_ptr(), base);
    EXPECT_EQ(memory_stats(kGpu).system_allocs, s2.system_allocs);
  }
  empty_cache(kGpu);
  const MemoryStats s4 = memory_stats(kGpu);
  EXPECT_EQ(s4.pass_reserved, s0.pass_reserved) << "empty_cache returns the free segment";
}

TEST(CudaAllocator, SmallBlocksShareASegmentAndRoundTo512Bytes) {
  SKIP_WITHOUT_CUDA();
  const MemoryStats s0 = memory_stats(kGpu);
  Tensor a = empty({1}, {.device = kGpu});    // 4 bytes -> one 512-byte block
  Tensor b = empty({129}, {.device = kGpu});  // 516 bytes -> 1024
  const MemoryStats s1 = memory_stats(kGpu);
  EXPECT_EQ(s1.pass_in_use - s0.pass_in_use, 512 + 1024);
  EXPECT_EQ(s1.alloc_count - s0.alloc_count, 2);
  EXPECT_LE(s1.system_allocs - s0.system_allocs, 1) << "small blocks share 2 MiB segments";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data_ptr()) % 512, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data_ptr()) % 512, 0u);
}

TEST(CudaAllocator, OutOfMemoryNamesTheRequestAndRecovers) {
  SKIP_WITHOUT_CUDA();
  const int64_t floats = int64_t{1} << 48;  // 1 PiB
  try {
    empty({floats}, {.device = kGpu});
    FAIL() << "a 1 PiB request should run out of memory";
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(floats * 4)), std::string::npos) << msg;
    EXPECT_NE(msg.find("pass"), std::string::npos) << msg;
    EXPECT_NE(msg.find("persistent"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  }
  Tensor small = full({1000}, 3.0f, {.device = kGpu});  // the process keeps working
  EXPECT_EQ(sum(small).to(Device::cpu()).item<float>(), 3000.0f);
}

TEST(CudaAllocator, TransfersAreCountedAndPeakResets) {
  SKIP_WITHOUT_CUDA();
  Tensor host = randn({1000, 100});
  const MemoryStats s0 = memory_stats(kGpu);
  Tensor dev = host.to(kGpu);
  const MemoryStats s1 = memory_stats(kGpu);
  EXPECT_EQ(s1.host_to_device_bytes - s0.host_to_device_bytes, 400000);
  EXPECT_EQ(s1.device_to_host_bytes, s0.device_to_host_bytes);
  Tensor back = dev.to(Device::cpu());
  EXPECT_EQ(memory_stats(kGpu).device_to_host_bytes - s1.device_to_host_bytes, 400000);
  EXPECT_EQ(back.to_vector<float>(), host.to_vector<float>());
  // Larger than one 4 MiB staging buffer: chunked both ways.
  Tensor large = randn({3, 1000, 1000});
  EXPECT_EQ(large.to(kGpu).to(Device::cpu()).to_vector<float>(), large.to_vector<float>());
  reset_peak_stats(kGpu);
  EXPECT_EQ(memory_stats(kGpu).pass_peak, memory_stats(kGpu).pass_in_use);
  {
    Tensor t = empty({1 << 20}, {.device = kGpu});
    EXPECT_GE(memory_stats(kGpu).pass_peak, memory_stats(kGpu).pass_in_use);
  }
  EXPECT_GE(memory_stats(kGpu).pass_peak - memory_stats(kGpu).pass_in_use, 4 << 20);
}

// ---- residency (ARCHITECTURE §3; issue 5's eleven tests) ----

// 1. A parameter created on the GPU is in the Persistent pool, has no host copy, reads back.
TEST(CudaResidency, GpuParameterIsPersistentWithoutHostCopy) {
  SKIP_WITHOUT_CUDA();
  Tensor init = randn({64, 32});
  Tensor init_gpu = init.to(kGpu);
  const MemoryStats cpu0 = memory_stats(Device::cpu());
  const MemoryStats gpu0 = memory_stats(kGpu);
  Tensor w = parameter(init_gpu);
  EXPECT_EQ(w.device(), kGpu);
  EXPECT_EQ(pool_of(w), Pool::Persistent);
  EXPECT_GE(memory_stats(kGpu).persistent_bytes - gpu0.persistent_bytes, 64 * 32 * 4);
  EXPECT_EQ(memory_stats(Device::cpu()).persistent_bytes, cpu0.persistent_bytes)
      << "no host mirror of a device parameter";
  EXPECT_EQ(memory_stats(kGpu).host_to_device_bytes, gpu0.host_to_device_bytes);
  EXPECT_EQ(host_values(w), init.to_vector<float>());
  EXPECT_EQ(memory_stats(kGpu).device_to_host_bytes - gpu0.device_to_host_bytes, 64 * 32 * 4)
      << "reading copies device->host and counts the bytes";
}

// 2. A CPU parameter is untouched by any of this.
TEST(CudaResidency, CpuParameterUsesNoDeviceMemory) {
  SKIP_WITHOUT_CUDA();
  const MemoryStats gpu0 = memory_stats(kGpu);
  nn::Sequential net = make_mlp(Device::cpu());
  Batch b = make_batch(Device::cpu());
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    cross_entropy(net(b.x), b.y).backward();
    opt.step();
  }
  const MemoryStats gpu1 = memory_stats(kGpu);
  EXPECT_EQ(gpu1.persistent_bytes, gpu0.persistent_bytes);
  EXPECT_EQ(gpu1.pass_in_use, gpu0.pass_in_use);
  EXPECT_EQ(gpu1.alloc_count, gpu0.alloc_count);
  EXPECT_EQ(gpu1.host_to_device_bytes, gpu0.host_to_device_bytes);
  for (const Tensor& p : net->parameters()) EXPECT_EQ(p.device(), Device::cpu());
}

// 3. A resident weight survives the end of a training step unchanged, still resident.
TEST(CudaResidency, WeightSurvivesTheEndOfAStep) {
  SKIP_WITHOUT_CUDA();
  nn::Sequential net = make_mlp(kGpu);
  Batch b = make_batch(kGpu);
  std::vector<float> after_step;
  {
    Tensor loss = cross_entropy(net(b.x), b.y);
    loss.backward();  // the graph is freed here
    NoGradGuard g;
    net->parameters()[0].sub_(net->parameters()[0].grad() * 0.1);
    after_step = host_values(net->parameters()[0]);
  }
  const Tensor w = net->parameters()[0];
  EXPECT_EQ(w.device(), kGpu);
  EXPECT_EQ(pool_of(w), Pool::Persistent);
  EXPECT_EQ(host_values(w), after_step);
}

// 4. An in-place write keeps the device buffer, and the new values read back.
TEST(CudaResidency, InPlaceWriteKeepsTheBuffer) {
  SKIP_WITHOUT_CUDA();
  Tensor w = parameter(zeros({8, 4}, {.device = kGpu}));
  void* ptr = w.data_ptr();
  Tensor fresh = randn({8, 4});
  {
    NoGradGuard g;
    w.assign_(fresh.to(kGpu));
  }
  EXPECT_EQ(w.data_ptr(), ptr);
  EXPECT_EQ(host_values(w), fresh.to_vector<float>());
  {
    NoGradGuard g;
    w.assign_(fresh * 2.0f);  // from the host: copied into the same buffer
  }
  EXPECT_EQ(w.data_ptr(), ptr);
  EXPECT_EQ(host_values(w), (fresh * 2.0f).to_vector<float>());
}

// 5. An in-place write with a different shape is refused, naming both shapes.
TEST(CudaResidency, InPlaceWriteWithOtherShapeIsRefused) {
  SKIP_WITHOUT_CUDA();
  Tensor w = parameter(zeros({8, 4}, {.device = kGpu}));
  try {
    NoGradGuard g;
    w.assign_(zeros({4, 8}, {.device = kGpu}));
    FAIL() << "assign_ with another shape should throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[4, 8]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[8, 4]"), std::string::npos) << msg;
  }
}

// 6. A read after a write never returns the pre-write value.
TEST(CudaResidency, ReadAfterWriteIsNeverStale) {
  SKIP_WITHOUT_CUDA();
  Tensor w = parameter(full({16}, 1.0f, {.device = kGpu}));
  EXPECT_EQ(host_values(w), std::vector<float>(16, 1.0f));
  for (float v : {2.0f, 3.0f, -4.0f}) {
    {
      NoGradGuard g;
      w.fill_(v);
    }
    EXPECT_EQ(host_values(w), std::vector<float>(16, v));
    EXPECT_EQ(w.to(Device::cpu()).sum().item<float>(), 16 * v);
  }
}

// 7. Through five optimizer steps every parameter keeps its buffer and pool; step() moves
// no bytes between host and device.
TEST(CudaResidency, OptimizerStepsKeepBuffersAndMoveNoBytes) {
  SKIP_WITHOUT_CUDA();
  nn::Sequential net = make_mlp(kGpu);
  Batch b = make_batch(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  std::vector<void*> ptrs;
  for (const Tensor& p : net->parameters()) ptrs.push_back(p.data_ptr());
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad();
    cross_entropy(net(b.x), b.y).backward();
    const MemoryStats before = memory_stats(kGpu);
    opt.step();
    const MemoryStats after = memory_stats(kGpu);
    EXPECT_EQ(after.host_to_device_bytes, before.host_to_device_bytes) << "step " << i;
    EXPECT_EQ(after.device_to_host_bytes, before.device_to_host_bytes) << "step " << i;
  }
  const std::vector<Tensor> params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].data_ptr(), ptrs[i]) << "parameter " << i << " moved";
    EXPECT_EQ(pool_of(params[i]), Pool::Persistent);
    EXPECT_EQ(params[i].device(), kGpu);
  }
}

// 8. Host and device Adam agree to 1e-5 over three steps from the same start.
TEST(CudaResidency, HostAndDeviceAdamAgree) {
  SKIP_WITHOUT_CUDA();
  nn::Sequential cpu_net = make_mlp(Device::cpu());
  nn::Sequential gpu_net = make_mlp(kGpu);
  Batch cb = make_batch(Device::cpu());
  Batch gb = make_batch(kGpu);
  optim::Adam cpu_opt(cpu_net->parameters(), {.lr = 1e-2});
  optim::Adam gpu_opt(gpu_net->parameters(), {.lr = 1e-2});
  for (int i = 0; i < 3; ++i) {
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    Tensor cl = cross_entropy(cpu_net(cb.x), cb.y);
    Tensor gl = cross_entropy(gpu_net(gb.x), gb.y);
    EXPECT_NEAR(gl.to(Device::cpu()).item<float>(), cl.item<float>(),
                1e-5 * std::abs(cl.item<float>()));
    cl.backward();
    gl.backward();
    cpu_opt.step();
    gpu_opt.step();
  }
  const std::vector<Tensor> cp = cpu_net->parameters(), gp = gpu_net->parameters();
  for (size_t i = 0; i < cp.size(); ++i) {
    const std::vector<float> want = cp[i].to_vector<float>(), got = host_values(gp[i]);
    for (size_t j = 0; j < want.size(); ++j)
      ASSERT_NEAR(got[j], want[j], 1e-5 * std::max(1.0f, std::abs(want[j])))
          << "parameter " << i << " element " << j;
  }
}

// 9. release_device rescues weights with their device-trained values; they stay usable.
TEST(CudaResidency, ReleaseDeviceRescuesEverything) {
  SKIP_WITHOUT_CUDA();
  nn::Sequential net = make_mlp(kGpu);
  Batch b = make_batch(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    cross_entropy(net(b.x), b.y).backward();
    opt.step();
  }
  std::vector<std::vector<float>> trained;
  for (const Tensor& p : net->parameters()) trained.push_back(host_values(p));
  Tensor activation = relu(b.x);  // a pass tensor, rescued too
  const std::vector<float> activation_values = host_values(activation);

  release_device(kGpu);

  const std::vector<Tensor> params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].device(), Device::cpu());
    EXPECT_EQ(pool_of(params[i]), Pool::Persistent);
    EXPECT_EQ(params[i].to_vector<float>(), trained[i]) << "parameter " << i;
  }
  EXPECT_EQ(activation.device(), Device::cpu());
  EXPECT_EQ(activation.to_vector<float>(), activation_values);
  const MemoryStats s = memory_stats(kGpu);
  EXPECT_EQ(s.persistent_bytes, 0);
  EXPECT_EQ(s.pass_in_use, 0);
  EXPECT_EQ(s.pass_reserved + s.persistent_reserved, 0) << "the device's pools are freed";
  // Training goes on, on the CPU, with the rescued optimizer state.
  opt.zero_grad();
  Tensor loss = cross_entropy(net(b.x), b.y);
  loss.backward();
  opt.step();
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
  EXPECT_EQ(net->parameters()[0].device(), Device::cpu());
}

// 10. Ending a step frees pass memory only: persistent bytes constant, pass reserved flat
// from step 2 to step 200.
TEST(CudaResidency, PassPoolIsFlatAcrossSteps) {
  SKIP_WITHOUT_CUDA();
  nn::Sequential net = make_mlp(kGpu);
  Batch b = make_batch(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  auto step = [&] {
    opt.zero_grad();
    cross_entropy(net(b.x), b.y).backward();
    opt.step();
  };
  step();
  step();
  const MemoryStats s2 = memory_stats(kGpu);
  for (int i = 2; i < 200; ++i) step();
  const MemoryStats s200 = memory_stats(kGpu);
  EXPECT_EQ(s200.persistent_bytes, s2.persistent_bytes);
  EXPECT_EQ(s200.pass_reserved, s2.pass_reserved);
  EXPECT_EQ(s200.pass_in_use, s2.pass_in_use);
}

// 11. Fifty steps on data already on the GPU move no weight bytes.
TEST(CudaResidency, FiftyStepsMoveOnlyTheLossValues) {
  SKIP_WITHOUT_CUDA();
  nn::Sequential net = make_mlp(kGpu);
  Batch b = make_batch(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  opt.zero_grad();
  cross_entropy(net(b.x), b.y).backward();
  opt.step();  // state created
  const MemoryStats s0 = memory_stats(kGpu);
  for (int i = 0; i < 50; ++i) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net(b.x), b.y);
    loss.backward();
    opt.step();
    EXPECT_TRUE(std::isfinite(loss.to(Device::cpu()).item<float>()));
  }
  const MemoryStats s1 = memory_stats(kGpu);
  EXPECT_EQ(s1.host_to_device_bytes, s0.host_to_device_bytes);
  EXPECT_EQ(s1.device_to_host_bytes - s0.device_to_host_bytes, 50 * 4)
      << "only the 50 f32 losses read";
}

}  // namespace
