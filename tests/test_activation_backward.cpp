// tests/test_activation_backward.cpp — gelu's and silu's backward in one kernel (Note
// [Activation backward in one] in src/ops/elementwise.cpp): against the derivative in f64
// (f32 within a few of its roundings, bf16 within one rounding, of |value| + |g|), CPU and CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::doubles;

struct ActivationCase {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
};

// d f / dx for each case, in f64 from the same ops' autograd on f64 inputs (their backward
// runs in f64: the reference).
void check(Device device, DType dtype, double tol_ulps) {
  const std::vector<ActivationCase> cases = {
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }},
      {"gelu_erf", [](const Tensor& x) { return gelu(x); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
  };
  manual_seed(11);
  const Tensor x64 = randn({4096}, {.dtype = DType::f64}) * 3.0;
  const Tensor g64 = randn({4096}, {.dtype = DType::f64});
  for (const ActivationCase& c : cases) {
    Tensor xr = x64.to(dtype).to(DType::f64).requires_grad_(true);  // the same inputs, exactly
    (c.f(xr) * g64.to(dtype).to(DType::f64)).sum().backward();
    const std::vector<double> want = doubles(xr.grad());
    Tensor x = x64.to(dtype).to(device).requires_grad_(true);
    (c.f(x) * g64.to(dtype).to(device)).sum().backward();
    ASSERT_EQ(x.grad().dtype(), dtype) << c.name;
    const std::vector<double> got = doubles(x.grad());
    const std::vector<double> gs = doubles(g64.to(dtype));
    const double eps = dtype == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -24);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      // Relative to |g| as well: f'(x) crosses zero (gelu near x = -0.75), where its rounding
      // in the working precision is absolute, not relative.
      if (std::abs(got[i] - want[i]) > tol_ulps * eps * (std::abs(want[i]) + std::abs(gs[i])) &&
          ++bad < 4)
        ADD_FAILURE() << c.name << " " << dtype_name(dtype) << " at " << i << ": got " << got[i]
                      << ", want " << want[i];
  }
}

TEST(ActivationBackward, F32WithinItsRoundingCpu) { check(Device::cpu(), DType::f32, 64); }
TEST(ActivationBackward, Bf16WithinOneRoundingCpu) { check(Device::cpu(), DType::bf16, 2); }
TEST(ActivationBackward, F32WithinItsRoundingCuda) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check(Device::cuda(0), DType::f32, 64);
}
TEST(ActivationBackward, Bf16WithinOneRoundingCuda) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check(Device::cuda(0), DType::bf16, 2);
}

}  // namespace
