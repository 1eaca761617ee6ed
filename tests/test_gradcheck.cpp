// tests/test_gradcheck.cpp — tier 2 of STYLE §8: every differentiable op against f64
// central differences (ember::gradcheck), including broadcasting for every binary op,
// dims/keepdim variants of the reductions, the normalisations with weight and bias, and the
// losses (targets are data: captured, or passed without requires_grad).
//
// Inputs stay away from points where an op is not differentiable (relu/abs at 0, clamp at
// its bounds, max/min near ties): see away_from_zero(), positive() and distinct().
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
Tensor positive(const Shape& s) { return leaf(abs(randn(s)) + 0.5); }
/// randn pushed at least `gap` away from zero (relu, abs, sign, denominators).
Tensor away_from_zero(const Shape& s, double gap = 0.2) {
  Tensor x = randn(s);
  return leaf(x + sign(x) * gap);
}
/// Well separated values in a fixed shuffled order: no ties for max/min.
Tensor distinct(const Shape& s) {
  const int64_t n = s.numel();
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(1234 + static_cast<unsigned>(n));
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(perm[i]) * 0.3f - static_cast<float>(n) * 0.15f;
  return leaf(from_vector<float>(v, s));
}
/// A data tensor in f64 (what gradcheck computes in), never differentiated.
Tensor data_f64(const Shape& s) { return randn(s, {.dtype = DType::f64}); }
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

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{3, 4}, {3, 4}}, {{3, 1}, {1, 4}},    {{2, 3, 4}, {4}},
    {{4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}}, {{2, 3}, Shape()}};

// ---- the harness itself must be able to fail

TEST(Gradcheck, DetectsAWrongGradient) {
  manual_seed(1);
  // d/dx (stopgrad(x) * x) = x analytically, but 2x numerically.
  GradcheckResult r =
      gradcheck([](const Inputs& x) { return x[0].detach() * x[0]; }, {positive({3})});
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.message.empty());
}

TEST(Gradcheck, PassesAKnownGoodFunction) {
  manual_seed(1);
  GradcheckResult r = gradcheck([](const Inputs& x) { return x[0] * x[0]; }, {normal({4})});
  EXPECT_TRUE(r.ok) << r.message;
}

// ---- binary elementwise, every broadcast pattern

TEST(Gradcheck, Add) {
  manual_seed(10);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    check("add", [](const Inputs& x) { return add(x[0], x[1]); }, {normal(sa), normal(sb)});
    check("operator+", [](const Inputs& x) { return x[0] + x[1]; }, {normal(sa), normal(sb)});
  }
}

TEST(Gradcheck, Sub) {
  manual_seed(11);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    check("sub", [](const Inputs& x) { return sub(x[0], x[1]); }, {normal(sa), normal(sb)});
    check("operator-", [](const Inputs& x) { return x[0] - x[1]; }, {normal(sa), normal(sb)});
  }
}

TEST(Gradcheck, Mul) {
  manual_seed(12);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    check("mul", [](const Inputs& x) { return mul(x[0], x[1]); }, {normal(sa), normal(sb)});
  }
  check("mul same input twice", [](const Inputs& x) { return x[0] * x[0]; }, {normal({3, 2})});
}

TEST(Gradcheck, Div) {
  manual_seed(13);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    check("div", [](const Inputs& x) { return div(x[0], x[1]); },
          {normal(sa), away_from_zero(sb, 0.5)});
  }
}

TEST(Gradcheck, PowTensor) {
  manual_seed(14);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    check("pow(tensor, tensor)", [](const Inputs& x) { return pow(x[0], x[1]); },
          {positive(sa), normal(sb)});
  }
}

TEST(Gradcheck, MaximumMinimum) {
  manual_seed(15);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    check("maximum", [](const Inputs& x) { return maximum(x[0], x[1]); }, {normal(sa), normal(sb)});
    check("minimum", [](const Inputs& x) { return minimum(x[0], x[1]); }, {normal(sa), normal(sb)});
  }
}

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
  check("pow(x, 0.5)", [](const Inputs& x) { return pow(x[0], 0.5); }, {positive(s)});
  check("pow(x, -1.5)", [](const Inputs& x) { return pow(x[0], -1.5); }, {positive(s)});
  check("x.pow(1.7)", [](const Inputs& x) { return x[0].pow(1.7); }, {positive(s)});
}

TEST(Gradcheck, Clamp) {
  // Values at least 0.05 from the bounds, on both sides of each.
  Tensor x =
      leaf(tensor({-1.3f, -0.7f, -0.2f, 0.1f, 0.4f, 0.9f, 1.6f, -0.45f, 0.55f, 0.0f}, {2, 5}));
  check("clamp", [](const Inputs& v) { return clamp(v[0], -0.5, 0.5); }, {x});
  check("clamp (lo only effectively)", [](const Inputs& v) { return clamp(v[0], -1.0, 10.0); },
        {x});
}

// ---- unary

TEST(Gradcheck, Unary) {
  manual_seed(30);
  const Shape s{3, 5};
  struct Case {
    const char* name;
    Fn fn;
    std::function<Tensor()> make;
  };
  const std::vector<Case> cases = {
      {"neg", [](const Inputs& x) { return neg(x[0]); }, [&] { return normal(s); }},
      {"abs", [](const Inputs& x) { return abs(x[0]); }, [&] { return away_from_zero(s); }},
      {"sqrt", [](const Inputs& x) { return sqrt(x[0]); }, [&] { return positive(s); }},
      {"rsqrt", [](const Inputs& x) { return rsqrt(x[0]); }, [&] { return positive(s); }},
      {"square", [](const Inputs& x) { return square(x[0]); }, [&] { return normal(s); }},
      {"exp", [](const Inputs& x) { return exp(x[0]); }, [&] { return normal(s); }},
      {"log", [](const Inputs& x) { return log(x[0]); }, [&] { return positive(s); }},
      {"relu", [](const Inputs& x) { return relu(x[0]); }, [&] { return away_from_zero(s); }},
      {"sigmoid", [](const Inputs& x) { return sigmoid(x[0]); }, [&] { return normal(s, 2.0); }},
      {"tanh", [](const Inputs& x) { return tanh(x[0]); }, [&] { return normal(s, 1.5); }},
      {"gelu", [](const Inputs& x) { return gelu(x[0]); }, [&] { return normal(s, 2.0); }},
      {"gelu tanh", [](const Inputs& x) { return gelu(x[0], "tanh"); },
       [&] { return normal(s, 2.0); }},
      {"silu", [](const Inputs& x) { return silu(x[0]); }, [&] { return normal(s, 2.0); }},
      // method forms
      {"x.exp()", [](const Inputs& x) { return x[0].exp(); }, [&] { return normal(s); }},
      {"x.log()", [](const Inputs& x) { return x[0].log(); }, [&] { return positive(s); }},
      {"x.relu()", [](const Inputs& x) { return x[0].relu(); }, [&] { return away_from_zero(s); }},
      {"x.sigmoid()", [](const Inputs& x) { return x[0].sigmoid(); }, [&] { return normal(s); }},
      {"x.tanh()", [](const Inputs& x) { return x[0].tanh(); }, [&] { return normal(s); }},
      {"x.sqrt()", [](const Inputs& x) { return x[0].sqrt(); }, [&] { return positive(s); }},
      {"x.abs()", [](const Inputs& x) { return x[0].abs(); }, [&] { return away_from_zero(s); }},
  };
  for (const Case& c : cases) check(c.name, c.fn, {c.make()});
}

// ---- selection

TEST(Gradcheck, Where) {
  manual_seed(40);
  Tensor cond = gt(randn({3, 4}), 0.0);
  check("where", [cond](const Inputs& x) { return where(cond, x[0], x[1]); },
        {normal({3, 4}), normal({3, 4})});
  check("where, b broadcast", [cond](const Inputs& x) { return where(cond, x[0], x[1]); },
        {normal({3, 4}), normal({4})});
  Tensor row = gt(randn({1, 4}), 0.0);
  check("where, all broadcast", [row](const Inputs& x) { return where(row, x[0], x[1]); },
        {normal({3, 1}), normal({3, 4})});
}

TEST(Gradcheck, MaskedFill) {
  manual_seed(41);
  Tensor mask = gt(randn({3, 4}), 0.0);
  check("masked_fill", [mask](const Inputs& x) { return masked_fill(x[0], mask, -2.0); },
        {normal({3, 4})});
  Tensor col = gt(randn({3, 1}), 0.0);
  check("masked_fill, mask broadcast",
        [col](const Inputs& x) { return masked_fill(x[0], col, 1.0); }, {normal({2, 3, 4})});
}

// ---- reductions

TEST(Gradcheck, SumMean) {
  manual_seed(50);
  const Shape s{2, 3, 4};
  check("sum", [](const Inputs& x) { return sum(x[0]); }, {normal(s)});
  check("x.sum()", [](const Inputs& x) { return x[0].sum(); }, {normal(s)});
  check("mean", [](const Inputs& x) { return mean(x[0]); }, {normal(s)});
  for (bool keepdim : {false, true}) {
    const std::string k = keepdim ? " keepdim" : "";
    check("sum dim 1" + k, [keepdim](const Inputs& x) { return sum(x[0], {1}, keepdim); },
          {normal(s)});
    check("sum dims 0,2" + k,
          [keepdim](const Inputs& x) {
            return sum(x[0], {0, 2}, keepdim);
          },
          {normal(s)});
    check("sum dim -1" + k, [keepdim](const Inputs& x) { return sum(x[0], {-1}, keepdim); },
          {normal(s)});
    check("mean dim 1" + k, [keepdim](const Inputs& x) { return mean(x[0], {1}, keepdim); },
          {normal(s)});
    check("mean dims 0,2" + k,
          [keepdim](const Inputs& x) {
            return mean(x[0], {0, 2}, keepdim);
          },
          {normal(s)});
    check("x.mean(dims)" + k, [keepdim](const Inputs& x) { return x[0].mean({-2}, keepdim); },
          {normal(s)});
  }
}

TEST(Gradcheck, MaxMin) {
  const Shape s{3, 5};
  check("max", [](const Inputs& x) { return max(x[0]); }, {distinct(s)});
  check("min", [](const Inputs& x) { return min(x[0]); }, {distinct(s)});
  check("x.max()", [](const Inputs& x) { return x[0].max(); }, {distinct(s)});
  for (bool keepdim : {false, true}) {
    const std::string k = keepdim ? " keepdim" : "";
    check("max dim 1" + k, [keepdim](const Inputs& x) { return max(x[0], {1}, keepdim); },
          {distinct(s)});
    check("max dim 0" + k, [keepdim](const Inputs& x) { return max(x[0], {0}, keepdim); },
          {distinct(s)});
    check("min dim 1" + k, [keepdim](const Inputs& x) { return min(x[0], {1}, keepdim); },
          {distinct(s)});
    check("min dims 0,2" + k,
          [keepdim](const Inputs& x) {
            return min(x[0], {0, 2}, keepdim);
          },
          {distinct({2, 3, 4})});
  }
}

TEST(Gradcheck, Var) {
  manual_seed(52);
  const Shape s{2, 3, 4};
  for (int64_t correction : {0, 1}) {
    const std::string c = " correction " + std::to_string(correction);
    check("var all" + c, [correction](const Inputs& x) { return var(x[0], correction); },
          {normal(s)});
    for (bool keepdim : {false, true}) {
      const std::string k = c + (keepdim ? " keepdim" : "");
      check("var dim 1" + k, [=](const Inputs& x) { return var(x[0], {1}, correction, keepdim); },
            {normal(s)});
      check("var dims 0,2" + k,
            [=](const Inputs& x) {
              return var(x[0], {0, 2}, correction, keepdim);
            },
            {normal(s)});
    }
  }
}

// ---- softmax family

TEST(Gradcheck, Softmax) {
  manual_seed(60);
  for (int64_t dim : {0, 1, -1}) {
    const std::string d = " dim " + std::to_string(dim);
    check("softmax" + d, [dim](const Inputs& x) { return softmax(x[0], dim); },
          {normal({3, 4}, 2.0)});
    check("log_softmax" + d, [dim](const Inputs& x) { return log_softmax(x[0], dim); },
          {normal({3, 4}, 2.0)});
    check("softmax 3d" + d, [dim](const Inputs& x) { return x[0].softmax(dim); },
          {normal({2, 3, 4})});
    check("log_softmax 3d" + d, [dim](const Inputs& x) { return x[0].log_softmax(dim); },
          {normal({2, 3, 4})});
  }
}

// ---- linear algebra

TEST(Gradcheck, Matmul) {
  manual_seed(70);
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {4, 5}},       {{4}, {4, 3}},
      {{3, 4}, {4}},          {{5}, {5}},
      {{2, 3, 4}, {4, 5}},    {{3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {2, 4, 2}}, {{2, 1, 3, 4}, {3, 4, 2}},
      {{1, 3, 4}, {2, 4, 2}}, {{2, 3, 4}, {4}},
      {{4}, {2, 4, 3}}};
  for (const auto& [sa, sb] : shapes) {
    check("matmul", [](const Inputs& x) { return matmul(x[0], x[1]); }, {normal(sa), normal(sb)});
  }
  check("x.matmul(transposed view)", [](const Inputs& x) { return x[0].matmul(x[1].t()); },
        {normal({3, 4}), normal({5, 4})});
}

TEST(Gradcheck, Linear) {
  manual_seed(71);
  check("linear with bias", [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
        {normal({3, 4}), normal({5, 4}), normal({5})});
  check("linear without bias", [](const Inputs& x) { return linear(x[0], x[1]); },
        {normal({3, 4}), normal({2, 4})});
  check("linear 3-D input", [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
        {normal({2, 3, 4}), normal({5, 4}), normal({5})});
  check("linear 1-D input", [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
        {normal({4}), normal({3, 4}), normal({3})});
}

// ---- shape ops

TEST(Gradcheck, Views) {
  manual_seed(80);
  const Shape s{2, 3, 4};
  check("reshape", [](const Inputs& x) { return reshape(x[0], {4, 6}); }, {normal(s)});
  check("reshape -1", [](const Inputs& x) { return x[0].reshape({-1, 3}); }, {normal(s)});
  check("reshape of a transposed view",
        [](const Inputs& x) { return x[0].transpose(0, 1).reshape({12}); }, {normal({3, 4})});
  check("view", [](const Inputs& x) { return x[0].view({6, 4}); }, {normal(s)});
  check("transpose", [](const Inputs& x) { return transpose(x[0], 0, 2); }, {normal(s)});
  check("t", [](const Inputs& x) { return x[0].t(); }, {normal({3, 5})});
  check("permute", [](const Inputs& x) { return permute(x[0], {2, 0, 1}); }, {normal(s)});
  check("slice step 2", [](const Inputs& x) { return slice(x[0], 1, 1, 7, 2); }, {normal({3, 8})});
  check("slice negative start", [](const Inputs& x) { return slice(x[0], 0, -3, 5); },
        {normal({5, 3})});
  check("slice step 3 of a 3-D", [](const Inputs& x) { return x[0].slice(1, 0, 7, 3); },
        {normal({2, 7, 2})});
  check("narrow", [](const Inputs& x) { return x[0].narrow(1, 1, 2); }, {normal(s)});
  check("select", [](const Inputs& x) { return x[0].select(2, 3); }, {normal(s)});
  check("expand", [](const Inputs& x) { return expand(x[0], {2, 3, 4}); }, {normal({3, 1})});
  check("expand new leading dims",
        [](const Inputs& x) {
          return x[0].expand({2, 3, 4});
        },
        {normal({4})});
  check("broadcast_to",
        [](const Inputs& x) {
          return x[0].broadcast_to({3, 4});
        },
        {normal({1, 4})});
  check("squeeze", [](const Inputs& x) { return squeeze(x[0], 1); }, {normal({3, 1, 4})});
  check("squeeze all", [](const Inputs& x) { return x[0].squeeze(); }, {normal({3, 1, 4, 1})});
  check("unsqueeze", [](const Inputs& x) { return unsqueeze(x[0], 1); }, {normal({3, 4})});
  check("unsqueeze -1", [](const Inputs& x) { return x[0].unsqueeze(-1); }, {normal({3, 4})});
  check("flatten", [](const Inputs& x) { return flatten(x[0], 1, 2); }, {normal(s)});
  check("flatten all", [](const Inputs& x) { return x[0].flatten(); }, {normal(s)});
  check("contiguous of a transpose", [](const Inputs& x) { return x[0].t().contiguous(); },
        {normal({3, 4})});
  check("clone", [](const Inputs& x) { return x[0].clone(); }, {normal({3, 4})});
  check("sum_to", [](const Inputs& x) { return sum_to(x[0], {3, 1}); }, {normal(s)});
  check("sum_to leading", [](const Inputs& x) { return sum_to(x[0], {4}); }, {normal(s)});
  check("views composed",
        [](const Inputs& x) {
          return x[0].permute({1, 0, 2}).slice(2, 0, 4, 2).reshape({6, 2});
        },
        {normal(s)});
}

TEST(Gradcheck, CatStackSplit) {
  manual_seed(81);
  check("cat dim 0",
        [](const Inputs& x) {
          return cat({x[0], x[1], x[2]}, 0);
        },
        {normal({2, 3}), normal({1, 3}), normal({3, 3})});
  check("cat dim 1",
        [](const Inputs& x) {
          return cat({x[0], x[1], x[2]}, 1);
        },
        {normal({2, 3, 2}), normal({2, 1, 2}), normal({2, 2, 2})});
  check("cat dim -1",
        [](const Inputs& x) {
          return cat({x[0], x[1]}, -1);
        },
        {normal({2, 3}), normal({2, 2})});
  check("cat same input twice",
        [](const Inputs& x) {
          return cat({x[0], x[0] * 2.0}, 0);
        },
        {normal({2, 3})});
  check("stack dim 0",
        [](const Inputs& x) {
          return stack({x[0], x[1], x[2]}, 0);
        },
        {normal({2, 3}), normal({2, 3}), normal({2, 3})});
  check("stack dim 1",
        [](const Inputs& x) {
          return stack({x[0], x[1]}, 1);
        },
        {normal({2, 3}), normal({2, 3})});
  check("stack dim -1",
        [](const Inputs& x) {
          return stack({x[0], x[1]}, -1);
        },
        {normal({2, 3}), normal({2, 3})});
  // Pieces are reordered and weighted differently so each one's gradient is distinguishable.
  check("split by size",
        [](const Inputs& x) {
          std::vector<Tensor> p = split(x[0], 2, 1);
          return cat({p[2] * 3.0, p[0], p[1] * -2.0}, 1);
        },
        {normal({3, 5})});
  check("split by sizes",
        [](const Inputs& x) {
          std::vector<Tensor> p = split(x[0], std::vector<int64_t>{1, 3, 2}, 0);
          return cat({p[1].exp(), p[2] * 2.0, p[0]}, 0);
        },
        {normal({6, 2})});
  check("split, one piece unused", [](const Inputs& x) { return split(x[0], 2, 0)[1] * 2.0; },
        {normal({5, 2})});
  check("chunk",
        [](const Inputs& x) {
          std::vector<Tensor> p = chunk(x[0], 3, 1);
          return p[0] * p[1] + p[2];
        },
        {normal({2, 6})});
}

// ---- indexing

TEST(Gradcheck, Indexing) {
  manual_seed(90);
  Tensor rows = indices({0, 2, 0, 3, 2, 2}, {6});
  check("index_select dim 0, repeated indices",
        [rows](const Inputs& x) { return index_select(x[0], 0, rows); }, {normal({4, 3})});
  Tensor cols = indices({3, 1, 3, 3}, {4});
  check("index_select dim 1, repeated indices",
        [cols](const Inputs& x) { return index_select(x[0], 1, cols); }, {normal({3, 4})});
  Tensor g1 = indices({0, 3, 3, 1, 2, 2, 2, 0, 1, 3, 0, 0, 3, 3, 3}, {3, 5});
  check("gather dim 1", [g1](const Inputs& x) { return gather(x[0], 1, g1); }, {normal({3, 4})});
  Tensor g0 = indices({2, 0, 1, 1, 2, 2, 0, 2}, {2, 4});
  check("gather dim 0", [g0](const Inputs& x) { return gather(x[0], 0, g0); }, {normal({3, 4})});
  Tensor s1 = indices({0, 4, 4, 1, 2, 2, 3, 2, 0, 0, 0, 4}, {3, 4});
  check("scatter_add (x and src)", [s1](const Inputs& x) { return scatter_add(x[0], 1, s1, x[1]); },
        {normal({3, 5}), normal({3, 4})});
  Tensor ids = indices({1, 4, 1, 0, 5, 1, 4, 4}, {2, 4});
  check("embedding, repeated ids", [ids](const Inputs& x) { return embedding(x[0], ids); },
        {normal({6, 3})});
}

// ---- normalisation

TEST(Gradcheck, LayerNorm) {
  manual_seed(100);
  check("layer_norm weight+bias", [](const Inputs& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
        {normal({2, 3, 4}, 2.0), normal({4}), normal({4})});
  check("layer_norm weight only", [](const Inputs& x) { return layer_norm(x[0], {4}, x[1]); },
        {normal({3, 4}), normal({4})});
  check("layer_norm plain", [](const Inputs& x) { return layer_norm(x[0], {4}); },
        {normal({3, 4})});
  check("layer_norm over 2 dims, weight+bias",
        [](const Inputs& x) {
          return layer_norm(x[0], {3, 4}, x[1], x[2]);
        },
        {normal({2, 3, 4}), normal({3, 4}), normal({3, 4})});
}

TEST(Gradcheck, BatchNorm) {
  manual_seed(101);
  auto train = [](const Inputs& x) {
    const int64_t c = x[0].size(1);
    Tensor rm = zeros({c}, {.dtype = x[0].dtype()});
    Tensor rv = ones({c}, {.dtype = x[0].dtype()});
    return batch_norm(x[0], rm, rv, x[1], x[2], /*training=*/true);
  };
  check("batch_norm training [N, C]", train, {normal({5, 3}, 2.0), normal({3}), normal({3})});
  check("batch_norm training [N, C, L]", train, {normal({2, 3, 4}), normal({3}), normal({3})});
  check("batch_norm training [N, C, H, W]", train,
        {normal({2, 2, 2, 3}), normal({2}), normal({2})});
  Tensor rm = data_f64({3}) * 0.5;
  Tensor rv = abs(data_f64({3})) + 0.5;
  check("batch_norm eval",
        [rm, rv](const Inputs& x) {
          return batch_norm(x[0], rm.clone(), rv.clone(), x[1], x[2], /*training=*/false);
        },
        {normal({4, 3}), normal({3}), normal({3})});
}

// ---- losses (targets are data)

TEST(Gradcheck, MseLoss) {
  manual_seed(110);
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    check("mse_loss", [r](const Inputs& x) { return mse_loss(x[0], x[1], r); },
          {normal({3, 4}), data_f64({3, 4})});
  }
}

TEST(Gradcheck, CrossEntropyProbs) {
  manual_seed(111);
  Tensor target = softmax(data_f64({4, 5}), -1);
  check("cross_entropy_probs",
        [target](const Inputs& x) { return cross_entropy_probs(x[0], target); },
        {leaf(softmax(randn({4, 5}), -1))});
  check("cross_entropy_probs sum",
        [target](const Inputs& x) { return cross_entropy_probs(x[0], target, Reduction::sum); },
        {leaf(softmax(randn({4, 5}), -1))});
}

TEST(Gradcheck, CrossEntropy) {
  manual_seed(112);
  Tensor t4 = indices({1, 0, 4, 2}, {4});
  Tensor t5 = indices({1, 3, 3, 0, 2}, {5});
  auto ce = [](Tensor target, CrossEntropyOptions o) {
    return [target, o](const Inputs& x) { return cross_entropy(x[0], target, o); };
  };
  check("cross_entropy", ce(t4, {}), {normal({4, 5}, 2.0)});
  check("cross_entropy sum", ce(t4, {.reduction = Reduction::sum}), {normal({4, 5}, 2.0)});
  check("cross_entropy none", ce(t4, {.reduction = Reduction::none}), {normal({4, 5}, 2.0)});
  check("cross_entropy ignore_index", ce(t5, {.ignore_index = 3}), {normal({5, 4}, 2.0)});
  check("cross_entropy label_smoothing", ce(t4, {.label_smoothing = 0.1}), {normal({4, 5}, 2.0)});
  check("cross_entropy smoothing + ignore", ce(t5, {.ignore_index = 3, .label_smoothing = 0.2}),
        {normal({5, 4}, 2.0)});
  Tensor spatial = indices({0, 2, 1, 2, 1, 1, 0, 2}, {2, 4});
  check("cross_entropy [N, C, L]", ce(spatial, {}), {normal({2, 3, 4})});
}

TEST(Gradcheck, NllLoss) {
  manual_seed(113);
  Tensor t = indices({3, 0, 1, 1, 2}, {5});
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    check("nll_loss", [t, r](const Inputs& x) { return nll_loss(x[0], t, r); }, {normal({5, 4})});
  }
  check("nll_loss ignore_index",
        [t](const Inputs& x) { return nll_loss(x[0], t, Reduction::mean, 1); }, {normal({5, 4})});
  check("nll_loss(log_softmax)", [t](const Inputs& x) { return nll_loss(log_softmax(x[0], 1), t); },
        {normal({5, 4})});
}

TEST(Gradcheck, BceWithLogits) {
  manual_seed(114);
  Tensor target = rand({4, 3}, {.dtype = DType::f64});
  Tensor pos_weight = abs(data_f64({3})) + 0.5;
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    check("bce_with_logits",
          [target, r](const Inputs& x) { return bce_with_logits(x[0], target, r); },
          {normal({4, 3}, 2.0)});
    check("bce_with_logits pos_weight",
          [target, pos_weight, r](const Inputs& x) {
            return bce_with_logits(x[0], target, r, pos_weight);
          },
          {normal({4, 3}, 2.0)});
  }
  check("bce_with_logits, target as a non-grad input",
        [](const Inputs& x) { return bce_with_logits(x[0], x[1]); },
        {normal({4, 3}), rand({4, 3})});
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
