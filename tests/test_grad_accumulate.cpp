// tests/test_grad_accumulate.cpp — a node that sets Node::accumulates is handed its input's
// pending gradient to add into, only when nothing else can see that buffer (Note [Gradients
// accumulate where they land] in src/autograd/engine.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "autograd/node.hpp"
#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember_test::floats;

// f(a) = 3a whose backward opts in to accumulation and reports whether it was handed a
// pending gradient.
Tensor times_three(const Tensor& a, bool* handed) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = a * 3.0;
  }
  autograd::Node& node =
      autograd::record(Op::mul, out, {&a}, [handed](const Tensor& g, autograd::GradList& gi) {
        *handed = gi[0].defined();
        autograd::accumulate(gi[0], g * 3.0);
      });
  node.accumulates = 1u;
  return out;
}

// z = a + 2·f(a): by the time f's backward runs, a's pending gradient (the add's) is held by
// nothing else, so f adds into it; the result is the plain sum 7r.
TEST(GradAccumulate, APendingGradientNobodyElseHoldsIsHandedOver) {
  manual_seed(1);
  Tensor x = randn({5, 7}).requires_grad_(true);
  const Tensor r = randn({5, 7});
  bool handed = false;
  Tensor a = x * 1.0;
  ((a + times_three(a, &handed) * 2.0) * r).sum().backward();
  EXPECT_TRUE(handed);
  EXPECT_EQ(floats(x.grad()), floats(r + (r * 2.0) * 3.0));
}

// z = a + f(a): the add hands one tensor to both a and f, so a's pending gradient is f's own
// incoming gradient: adding into it would change f's input. Not handed; the sum is the same.
TEST(GradAccumulate, APendingGradientThatIsAlsoTheIncomingOneIsNotHandedOver) {
  manual_seed(2);
  Tensor x = randn({4, 3}).requires_grad_(true);
  const Tensor r = randn({4, 3});
  bool handed = true;
  Tensor a = x * 1.0;
  ((a + times_three(a, &handed)) * r).sum().backward();
  EXPECT_FALSE(handed);
  EXPECT_EQ(floats(x.grad()), floats(r * 4.0));
}

// The first gradient to arrive has nothing pending: the node writes its own.
TEST(GradAccumulate, NothingPendingMeansNothingHanded) {
  Tensor x = ones({3}).requires_grad_(true);
  bool handed = true;
  (times_three(x * 1.0, &handed) * 2.0).sum().backward();
  EXPECT_FALSE(handed);
  EXPECT_EQ(floats(x.grad()), std::vector<float>(3, 6.0f));
}

// autograd::grad of a tensor whose pending gradient was accumulated into: the full sum.
TEST(GradAccumulate, ACapturedGradientIsTheWholeSum) {
  manual_seed(3);
  Tensor x = randn({6}).requires_grad_(true);
  const Tensor r = randn({6});
  bool handed = false;
  Tensor a = x * 1.0;
  Tensor loss = ((a + times_three(a, &handed) * 2.0) * r).sum();
  const std::vector<Tensor> g = grad({loss}, {a});
  EXPECT_TRUE(handed);
  EXPECT_EQ(floats(g[0]), floats(r + (r * 2.0) * 3.0));
}

}  // namespace
