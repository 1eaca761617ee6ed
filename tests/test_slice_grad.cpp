// tests/test_slice_grad.cpp — slice gradients written in place into the input's gradient
// (Note [Slice gradients land in place] in src/autograd/engine.cpp): the values of the plain
// zeros-and-sum rule, and a gradient some other handle can see is never written.
#include <gtest/gtest.h>

#include <vector>

#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::floats;

// split into three, each weighted, plus the whole input weighted: the gradient is the three
// weights side by side plus the whole weight.
void check_split(Device device) {
  manual_seed(3);
  Tensor x = randn({4, 9}, {.device = device}).requires_grad_(true);
  Tensor base = x * 1.0;  // a non-leaf: its pending gradient is the engine's own buffer
  const std::vector<Tensor> parts = split(base, 3, 1);
  Tensor w0 = randn({4, 3}, {.device = device}), w1 = randn({4, 3}, {.device = device}),
         w2 = randn({4, 3}, {.device = device}), w = randn({4, 9}, {.device = device});
  Tensor loss = sum(parts[0] * w0) + sum(parts[2] * w2) + sum(base * w) + sum(parts[1] * w1);
  loss.backward();
  const std::vector<float> got = floats(x.grad());
  const std::vector<float> a = floats(w0), b = floats(w1), c = floats(w2), all = floats(w);
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 9; ++j) {
      const std::vector<float>& piece = j < 3 ? a : (j < 6 ? b : c);
      EXPECT_EQ(got[r * 9 + j], all[r * 9 + j] + piece[r * 3 + j % 3]) << r << "," << j;
    }
}

TEST(SliceGrad, SplitPiecesLandInPlace) { check_split(Device::cpu()); }

TEST(SliceGrad, SplitPiecesLandInPlaceCuda) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_split(Device::cuda(0));
}

TEST(SliceGrad, StridedAndSteppedSlicesMatchGradcheck) {
  const auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return sum(x.slice(1, 0, 5, 2) * 2.0) + sum(square(x.slice(0, 1, 3))) +
           sum(x.transpose(0, 1).slice(0, 2, 4) * 3.0);
  };
  EXPECT_TRUE(gradcheck(fn, std::vector<Tensor>{randn({4, 5}, {.dtype = DType::f64})}));
}

// The gradient handed to autograd::grad for a root is the caller's tensor: a slice's gradient
// arriving at that root must not be added into it.
TEST(SliceGrad, NeverWritesAGradientAnotherHandleHolds) {
  Tensor x = randn({3, 4}).requires_grad_(true);
  Tensor y = x * 2.0;
  Tensor s = y.slice(1, 1, 3);
  Tensor gy = ones({3, 4}), gs = full({3, 2}, 5.0);
  const std::vector<float> before = floats(gy);
  const std::vector<Tensor> g = ember::grad({y, s}, {x}, {gy, gs});
  EXPECT_EQ(floats(gy), before);  // the caller's gradient is untouched
  const std::vector<float> got = floats(g[0]);
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(got[r * 4 + j], (j == 1 || j == 2) ? 12.0f : 2.0f) << r << "," << j;
}

// add hands one gradient tensor to both its inputs: when the slice's gradient arrives at t,
// t's pending gradient may be that tensor while u's node (waiting for u's other use) has yet
// to read it. Written in place, the slice's gradient would reach y's gradient too.
TEST(SliceGrad, NeverWritesAGradientAnotherNodeStillReads) {
  const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto& p : perms) {
    Tensor x = ones({4}).requires_grad_(true), y = ones({4}).requires_grad_(true);
    Tensor t = x * 1.0, u = y * 1.0;
    const Tensor r = arange(1, 5).to(DType::f32);
    const Tensor terms[3] = {sum((t + u) * r), sum(t.slice(0, 0, 2) * 10.0), sum(u * 7.0)};
    (terms[p[0]] + terms[p[1]] + terms[p[2]]).backward();
    EXPECT_EQ(floats(y.grad()), floats(r + 7.0)) << p[0] << p[1] << p[2];
    EXPECT_EQ(floats(x.grad()), floats(r + tensor({10.0f, 10.0f, 0.0f, 0.0f})))
        << p[0] << p[1] << p[2];
  }
}

// A base used by two slices and by itself through another op in either order: the same sums.
TEST(SliceGrad, OrderOfArrivalDoesNotMatter) {
  for (int order = 0; order < 2; ++order) {
    Tensor x = arange(0, 12).reshape({3, 4}).to(DType::f32).requires_grad_(true);
    Tensor base = x + 0.0;
    Tensor a = base.slice(1, 0, 2), b = base.slice(1, 2, 4);
    Tensor loss = order ? sum(a * 3.0) + sum(base) + sum(b * 5.0) : sum(b * 5.0) + sum(a * 3.0);
    loss.backward();
    const std::vector<float> got = floats(x.grad());
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < 4; ++j)
        EXPECT_EQ(got[r * 4 + j], (j < 2 ? 3.0f : 5.0f) + (order ? 1.0f : 0.0f)) << order;
  }
}

}  // namespace
