// tests/test_memory_limit.cpp — set_memory_limit (issue 31 item 2; docs/memory.md): a request
// that would take a device's pools past the limit returns the cache first, then throws
// ember::OutOfMemory naming the request, the limit and the pools, with nothing changed, and
// the program goes on: a model too big for the limit fails its step, a smaller one trains under
// the same limit. The same on the CPU and (skipped without one) a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/optim/adam.hpp"
#include "error_of.hpp"
#include "memory_stats.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::kMiB;
using ember_test::reserved;
using test_util::error_of;

// Undoes the limit even when an expectation fails.
struct LimitGuard {
  Device device;
  ~LimitGuard() { set_memory_limit(device, 0); }
};

// Ten Adam steps of an MLP of `width` on a batch of 256: the last loss.
float train_mlp(Device d, int64_t width) {
  manual_seed(1);
  nn::Sequential net(
      std::vector<nn::Module>{nn::Linear(512, width), nn::ReLU(), nn::Linear(width, 10)});
  net->to(d);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  const Tensor x = randn({256, 512}, {.device = d});
  const Tensor y = randint(0, 10, {256}, {.dtype = DType::i64, .device = d});
  float loss = 0;
  for (int i = 0; i < 10; ++i) {
    opt.zero_grad();
    Tensor l = cross_entropy(net(x), y);
    l.backward();
    opt.step();
    loss = l.item<float>();
  }
  return loss;
}

void check_limit(Device d) {
  synchronize(d);
  empty_cache(d);
  LimitGuard guard{d};
  EXPECT_EQ(memory_limit(d), 0);
  const int64_t base = reserved(memory_stats(d));
  set_memory_limit(d, base + 64 * kMiB);
  EXPECT_EQ(memory_limit(d), base + 64 * kMiB);

  // 32 MiB fits; 48 MiB more does not, and the refusal changes nothing.
  Tensor a = empty({8 * kMiB}, {.device = d});
  const MemoryStats before = memory_stats(d);
  const std::string msg = error_of([&] { (void)empty({12 * kMiB}, {.device = d}); });
  EXPECT_NE(msg.find("past the memory limit of " + std::to_string(base + 64 * kMiB) + " bytes"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("allocating " + std::to_string(48 * kMiB) + " bytes"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("set_memory_limit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pass: "), std::string::npos) << msg;
  bool oom = false;
  try {
    (void)empty({12 * kMiB}, {.device = d});
  } catch (const OutOfMemory&) {
    oom = true;  // the type users catch to shrink the batch
  }
  EXPECT_TRUE(oom);
  EXPECT_EQ(memory_stats(d).pass_in_use, before.pass_in_use);

  // Freeing makes room again: the cache is returned before a refusal.
  a = Tensor();
  Tensor b = empty({12 * kMiB}, {.device = d});
  EXPECT_LE(reserved(memory_stats(d)), base + 64 * kMiB);
  b = Tensor();

  // A model too wide for the limit fails its first step with OutOfMemory; a narrow one then
  // trains under the same limit, as it does without one.
  set_memory_limit(d, base + 24 * kMiB);
  EXPECT_THROW(train_mlp(d, 8192), OutOfMemory);
  const float limited = train_mlp(d, 64);
  set_memory_limit(d, 0);
  EXPECT_EQ(memory_limit(d), 0);
  EXPECT_EQ(limited, train_mlp(d, 64));
  (void)empty({12 * kMiB}, {.device = d});  // no limit: fine
}

TEST(MemoryLimit, CpuRefusesPastTheLimitAndCarriesOn) { check_limit(Device::cpu()); }

TEST(MemoryLimit, CudaRefusesPastTheLimitAndCarriesOn) {
  SKIP_WITHOUT_CUDA();
  check_limit(Device::cuda(0));
}

TEST(MemoryLimit, BadLimitsAreRefused) {
  const std::string msg = error_of([] { set_memory_limit(Device::cpu(), -1); });
  EXPECT_NE(msg.find("set_memory_limit: -1 bytes for cpu (expected a positive byte count, or 0 "
                     "for no limit)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(memory_limit(Device::cpu()), 0);
}

}  // namespace
