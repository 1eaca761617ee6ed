// tests/test_optim_bitwise.cpp — the fused Adam, AdamW and SGD steps pinned to the bit: five
// steps of each configuration on the CPU from exactly representable starts and gradients,
// hashed (parameters and state, every bit), against hashes recorded before their element
// formulas moved into src/kernels/optim.hpp. Sizes cover the blocked vector loop (Note
// [Blocked Adam] in src/cpu/optim.cpp), its tails and the threaded split. The CUDA test runs
// the same steps on the GPU and wants the CPU's bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/optim.hpp"
#include "fixtures.hpp"

namespace {

using namespace ember;  // NOLINT: test file

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

const std::vector<int64_t> kSizes = {1000, 37, 256, 40000 + 5};
constexpr int kRunSteps = 5;

// An exactly representable value in [-2.44, 2.44] from an integer hash (no libm, no RNG).
double exact_value(uint64_t seed, int64_t i) {
  uint64_t h =
      (seed + 1) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return static_cast<double>(static_cast<int64_t>(h % 20001) - 10000) / 4096.0;
}

Tensor exact_tensor(uint64_t seed, int64_t n, DType dtype, Device device) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = exact_value(seed, i);
  return from_vector<double>(v, Shape{n}).to(dtype).to(device);
}

// FNV-1a over the bits of every value (through f64, exact for f32).
void hash_into(uint64_t& h, const Tensor& t) {
  for (double x : ember_test::values_f64(t)) {
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    for (int k = 0; k < 8; ++k) {
      h ^= (bits >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
}

// kRunSteps steps of `make`; parameters end up in `params`, the optimizer in `out`.
std::unique_ptr<optim::Optimizer> run(const MakeOptimizer& make, DType dtype, Device device,
                                      std::vector<Tensor>* params) {
  params->clear();
  for (size_t i = 0; i < kSizes.size(); ++i)
    params->push_back(parameter(exact_tensor(100 + i, kSizes[i], dtype, device)));
  auto opt = make(*params);
  for (int step = 0; step < kRunSteps; ++step) {
    for (size_t i = 0; i < kSizes.size(); ++i)
      (*params)[i].set_grad(exact_tensor(1000 * (step + 1) + i, kSizes[i], dtype, device));
    opt->step();
  }
  return opt;
}

// The hash of every parameter and state tensor after kRunSteps CPU steps.
uint64_t cpu_hash(const MakeOptimizer& make, DType dtype) {
  std::vector<Tensor> params;
  auto opt = run(make, dtype, Device::cpu(), &params);
  uint64_t h = 0xCBF29CE484222325ull;
  for (const Tensor& p : params) {
    hash_into(h, p);
    for (const auto& [name, t] : opt->state(p)->tensors) hash_into(h, t);
  }
  return h;
}

struct Config {
  const char* name;
  MakeOptimizer make;
  DType dtype;
  uint64_t hash;  // recorded before the refactor of issue 30
};

template <typename O, typename Options>
MakeOptimizer maker(Options o) {
  return [o](std::vector<Tensor> p) { return std::make_unique<O>(std::move(p), o); };
}

std::vector<Config> configs() {
  using optim::Adam, optim::AdamW, optim::SGD;
  return {
      {"adam", maker<Adam>(optim::AdamOptions{.lr = 1e-2}), DType::f32, 0x6cbd6c3d58915cda},
      {"adam_wd", maker<Adam>(optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.1}), DType::f32,
       0x052c157d0d5161d5},
      {"adam_wd_amsgrad",
       maker<Adam>(optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true}),
       DType::f32, 0x4862c1a3cce954ce},
      {"adam_amsgrad_maximize",
       maker<Adam>(optim::AdamOptions{
           .lr = 3e-3, .betas = {0.8, 0.99}, .eps = 1e-6, .amsgrad = true, .maximize = true}),
       DType::f32, 0x3df46eb178b543b9},
      {"adam_f64",
       maker<Adam>(optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true}),
       DType::f64, 0x4689fa6a5dc06256},
      {"adamw", maker<AdamW>(optim::AdamWOptions{.lr = 1e-2}), DType::f32, 0xd6a49c71bfef9372},
      {"adamw_wd_amsgrad",
       maker<AdamW>(optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.5, .amsgrad = true}),
       DType::f32, 0xf5dc17c6c3f4decc},
      {"adamw_maximize_f64", maker<AdamW>(optim::AdamWOptions{.lr = 1e-2, .maximize = true}),
       DType::f64, 0x75fdc436b9044f3e},
      {"sgd", maker<SGD>(optim::SGDOptions{.lr = 1e-2}), DType::f32, 0x070dfc7fe6566817},
      {"sgd_wd", maker<SGD>(optim::SGDOptions{.lr = 1e-2, .weight_decay = 0.1}), DType::f32,
       0x1ff20a8b677893cf},
      {"sgd_momentum", maker<SGD>(optim::SGDOptions{.lr = 1e-2, .momentum = 0.9}), DType::f32,
       0x452dd35ef8d23d43},
      {"sgd_momentum_dampening_wd",
       maker<SGD>(
           optim::SGDOptions{.lr = 1e-2, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}),
       DType::f32, 0x388fb5064f32486d},
      {"sgd_nesterov_wd",
       maker<SGD>(
           optim::SGDOptions{.lr = 1e-2, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}),
       DType::f32, 0xfdb64be74e01cb2b},
      {"sgd_momentum_maximize",
       maker<SGD>(optim::SGDOptions{.lr = 1e-2, .momentum = 0.5, .maximize = true}), DType::f32,
       0x7a1a9386242a5a21},
      {"sgd_nesterov_f64",
       maker<SGD>(optim::SGDOptions{.lr = 1e-2, .momentum = 0.9, .nesterov = true}), DType::f64,
       0x93253d9db860e02f},
  };
}

TEST(OptimBitwise, CpuStepsKeepTheirRecordedBits) {
  for (const Config& c : configs()) {
    const uint64_t h = cpu_hash(c.make, c.dtype);
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(h));
    EXPECT_EQ(h, c.hash) << c.name << ": parameters or state after " << kRunSteps
                         << " steps changed bits (hash now " << hex << ")";
  }
}

TEST(OptimBitwise, CudaStepsGiveTheCpusBits) {
  SKIP_WITHOUT_CUDA();
  for (const Config& c : configs()) {
    std::vector<Tensor> cpu_params, gpu_params;
    auto cpu = run(c.make, c.dtype, Device::cpu(), &cpu_params);
    auto gpu = run(c.make, c.dtype, Device::cuda(0), &gpu_params);
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      EXPECT_EQ(ember_test::values_f64(gpu_params[i]), ember_test::values_f64(cpu_params[i]))
          << c.name << ": parameter " << i << " (" << kSizes[i] << " elements)";
      for (const auto& [name, t] : cpu->state(cpu_params[i])->tensors) {
        const Tensor* g = gpu->state(gpu_params[i])->find(name);
        ASSERT_NE(g, nullptr) << c.name << ": " << name;
        EXPECT_EQ(ember_test::values_f64(*g), ember_test::values_f64(t))
            << c.name << ": state " << name << " of parameter " << i;
      }
    }
  }
}

}  // namespace
