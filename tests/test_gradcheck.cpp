// tests/test_gradcheck.cpp — the gradcheck harness itself (it must be able to fail) and the
// f64 central-difference checks the op driver cannot express as one op's case: chains of
// broadcasts, the scalar operator forms, a small network across many ops. Every op's own
// gradcheck tier runs in tests/test_catalogue.cpp, from its fixture cases.
//
// Inputs stay away from points where an op is not differentiable (relu/abs at 0, clamp at
// its bounds): see away_from_zero() and positive_leaf().
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ember/ember.hpp"

namespace {

using namespace ember;  // NOLINT: test file, the op names are the subject
using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

// ---- inputs (fresh leaves that require grad)

Tensor leaf(Tensor t) {
  t = t.detach().contiguous();
  t.requires_grad_();
  return t;
}
Tensor normal(const Shape& s, double std = 1.0) { return leaf(randn(s, {}, 0.0, std)); }
/// |randn| + 0.5: for log, sqrt, rsqrt, fractional powers, probabilities.
Tensor positive_leaf(const Shape& s) { return leaf(abs(randn(s)) + 0.5); }
/// randn pushed at least `gap` away from zero (relu, abs, sign, denominators).
Tensor away_from_zero(const Shape& s, double gap = 0.2) {
  Tensor x = randn(s);
  return leaf(x + sign(x) * gap);
}
Tensor indices(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s); }

std::string shapes_of(const Inputs& in) {
  std::string out;
  for (const Tensor& t : in) out += (out.empty() ? "" : " x ") + t.shape().to_string();
  return out;
}

/// Runs gradcheck and records a failure naming the case; an exception is a failure too (so
/// one broken op does not hide the rest of a test).
void check(const std::string& what, const Fn& fn, const Inputs& in, GradcheckOptions o = {}) {
  SCOPED_TRACE(what + " on " + shapes_of(in));
  try {
    GradcheckResult r = gradcheck(fn, in, o);
    EXPECT_TRUE(r.ok) << what << " (" << shapes_of(in) << "): " << r.message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " (" << shapes_of(in) << ") threw: " << e.what();
  }
}

// ---- the harness itself must be able to fail

TEST(Gradcheck, DetectsAWrongGradient) {
  manual_seed(1);
  // d/dx (stopgrad(x) * x) = x analytically, but 2x numerically.
  GradcheckResult r =
      gradcheck([](const Inputs& x) { return x[0].detach() * x[0]; }, {positive_leaf({3})});
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.message.empty());
}

TEST(Gradcheck, PassesAKnownGoodFunction) {
  manual_seed(1);
  GradcheckResult r = gradcheck([](const Inputs& x) { return x[0] * x[0]; }, {normal({4})});
  EXPECT_TRUE(r.ok) << r.message;
}

// ---- what the op driver cannot express: chains and operator forms

TEST(Gradcheck, ChainedBroadcasts) {
  manual_seed(16);
  check("(a + b) * c / d", [](const Inputs& x) { return (x[0] + x[1]) * x[2] / x[3]; },
        {normal({2, 1, 4}), normal({3, 1}), normal({4}), away_from_zero({2, 3, 1}, 0.5)});
}

// ---- with a scalar

TEST(Gradcheck, ScalarOps) {
  manual_seed(20);
  const Shape s{3, 4};
  check("add(x, s)", [](const Inputs& x) { return add(x[0], 1.5); }, {normal(s)});
  check("mul(x, s)", [](const Inputs& x) { return mul(x[0], -2.0); }, {normal(s)});
  check("scale", [](const Inputs& x) { return scale(x[0], 0.75); }, {normal(s)});
  check("x - s", [](const Inputs& x) { return x[0] - 0.5; }, {normal(s)});
  check("s - x", [](const Inputs& x) { return 2.0 - x[0]; }, {normal(s)});
  check("x / s", [](const Inputs& x) { return x[0] / 4.0; }, {normal(s)});
  check("s / x", [](const Inputs& x) { return 3.0 / x[0]; }, {away_from_zero(s, 0.5)});
  check("s * x", [](const Inputs& x) { return 0.5 * x[0]; }, {normal(s)});
  check("s + x", [](const Inputs& x) { return 0.5 + x[0]; }, {normal(s)});
  check("-x", [](const Inputs& x) { return -x[0]; }, {normal(s)});
  check("pow(x, 3)", [](const Inputs& x) { return pow(x[0], 3.0); }, {normal(s)});
  check("pow(x, 2)", [](const Inputs& x) { return pow(x[0], 2.0); }, {normal(s)});
  check("pow(x, 0.5)", [](const Inputs& x) { return pow(x[0], 0.5); }, {positive_leaf(s)});
  check("pow(x, -1.5)", [](const Inputs& x) { return pow(x[0], -1.5); }, {positive_leaf(s)});
  check("x.pow(1.7)", [](const Inputs& x) { return x[0].pow(1.7); }, {positive_leaf(s)});
}

// ---- a small network: the chain rule across many ops

TEST(Gradcheck, TwoLayerNetwork) {
  manual_seed(120);
  Tensor labels = indices({2, 0, 1, 2}, {4});
  check("mlp",
        [labels](const Inputs& x) {
          Tensor h = gelu(linear(x[0], x[1], x[2]));
          h = layer_norm(h, {5}, x[3], x[4]);
          return cross_entropy(linear(h, x[5]), labels);
        },
        {normal({4, 3}), normal({5, 3}), normal({5}), normal({5}), normal({5}), normal({3, 5})});
}

}  // namespace
