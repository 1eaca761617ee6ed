// tests/test_edge_inputs.cpp — issue 27's op-level crashes and wrong results (items 1, 2, 6,
// 11-15) and the sweeps over each class of input they belong to: 0-d tensors with a dim,
// size-0 dims, empty matrices, constant slices and saturated probabilities. Expected values
// are PyTorch's, printed by tests/gen_sweep_values.py (torch 1.13); each item's test failed
// (or crashed) before its fix.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ember/ember.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::f32;
using ember_test::f64;

void expect_near_f64(const Tensor& t, const std::vector<double>& want, double tol,
                     const std::string& what) {
  const std::vector<double> got = t.to(DType::f64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i]))  // inf exactly, NaN as NaN
      EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
          << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
    else
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
          << what << " [" << i << "]";
  }
}

// A case of an input class: runs `fn`, which must give a result or throw ember::Error (a
// crash ends the test binary, which is the failure these sweeps exist to catch).
struct InputCase {
  std::string name;
  std::function<void()> fn;
};

// Runs every case; returns how many gave a result (the rest threw ember::Error).
int run_cases(const std::vector<InputCase>& cases) {
  int results = 0;
  for (const InputCase& c : cases) {
    try {
      c.fn();
      ++results;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find("internal"), std::string::npos) << c.name << ": internal error: " << m;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": threw a non-ember exception: " << e.what();
    }
  }
  return results;
}

// ---- item 1 and 14: 0-d tensors with a dim ----

TEST(EdgeInputs, MovedimOfAZeroDimTensorReturnsIt) {
  const Tensor s = full({}, 2.5);
  for (auto [src, dst] : {std::pair{0, 0}, {0, -1}, {-1, 0}, {-1, -1}}) {
    const Tensor y = movedim(s, src, dst);
    EXPECT_EQ(y.dim(), 0);
    EXPECT_EQ(y.item<float>(), 2.5f);
  }
  const std::string m = error_of([&] { movedim(s, 1, 0); });
  EXPECT_NE(m.find("movedim"), std::string::npos) << m;
}

TEST(EdgeInputs, FlipOfAZeroDimTensorReturnsItAndRepeatInterleaveWithADimRefuses) {
  const Tensor s = full({}, 2.5);
  for (int64_t d : {0, -1}) {
    const Tensor y = flip(s, {d});
    EXPECT_EQ(y.dim(), 0);
    EXPECT_EQ(y.item<float>(), 2.5f);
  }
  const std::string m = error_of([&] { repeat_interleave(s, 2, 0); });
  EXPECT_NE(m.find("repeat_interleave"), std::string::npos) << m;
  EXPECT_NE(m.find("0-d"), std::string::npos) << m;
  // Without a dim it flattens first (PyTorch: [2.5, 2.5]).
  expect_near_f64(repeat_interleave(s, 2), {2.5, 2.5}, 0, "repeat_interleave(0-d, 2)");
}

// Every op that takes a dim, on a 0-d tensor with dim 0 and -1: a result or an ember::Error.
TEST(EdgeInputs, EveryDimOpTakesAZeroDimTensorWithoutCrashing) {
  const Tensor s = full({}, 2.5).requires_grad_();
  std::vector<InputCase> cases;
  for (int64_t d : {0, -1}) {
    const std::string at = "(0-d, dim " + std::to_string(d) + ")";
    auto add = [&](const std::string& n, std::function<void()> fn) {
      cases.push_back({n + at, std::move(fn)});
    };
    add("movedim", [=] { movedim(s, d, d).sum().backward(); });
    add("flip", [=] { flip(s, {d}).sum().backward(); });
    add("roll", [=] { roll(s, {1}, {d}).sum().backward(); });
    add("repeat_interleave", [=] { repeat_interleave(s, 2, d); });
    add("unbind", [=] { unbind(s, d); });
    add("chunk", [=] { chunk(s, 2, d); });
    add("split", [=] { split(s, 1, d); });
    add("unsqueeze", [=] { unsqueeze(s, d).sum().backward(); });
    add("squeeze", [=] { s.squeeze(d).sum().backward(); });
    add("narrow", [=] { s.narrow(d, 0, 1); });
    add("select", [=] { s.select(d, 0); });
    add("transpose", [=] { s.transpose(d, d).sum().backward(); });
    add("flatten", [=] { flatten(s, d, d).sum().backward(); });
    add("cat", [=] { cat({s, s}, d); });
    add("stack", [=] { stack({s, s}, d).sum().backward(); });
    add("index_select", [=] { index_select(s, d, from_vector<int64_t>({0}, {1})); });
    add("gather", [=] { gather(s, d, zeros({}, {.dtype = DType::i64})); });
    add("softmax", [=] { softmax(s, d).sum().backward(); });
    add("log_softmax", [=] { log_softmax(s, d).sum().backward(); });
    add("cumsum", [=] { cumsum(s, d).sum().backward(); });
    add("cumprod", [=] { cumprod(s, d).sum().backward(); });
    add("cummax", [=] { cummax(s, d); });
    add("cummin", [=] { cummin(s, d); });
    add("argmax", [=] { argmax(s, d); });
    add("argmin", [=] { argmin(s, d); });
    add("max(dim)", [=] { max(s, d).values.sum().backward(); });
    add("min(dim)", [=] { min(s, d).values.sum().backward(); });
    add("sum(dim)", [=] { sum(s, {d}).backward(); });
    add("mean(dim)", [=] { mean(s, {d}).backward(); });
    add("amax", [=] { amax(s, {d}).backward(); });
    add("logsumexp", [=] { logsumexp(s, {d}).backward(); });
    add("norm", [=] { norm(s, 2.0, {d}).backward(); });
    add("var", [=] { var(s, {d}, 0); });
    add("std", [=] { ember::std(s, {d}, 0); });
    add("sort", [=] { sort(s, d).values.sum().backward(); });
    add("argsort", [=] { argsort(s, d); });
    add("topk", [=] { topk(s, 1, d); });
    add("kthvalue", [=] { kthvalue(s, 1, d); });
    add("median(dim)", [=] { median(s, d); });
    add("glu", [=] { glu(s, d); });
    add("diff", [=] { diff(s, 1, d); });
  }
  const int results = run_cases(cases);
  EXPECT_GT(results, 0);
  RecordProperty("ops_covered", static_cast<int>(cases.size() / 2));
}

// ---- item 2: chunk / split of a size-0 dim, and glu along it ----

TEST(EdgeInputs, ChunkOfASizeZeroDimGivesOneEmptyPiecePerChunk) {
  const Tensor e = zeros({3, 0});
  const std::vector<Tensor> c = chunk(e, 2, 1);
  ASSERT_EQ(c.size(), 2u);
  for (const Tensor& p : c) EXPECT_EQ(p.shape(), Shape({3, 0}));
  const std::vector<Tensor> s = split(e, 2, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].shape(), Shape({3, 0}));
  const Tensor g = glu(e, 1);
  EXPECT_EQ(g.shape(), Shape({3, 0}));
  const Tensor w = zeros({2, 0}).requires_grad_();
  glu(w, 1).sum().backward();
  EXPECT_EQ(w.grad().shape(), Shape({2, 0}));
}

// Ops over a size-0 dim: PyTorch's identities (sum 0, prod 1, mean/var NaN, logsumexp -inf,
// norm 0, any false, all true), empty shapes for elementwise and scans, errors where
// PyTorch refuses (max/argmax of nothing).
TEST(EdgeInputs, ReductionsOverASizeZeroDimGivePyTorchsIdentities) {
  const Tensor e = zeros({2, 0});
  expect_near_f64(sum(e, {1}), {0, 0}, 0, "sum");
  expect_near_f64(prod(e, {1}), {1, 1}, 0, "prod");
  expect_near_f64(logsumexp(e, {1}), {-INFINITY, -INFINITY}, 0, "logsumexp");
  expect_near_f64(norm(e, 2.0, {1}), {0, 0}, 0, "norm 2");
  expect_near_f64(norm(e, 1.0, {1}), {0, 0}, 0, "norm 1");
  expect_near_f64(norm(e, 3.0, {1}), {0, 0}, 0, "norm 3");
  expect_near_f64(nansum(e, {1}), {0, 0}, 0, "nansum");
  expect_near_f64(count_nonzero(e, {1}), {0, 0}, 0, "count_nonzero");
  for (const Tensor& t : {mean(e, {1}), nanmean(e, {1}), mean(e)})
    for (double v : t.to(DType::f64).to_vector<double>()) EXPECT_TRUE(std::isnan(v));
  // Reducing a kept empty dim gives an empty result, for every reduction.
  const Tensor rows = zeros({0, 3});
  EXPECT_EQ(amax(rows, {1}).shape(), Shape({0}));
  EXPECT_EQ(argmax(rows, 1).shape(), Shape({0}));
  EXPECT_EQ(mean(rows, {1}).shape(), Shape({0}));
  EXPECT_EQ(var(rows, Shape{1}).shape(), Shape({0}));
  EXPECT_FALSE(any(e, {1}).to(DType::i64).to_vector<int64_t>()[0]);
  EXPECT_TRUE(all(e, {1}).to(DType::i64).to_vector<int64_t>()[0]);
  EXPECT_EQ(cumsum(e, 1).shape(), Shape({2, 0}));
  EXPECT_EQ(softmax(e, 1).shape(), Shape({2, 0}));
  EXPECT_EQ(sort(e, 1).values.shape(), Shape({2, 0}));
  EXPECT_EQ(exp(e).shape(), Shape({2, 0}));
  const std::vector<std::function<void()>> refused = {
      [&] { amax(e, {1}); }, [&] { argmax(e, 1); }, [&] { max(e, 1); }, [&] { median(e, 1); },
      [&] { var(e, {1}, 0); }};  // var refuses no degrees of freedom (PyTorch: NaN, a warning)
  for (const auto& fn : refused) error_of(fn);
}

// ---- item 6: decompositions of empty matrices ----

TEST(EdgeInputs, DeterminantOfZeroByZeroMatricesIsOne) {
  const Tensor a = zeros({2, 0, 0}).requires_grad_();
  const Tensor d = det(a);
  expect_near_f64(d, {1.0, 1.0}, 0, "det");
  d.sum().backward();
  EXPECT_EQ(a.grad().shape(), Shape({2, 0, 0}));
  expect_near_f64(det(zeros({0, 0})), {1.0}, 0, "det of one 0x0 matrix");
  EXPECT_EQ(det(zeros({0, 3, 3})).shape(), Shape({0}));
}

TEST(EdgeInputs, DecompositionsOfEmptyMatricesGiveEmptyResults) {
  EXPECT_EQ(inv(zeros({2, 0, 0})).shape(), Shape({2, 0, 0}));
  EXPECT_EQ(solve(zeros({2, 0, 0}), zeros({2, 0, 3})).shape(), Shape({2, 0, 3}));
  EXPECT_EQ(cholesky(zeros({2, 0, 0})).shape(), Shape({2, 0, 0}));
  EXPECT_EQ(inv(zeros({0, 3, 3})).shape(), Shape({0, 3, 3}));
  const QR f = qr(zeros({3, 0}));
  EXPECT_EQ(f.Q.shape(), Shape({3, 0}));
  EXPECT_EQ(f.R.shape(), Shape({0, 0}));
  const SVD s = svd(zeros({0, 4}));
  EXPECT_EQ(s.S.shape(), Shape({0}));
  // A solve whose right-hand side has no columns.
  EXPECT_EQ(solve(f32({2, 0, 0, 2}, {2, 2}), zeros({2, 0})).shape(), Shape({2, 0}));
  EXPECT_EQ(matmul(zeros({2, 0}), zeros({0, 3})).sum().item<float>(), 0.0f);
}

// ---- item 11: std / var over a constant slice ----

TEST(EdgeInputs, StdOfAConstantSliceHasAZeroGradient) {
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = f64({0.1, 0.1, 0.1, 1.0, 2.0, 4.0}, {2, 3}).to(dt).detach().requires_grad_();
    const Tensor s = ember::std(x, Shape{1});
    expect_near_f64(s, {0.0, 1.5275252316519468}, 1e-6, "std");
    s.sum().backward();
    expect_near_f64(x.grad(),
                    {0, 0, 0, -0.43643578047198484, -0.10910894511799625, 0.5455447255899809}, 1e-6,
                    std::string(dtype_name(dt)));
  }
}

TEST(EdgeInputs, VarianceOfAConstantSliceIsExactlyZero) {
  // Values whose mean does not round back exactly (0.1 three times in f64), long slices on
  // the vectorised CPU path, and a constant column in a batch (the outer reduction).
  for (DType dt : {DType::f32, DType::f64}) {
    for (int64_t n : {3, 7, 1000, 4099}) {
      const Tensor x = full({n}, 0.1, {.dtype = dt});
      EXPECT_EQ(var(x).to(DType::f64).item<double>(), 0.0) << dtype_name(dt) << " n=" << n;
      EXPECT_EQ(ember::std(x).to(DType::f64).item<double>(), 0.0) << dtype_name(dt) << " n=" << n;
    }
    Tensor batch = randn({64, 5}).to(dt);
    batch =
        cat({batch.narrow(1, 0, 2), full({64, 1}, 0.3, {.dtype = dt}), batch.narrow(1, 3, 2)}, 1)
            .detach()
            .requires_grad_();
    const Tensor s = ember::std(batch, Shape{0});
    EXPECT_EQ(s.to(DType::f64).to_vector<double>()[2], 0.0) << dtype_name(dt);
    s.sum().backward();
    const Tensor g = batch.grad().narrow(1, 2, 1);
    EXPECT_EQ(abs(g).max().to(DType::f64).item<double>(), 0.0) << dtype_name(dt);
    EXPECT_FALSE(any(isnan(batch.grad())).item<bool>()) << dtype_name(dt);
  }
  // A constant infinite slice is NaN, as PyTorch (inf - inf).
  EXPECT_TRUE(std::isnan(var(full({3}, INFINITY)).item<float>()));
}

// ---- item 12: binary_cross_entropy at saturated probabilities ----

TEST(EdgeInputs, BinaryCrossEntropyAtZeroAndOneHasAFiniteGradient) {
  const Tensor p = f32({0, 1, 0, 1, 0.25}, {5}).requires_grad_();
  const Tensor t = f32({0, 1, 1, 0, 1}, {5});
  const Tensor loss = binary_cross_entropy(p, t);
  EXPECT_NEAR(loss.item<float>(), 40.277259826660156, 1e-4);
  loss.backward();
  expect_near_f64(p.grad(), {0.0, 0.0, -199999995904.0, 199999995904.0, -0.800000011920929}, 1e-6,
                  "bce grad");
  // A weight scales the gradient; the target's gradient is -logit(p), infinite at 0 and 1
  // (PyTorch: [inf, -inf] and [-999999995904, 1500000026624]).
  const Tensor t2 = f32({0.5, 0.5}, {2}).requires_grad_();
  const Tensor p2 = f32({0, 1}, {2}).requires_grad_();
  binary_cross_entropy(p2, t2, Reduction::sum, f32({2, 3}, {2})).backward();
  expect_near_f64(t2.grad(), {INFINITY, -INFINITY}, 0, "bce target grad");
  expect_near_f64(p2.grad(), {-999999995904.0, 1500000026624.0}, 1e-6, "bce weighted grad");
}

// The loss family at saturated or degenerate inputs: finite losses and gradients where PyTorch
// gives them, equal to PyTorch's values (tests/gen_sweep_values.py, saturated_losses). At a
// kink (|d| = 0, the hinge) only finiteness is asserted: the subgradient chosen differs.
TEST(EdgeInputs, LossesAtSaturatedOrDegenerateInputsMatchPyTorch) {
  struct LossCase {
    std::string name;
    std::function<Tensor(const std::vector<Tensor>&)> fn;
    std::vector<Tensor> inputs;
    double loss;
    std::vector<std::vector<double>> grads;  // empty: finiteness only
  };
  const auto t = [](std::vector<float> v, Shape s) { return f32(v, s); };
  const std::vector<LossCase> cases = {
      {"bce_with_logits",
       [&](auto& x) {
         return bce_with_logits(x[0], t({1, 0, 1, 0}, {4}));
       },
       {t({100, -100, -100, 100}, {4})},
       50.0,
       {{0.0, 0.0, -0.25, 0.25}}},
      {"kl_div",
       [&](auto& x) {
         return kl_div(x[0], t({0, 0.5, 0.5}, {3}), Reduction::sum);
       },
       {t({-1e30f, -0.7f, -0.7f}, {3})},
       0.0068528056144714355,
       {{0.0, -0.5, -0.5}}},
      {"cross_entropy (probabilities)",
       [&](auto& x) {
         return cross_entropy(x[0], t({0, 1, 0}, {1, 3}));
       },
       {t({-1e30f, 2, 1}, {1, 3})},
       0.31326165795326233,
       {{0.0, -0.26894140243530273, 0.2689414322376251}}},
      {"cosine_embedding_loss",
       [&](auto& x) {
         return cosine_embedding_loss(x[0], x[1], t({1, -1}, {2}), -0.5);
       },
       {t({0, 0, 1, 2}, {2, 2}), t({1, 1, 0, 0}, {2, 2})},
       0.75,
       {{-353553.40625, -353553.40625, 0.0, 0.0}, {0.0, 0.0, 223606.796875, 447213.59375}}},
      {"triplet_margin_loss",
       [&](auto& x) { return triplet_margin_loss(x[0], x[1], x[2]); },
       {t({1, 2}, {1, 2}), t({1, 2}, {1, 2}), t({0.5, 0}, {1, 2})},
       0.0,
       {{0, 0}, {0, 0}, {0, 0}}},
      {"poisson_nll_loss",
       [&](auto& x) {
         return poisson_nll_loss(x[0], t({0, 2}, {2}), false);
       },
       {t({0, 0}, {2})},
       18.42068099975586,
       {{0.5, -100000000.0}}},
      {"smooth_l1_loss beta 0",
       [&](auto& x) {
         return smooth_l1_loss(x[0], t({1, 2}, {2}), Reduction::mean, 0.0);
       },
       {t({1, 3}, {2})},
       0.5,
       {}},
      {"l1_loss",
       [&](auto& x) {
         return l1_loss(x[0], t({1, 2}, {2}));
       },
       {t({1, 3}, {2})},
       0.5,
       {{0.0, 0.5}}},
      {"huber_loss",
       [&](auto& x) {
         return huber_loss(x[0], t({1, 2}, {2}));
       },
       {t({1, 4}, {2})},
       0.75,
       {{0.0, 0.5}}},
      {"margin_ranking_loss",
       [&](auto& x) { return margin_ranking_loss(x[0], t({1}, {1}), t({1}, {1})); },
       {t({1}, {1})},
       0.0,
       {}},
      {"binary_cross_entropy",
       [&](auto& x) {
         return binary_cross_entropy(x[0], t({1, 0}, {2}));
       },
       {t({1, 0}, {2})},
       0.0,
       {{0.0, 0.0}}},
  };
  for (const LossCase& c : cases) {
    std::vector<Tensor> x;
    for (const Tensor& in : c.inputs) x.push_back(in.clone().requires_grad_());
    Tensor loss;
    try {
      loss = c.fn(x);
    } catch (const Error& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
      continue;
    }
    EXPECT_NEAR(loss.item<double>(), c.loss, 1e-5 * std::max(1.0, std::abs(c.loss))) << c.name;
    loss.backward();
    for (size_t i = 0; i < x.size(); ++i) {
      const std::vector<double> g = x[i].grad().to(DType::f64).to_vector<double>();
      for (double v : g) EXPECT_TRUE(std::isfinite(v)) << c.name << " grad " << i;
      if (!c.grads.empty()) expect_near_f64(x[i].grad(), c.grads[i], 1e-5, c.name + " grad");
    }
  }
}

// ---- item 13: norm with p = 0 ----

TEST(EdgeInputs, NormWithPZeroIsDifferentiableWithAZeroGradient) {
  const Tensor x = f32({0, 2, -3}, {3}).requires_grad_();
  const Tensor n = norm(x, 0.0);
  EXPECT_EQ(n.item<float>(), 2.0f);
  ASSERT_TRUE(n.requires_grad());
  n.backward();
  expect_near_f64(x.grad(), {0, 0, 0}, 0, "norm p=0 grad");
}

// ---- item 15: reduced QR of a wide matrix, differentiated ----

TEST(EdgeInputs, QrOfAWideMatrixIsDifferentiable) {
  const Tensor a = f64({2.0, -1.0, 0.5, 3.0, 1.0, 4.0, -2.0, 0.25}, {2, 4}).requires_grad_();
  const QR f = qr(a);
  expect_near_f64(
      f.Q, {-0.8944271909999157, -0.4472135954999579, -0.4472135954999579, 0.8944271909999159},
      1e-12, "Q");
  expect_near_f64(f.R,
                  {-2.23606797749979, -0.8944271909999159, 0.4472135954999579, -2.7950849718747364,
                   0.0, 4.024922359499621, -2.0124611797498106, -1.1180339887498947},
                  1e-12, "R");
  const Tensor w = arange(0, 8, 1, {.dtype = DType::f64}).reshape({2, 4});
  (f.Q.sum() * 0.5 + (f.R * w).sum()).backward();
  expect_near_f64(a.grad(),
                  {3.778954881974644, -3.1304951684997055, -4.472135954999579, -5.813776741499453,
                   -7.557909763949288, 4.024922359499621, 4.47213595499958, 4.919349550499537},
                  1e-10, "qr wide grad");
  // Against finite differences, batched, both shapes.
  for (const Shape& shape : {Shape{2, 3, 5}, Shape{2, 5, 3}, Shape{3, 3}}) {
    const Tensor x = randn(shape, {.dtype = DType::f64});
    EXPECT_TRUE(gradcheck(
        [](const std::vector<Tensor>& in) {
          const QR r = qr(in[0]);
          return r.Q.sum() + (r.R * r.R).sum();
        },
        {x}))
        << shape.to_string();
  }
}

}  // namespace
