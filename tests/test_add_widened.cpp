// tests/test_add_widened.cpp — f32 + bf16/f16 of one shape reads the 16-bit operand as it is
// (Note [Adding a 16-bit tensor to an f32 one] in src/ops/elementwise.cpp): bitwise the add of
// its f32 cast, in either order, with the same gradients; other cases take promote's path.
#include <gtest/gtest.h>

#include <vector>

#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::floats;

void check(Device device, DType low, const Shape& shape, bool wide_first) {
  manual_seed(17);
  const Tensor x0 = randn(shape).to(device), y0 = (randn(shape) * 3.0).to(low).to(device);
  const Tensor r = randn(shape).to(device);
  Tensor x = x0.clone().requires_grad_(true), y = y0.clone().requires_grad_(true);
  Tensor z = wide_first ? x + y : y + x;
  ASSERT_EQ(z.dtype(), DType::f32);
  (z * r).sum().backward();
  Tensor x2 = x0.clone().requires_grad_(true), y2 = y0.clone().requires_grad_(true);
  Tensor z2 = wide_first ? x2 + y2.to(DType::f32) : y2.to(DType::f32) + x2;
  (z2 * r).sum().backward();
  EXPECT_EQ(floats(z), floats(z2));
  ASSERT_EQ(y.grad().dtype(), low);
  EXPECT_EQ(floats(x.grad()), floats(x2.grad()));
  EXPECT_EQ(floats(y.grad()), floats(y2.grad()));
}

void check_all(Device device) {
  for (DType low : {DType::bf16, DType::f16})
    for (bool wide_first : {true, false})
      for (const Shape& s : {Shape{1}, Shape{5}, Shape{4099}, Shape{16, 64, 24}})
        check(device, low, s, wide_first);
}

TEST(AddWidened, CpuIsTheCastThenAdd) { check_all(Device::cpu()); }

TEST(AddWidened, CudaIsTheCastThenAdd) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_all(Device::cuda(0));
}

// Broadcast and strided operands keep promote's path: the same values.
TEST(AddWidened, BroadcastAndStridedOperandsAsBefore) {
  manual_seed(4);
  const Tensor x = randn({4, 6}), y = randn({6}).to(DType::bf16);
  EXPECT_EQ(floats(x + y), floats(x + y.to(DType::f32)));
  const Tensor yt = randn({6, 4}).to(DType::bf16).t();
  EXPECT_EQ(floats(x + yt), floats(x + yt.to(DType::f32)));
  // f64 + bf16 promotes to f64 as before.
  EXPECT_EQ((x.to(DType::f64) + y).dtype(), DType::f64);
}

}  // namespace
