// tests/test_shape_vocabulary.cpp — issue 32's shape, indexing, reduction and scan vocabulary
// (include/ember/ops_shape.hpp) beyond the op driver's cases (tests/test_op_cases_shape.cpp):
// bad input refused with an error naming the op, edge cases (empty, NaN, -inf, ties, views),
// the factories and aliases the catalogue does not list, and the results that are not
// differentiable. Expected values are PyTorch 1.13's, computed with /usr/bin/python3.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ops_shape.hpp"
#include "ember/train/capture.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::test_util::error_of;
using ember::test_util::expect_op_error;
using ember_test::f64;
using ember_test::i64;
using ember_test::kInf;
using ember_test::kNaN;

// NaN-aware equality of f64 values.
void expect_doubles_near(const Tensor& got, const std::vector<double>& want,
                         const std::string& what) {
  const std::vector<double> v = got.to(DType::f64).to_vector<double>();
  ASSERT_EQ(v.size(), want.size()) << what;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(v[i])) << what << " [" << i << "]: " << v[i];
    else if (std::isinf(want[i]))
      EXPECT_EQ(v[i], want[i]) << what << " [" << i << "]";
    else
      EXPECT_NEAR(v[i], want[i], 1e-6 * std::max(1.0, std::abs(want[i])))
          << what << " [" << i << "]";
  }
}

TEST(ShapeVocabulary, JoinsAndSplitsRefuseBadInput) {
  expect_op_error(error_of([] { ember::hstack({}); }), "hstack", "no tensors");
  expect_op_error(error_of([] { ember::hsplit(ember::zeros({7}), 3); }), "hsplit",
                  "3 equal sections");
  expect_op_error(error_of([] { ember::vsplit(ember::zeros({4}), 2); }), "vsplit",
                  "at least 2 dims");
  expect_op_error(error_of([] {
                    ember::dsplit(ember::zeros({2, 4}), 2);
                  }),
                  "dsplit", "at least 3 dims");
  expect_op_error(error_of([] { ember::tensor_split(ember::zeros({3}), 0); }), "tensor_split",
                  "sections 0");
  expect_op_error(error_of([] { ember::tensor_split(ember::zeros(Shape{}), 2); }), "tensor_split",
                  "0-d");
  expect_op_error(error_of([] {
                    ember::unflatten(ember::zeros({2, 6}), 1, {4, -1});
                  }),
                  "unflatten", "do not divide");
  expect_op_error(error_of([] {
                    ember::unflatten(ember::zeros({2, 6}), 1, {-1, -1});
                  }),
                  "unflatten", "at most one -1");
  expect_op_error(error_of([] {
                    ember::rot90(ember::zeros({2, 2}), 1, {0, 0});
                  }),
                  "rot90", "two different dims");
  expect_op_error(error_of([] {
                    ember::block_diag({ember::zeros({2, 2, 2})});
                  }),
                  "block_diag", "0, 1 or 2 dims");
  expect_op_error(error_of([] {
                    ember::cartesian_prod({ember::zeros({2, 2})});
                  }),
                  "cartesian_prod", "1-D");
  expect_op_error(error_of([] { ember::combinations(ember::zeros({3}), -1); }), "combinations",
                  "r >= 0");
  expect_op_error(error_of([] {
                    ember::broadcast_shapes({{3, 2}, {4}});
                  }),
                  "broadcast_shapes", "does not broadcast");
  expect_op_error(error_of([] {
                    ember::broadcast_tensors({ember::zeros({2}), ember::zeros({3})});
                  }),
                  "broadcast_tensors", "broadcast");
  expect_op_error(error_of([] {
                    ember::column_stack({ember::zeros({2}), ember::zeros({3})});
                  }),
                  "column_stack", "");
  expect_op_error(error_of([] { ember::narrow_copy(ember::zeros({3}), 0, 2, 2); }), "narrow_copy",
                  "outside");
}

TEST(ShapeVocabulary, SplitEdgeCases) {
  // Sections longer than the dim give empty pieces; indices past the end clamp (PyTorch).
  std::vector<Tensor> parts = ember::tensor_split(ember::arange(2), 4);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].numel(), 1);
  EXPECT_EQ(parts[2].numel(), 0);
  parts = ember::tensor_split(ember::arange(7), std::vector<int64_t>{5, 2, 9});
  ASSERT_EQ(parts.size(), 4u);
  expect_doubles_near(parts[2], {2, 3, 4, 5, 6}, "tensor_split [5, 2, 9] piece 2");
  EXPECT_EQ(parts[1].numel(), 0);
  EXPECT_EQ(parts[3].numel(), 0);
  // Pieces are views of x.
  Tensor x = ember::arange(6);
  EXPECT_EQ(ember::tensor_split(x, 2)[1].storage(), x.storage());
  EXPECT_EQ(ember::row_stack({ember::ones({2}), ember::zeros({2})}).shape(), Shape({2, 2}));
}

TEST(ShapeVocabulary, FactoriesAndAliases) {
  expect_doubles_near(ember::tril_indices(3, 4, 1),
                      {0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 1, 0, 1, 2, 0, 1, 2, 3},
                      "tril_indices(3, 4, 1)");
  expect_doubles_near(ember::triu_indices(3, 3, -1),
                      {0, 0, 0, 1, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2, 1, 2}, "triu_indices(3, 3, -1)");
  EXPECT_EQ(ember::tril_indices(0, 3).shape(), Shape({2, 0}));
  EXPECT_EQ(ember::tril_indices(2, 2).dtype(), DType::i64);
  EXPECT_EQ(ember::triu_indices(2, 2, 0, {.dtype = DType::i32}).dtype(), DType::i32);
  expect_op_error(error_of([] { ember::tril_indices(-1, 2); }), "tril_indices", "expected >= 0");
  expect_op_error(error_of([] { ember::triu_indices(2, 2, 0, {.dtype = DType::f32}); }),
                  "triu_indices", "i64 or i32");
  EXPECT_EQ(ember::broadcast_shapes({{3, 1}, {4}, {2, 1, 1}}), Shape({2, 3, 4}));
  EXPECT_EQ(ember::broadcast_shapes({}), Shape{});
  Tensor x = ember::randn({2, 3, 4});
  EXPECT_EQ(ember::swapaxes(x, 0, 2).shape(), Shape({4, 3, 2}));
  EXPECT_EQ(ember::swapdims(x, 1, 2).shape(), Shape({2, 4, 3}));
  EXPECT_EQ(ember::moveaxis(x, 0, -1).shape(), Shape({3, 4, 2}));
  EXPECT_EQ(ember::moveaxis(x, Shape{0, 1}, Shape{2, 0}).shape(), Shape({3, 4, 2}));
  EXPECT_EQ(ember::atleast_2d(std::vector<Tensor>{ember::zeros(Shape{}), x})[0].shape(),
            Shape({1, 1}));
  EXPECT_TRUE(ember::atleast_3d(x).is_same(x));  // rank enough: x itself, as PyTorch
  EXPECT_EQ(ember::block_diag({}).shape(), Shape({1, 0}));
  // Mixed dtypes promote (i32 and f32 blocks give f32).
  Tensor b = ember::block_diag({ember::ones({1}, {.dtype = DType::i32}), ember::ones({1, 1})});
  EXPECT_EQ(b.dtype(), DType::f32);
  EXPECT_EQ(ember::combinations(ember::arange(3), 0).shape(), Shape({0}));
  EXPECT_EQ(ember::combinations(ember::arange(2), 3).shape(), Shape({0, 3}));
  EXPECT_EQ(ember::combinations(ember::arange(2), 3, true).shape(), Shape({4, 3}));
  expect_doubles_near(ember::eye(3), {1, 0, 0, 0, 1, 0, 0, 0, 1}, "eye(3)");
  expect_doubles_near(ember::eye(2, 4, {.dtype = DType::i64}), {1, 0, 0, 0, 0, 1, 0, 0},
                      "eye(2, 4)");
  expect_doubles_near(ember::eye(3, 2, {.dtype = DType::f64}), {1, 0, 0, 1, 0, 0}, "eye(3, 2)");
  EXPECT_EQ(ember::eye(2, {.dtype = DType::f64}).dtype(), DType::f64);
  EXPECT_EQ(ember::eye(0, 3).shape(), Shape({0, 3}));
  EXPECT_EQ(ember::trace(ember::eye(3)).item<float>(), 3.0f);
  expect_op_error(error_of([] { ember::eye(-1); }), "eye", "expected sizes >= 0");
}

TEST(ShapeVocabulary, StridedViewsAndDiagonals) {
  Tensor x = ember::arange(6, {.dtype = DType::f64});
  Tensor v = ember::as_strided(x, {2, 2}, {1, 2});
  expect_doubles_near(v, {0, 2, 1, 3}, "as_strided");
  EXPECT_EQ(v.storage(), x.storage());
  expect_doubles_near(ember::as_strided(x.narrow(0, 2, 2), {2}, {2}), {2, 4},
                      "as_strided of a view");
  expect_op_error(error_of([&] {
                    ember::as_strided(x, {2, 3}, {3, 1}, 1);
                  }),
                  "as_strided", "inside the storage");
  expect_op_error(error_of([&] { ember::as_strided(x, {2}, {-1}); }), "as_strided", ">= 0");
  expect_op_error(error_of([&] {
                    ember::as_strided(x, {2, 2}, {1});
                  }),
                  "as_strided", "as many strides");
  Tensor m = ember::arange(24, {.dtype = DType::f64}).reshape({2, 3, 4});
  Tensor d = ember::diagonal(m, 1, 1, 2);
  expect_doubles_near(d, {1, 6, 11, 13, 18, 23}, "diagonal(1, 1, 2)");
  EXPECT_EQ(d.storage(), m.storage());
  EXPECT_EQ(ember::diagonal(m, 5, 1, 2).shape(), Shape({2, 0}));
  expect_op_error(error_of([&] { ember::diagonal(m, 0, 1, -2); }), "diagonal", "the same dim");
  expect_op_error(error_of([] { ember::diagonal(ember::zeros({3})); }), "diagonal",
                  "at least 2 dims");
  expect_op_error(error_of([] { ember::trace(ember::zeros({2, 2, 2})); }), "trace", "a matrix");
  EXPECT_EQ(ember::trace(ember::ones({2, 3}, {.dtype = DType::i32})).dtype(), DType::i64);
  expect_op_error(error_of([] { ember::diag_embed(ember::zeros({2}), 0, 0, -2); }), "diag_embed",
                  "the same dim");
  // diagonal's gradient on a view lands on the diagonal only.
  Tensor a = ember::ones({3, 3}).requires_grad_();
  ember::sum(ember::diagonal(a, -1)).backward();
  expect_doubles_near(a.grad(), {0, 0, 0, 1, 0, 0, 0, 1, 0}, "diagonal grad");
  // as_strided's gradient of overlapping elements adds up.
  Tensor s = ember::ones({4}).requires_grad_();
  ember::sum(ember::as_strided(s, {2, 2}, {1, 1})).backward();
  expect_doubles_near(s.grad(), {1, 2, 1, 0}, "as_strided overlap grad");
}

TEST(ShapeVocabulary, StatisticsEdgeCases) {
  // nanquantile skips NaN (an all-NaN line gives NaN); quantile gives NaN for any NaN.
  Tensor x = f64({1, kNaN, 3, 4, kNaN, kNaN, kNaN, kNaN, 2, 5, kNaN, 1}, {3, 4});
  expect_doubles_near(ember::nanquantile(x, 0.5, 1), {3, kNaN, 2}, "nanquantile");
  expect_doubles_near(ember::quantile(x, 0.5, 1), {kNaN, kNaN, kNaN}, "quantile with NaN");
  expect_doubles_near(ember::nanquantile(x, f64({0.25, 0.75}, {2}), 1),
                      {2, kNaN, 1.5, 3.5, kNaN, 3.5}, "nanquantile q vector");
  expect_doubles_near(
      ember::quantile(f64({1, 2, 3, 4, 5, 6}, {6}), 0.5, std::nullopt, false, "nearest"), {3},
      "nearest rounds half to even");
  expect_op_error(error_of([&] { ember::quantile(x, 1.5); }), "quantile", "0 <= q <= 1");
  expect_op_error(error_of([&] { ember::quantile(x, 0.5, 1, false, "cubic"); }), "quantile",
                  "interpolation");
  expect_op_error(error_of([] { ember::quantile(ember::zeros({0}), 0.5); }), "quantile", "empty");
  expect_op_error(error_of([&] { ember::quantile(x, ember::ones({2}), 1); }), "quantile", "dtype");
  // logcumsumexp: -inf lines stay -inf, large values do not overflow.
  expect_doubles_near(ember::logcumsumexp(f64({-kInf, -kInf, 0, 1000}, {4}), 0),
                      {-kInf, -kInf, 0, 1000}, "logcumsumexp");
  expect_op_error(
      error_of([] { ember::logcumsumexp(ember::zeros({2}, {.dtype = DType::i64}), 0); }),
      "logcumsumexp", "unsupported dtype");
  // mode: of equally frequent values the smallest, at its last position.
  ember::ValuesIndices md = ember::mode(i64({5, 5, 1, 1, 7, 3, 3, 7}, {2, 4}), 1);
  expect_doubles_near(md.values, {1, 3}, "mode values");
  expect_doubles_near(md.indices, {3, 2}, "mode indices");
  expect_op_error(error_of([] { ember::mode(ember::zeros({2, 0}), 1); }), "mode", "empty");
  auto [mn, mx] = ember::aminmax(f64({3, -1, 2}, {3}));
  expect_doubles_near(mn, {-1}, "aminmax min");
  expect_doubles_near(mx, {3}, "aminmax max");
  expect_op_error(error_of([] { ember::aminmax(ember::zeros({0, 2}), 0); }), "aminmax", "empty");
  expect_op_error(error_of([] { ember::var_mean(ember::zeros({2}, {.dtype = DType::i64})); }),
                  "var_mean", "unsupported dtype");
}

TEST(ShapeVocabulary, DataDependentSizes) {
  // histc: elements outside [min, max] are left out, max itself is in the last bin.
  expect_doubles_near(ember::histc(f64({0, 1, 2, 3, -1, 4}, {6}), 3, 0, 3), {1, 1, 2}, "histc");
  expect_op_error(error_of([] { ember::histc(ember::zeros({2}), 0); }), "histc", "bins > 0");
  expect_op_error(error_of([] { ember::histc(ember::zeros({2}), 2, 1, 0); }), "histc",
                  "min <= max");
  // bincount: weights give their dtype, minlength pads.
  Tensor counts = ember::bincount(i64({0, 2, 2, 4}, {4}), f64({0.5, 1, 2, -1}, {4}), 2);
  EXPECT_EQ(counts.dtype(), DType::f64);
  expect_doubles_near(counts, {0.5, 0, 3, 0, -1}, "bincount weights");
  expect_doubles_near(ember::bincount(i64({}, {0}), Tensor(), 3), {0, 0, 0}, "bincount empty");
  expect_op_error(error_of([] { ember::bincount(i64({1, -2}, {2})); }), "bincount", "non-negative");
  expect_op_error(error_of([] { ember::bincount(ember::zeros({2})); }), "bincount",
                  "unsupported dtype");
  expect_op_error(error_of([] {
                    ember::bincount(i64({1, 2}, {2}), ember::ones({3}));
                  }),
                  "bincount", "weights shape");
  // unique: NaNs are distinct (sorted last); every result is non-differentiable.
  Tensor u_in = f64({2, kNaN, 1, kNaN, 2}, {5}).requires_grad_();
  ember::Unique u = ember::unique(u_in);
  expect_doubles_near(u.values, {1, 2, kNaN, kNaN}, "unique values");
  expect_doubles_near(u.counts, {1, 2, 1, 1}, "unique counts");
  expect_doubles_near(u.inverse, {1, 2, 0, 3, 1}, "unique inverse");
  EXPECT_FALSE(u.values.requires_grad());
  ember::Unique e = ember::unique(ember::zeros({0}));
  EXPECT_EQ(e.values.numel(), 0);
  EXPECT_EQ(e.counts.numel(), 0);
  ember::Unique b = ember::unique(ember::from_vector<bool>({true, false, true}, {3}));
  EXPECT_EQ(b.values.dtype(), DType::boolean);
  expect_doubles_near(b.counts, {1, 2}, "unique bool counts");
  expect_op_error(error_of([] { ember::unique(ember::zeros(Shape{}), 0); }), "unique", "0-d");
  // searchsorted: side and right must agree; out_int32; a 0-d value.
  Tensor seq = f64({1, 2, 2, 3}, {4});
  Tensor pos = ember::searchsorted(seq, f64({2, 2.5}, {2}), {.out_int32 = true, .side = "right"});
  EXPECT_EQ(pos.dtype(), DType::i32);
  expect_doubles_near(pos, {3, 3}, "searchsorted right");
  expect_doubles_near(ember::searchsorted(seq, f64({4}, {})), {4}, "searchsorted 0-d value");
  // NaN as PyTorch: a NaN value goes after everything, a NaN at the sequence's end is passed.
  expect_doubles_near(ember::searchsorted(f64({1, 2, 3}, {3}), f64({kNaN, 2}, {2})), {3, 1},
                      "searchsorted NaN value");
  expect_doubles_near(ember::searchsorted(f64({1, 2, kNaN}, {3}), f64({5, kNaN}, {2})), {3, 3},
                      "searchsorted NaN in the sequence");
  // NaN is in no bin (torch 1.13's CPU kernel counts it in bin 0; NumPy leaves it out).
  expect_doubles_near(ember::histc(f64({kNaN, 1, 2}, {3}), 2, 0, 2), {0, 2}, "histc skips NaN");
  expect_doubles_near(ember::searchsorted(f64({}, {0}), f64({4}, {1})), {0}, "searchsorted empty");
  expect_op_error(error_of([&] { ember::searchsorted(seq, seq, {.right = true, .side = "left"}); }),
                  "searchsorted", "agree");
  expect_op_error(error_of([&] { ember::searchsorted(seq, seq, {.side = "up"}); }), "searchsorted",
                  "side 'up'");
  expect_op_error(error_of([&] {
                    ember::searchsorted(seq.reshape({2, 2}), f64({1}, {1}));
                  }),
                  "searchsorted", "leading dims");
  expect_op_error(error_of([&] { ember::searchsorted(seq, seq, {.sorter = i64({0}, {1})}); }),
                  "searchsorted", "sorter shape");
  expect_op_error(error_of([&] {
                    ember::bucketize(seq, seq.reshape({2, 2}));
                  }),
                  "bucketize", "1-D");
}

TEST(ShapeVocabulary, IntegralsAndIndexing) {
  expect_doubles_near(ember::cumulative_trapezoid(f64({1, 2, 4}, {1, 3})), {1.5, 4.5},
                      "cumulative_trapezoid");
  expect_doubles_near(ember::trapezoid(f64({1, 2, 3}, {3}), 2.0), {8}, "trapezoid dx");
  expect_op_error(error_of([] { ember::trapezoid(ember::ones({3}), ember::ones({2})); }),
                  "trapezoid", "3");
  expect_doubles_near(ember::take(i64({1, 2, 3, 4}, {2, 2}), i64({-1, 0}, {2})), {4, 1}, "take");
  expect_op_error(error_of([] { ember::take(ember::ones({2}), ember::ones({1})); }), "take", "");
  expect_op_error(error_of([] {
                    ember::take_along_dim(ember::ones({2, 2}), i64({0}, {1}), 0);
                  }),
                  "take_along_dim", "same number of dims");
  expect_doubles_near(ember::index_reduce(ember::ones({3}, {.dtype = DType::f64}), 0,
                                          i64({0, 0, 2}, {3}), f64({2, 3, 4}, {3}), "prod", false),
                      {6, 1, 4}, "index_reduce prod without self");
  expect_op_error(
      error_of(
          [] { ember::index_reduce(ember::ones({3}), 0, i64({0}, {1}), ember::ones({1}), "sum"); }),
      "index_reduce", "expected prod, mean, amax or amin");
  expect_op_error(
      error_of([] {
        ember::index_reduce(ember::ones({3, 2}), 0, i64({0}, {1}), ember::ones({1, 3}), "amax");
      }),
      "index_reduce", "source shape");
  // put_ writes in place; put leaves x alone.
  Tensor x = ember::zeros({2, 2});
  Tensor y = ember::put(x, i64({3}, {1}), ember::ones({1}));
  expect_doubles_near(x, {0, 0, 0, 0}, "put leaves x");
  expect_doubles_near(y, {0, 0, 0, 1}, "put");
  ember::put_(x, i64({0, 0}, {2}), ember::ones({2}), true);
  expect_doubles_near(x, {2, 0, 0, 0}, "put_ accumulate");
  expect_op_error(error_of([&] {
                    ember::put(x, i64({0, 1}, {2}), ember::ones({1}));
                  }),
                  "put", "as many");
  // masked_scatter needs as many source elements as true positions.
  Tensor mask = ember::from_vector<bool>({true, false, true}, {3});
  expect_doubles_near(ember::masked_scatter(ember::zeros({3}), mask, ember::arange(1, 3)),
                      {1, 0, 2}, "masked_scatter");
  expect_op_error(
      error_of([&] { ember::masked_scatter(ember::zeros({3}), mask, ember::ones({1})); }),
      "masked_scatter", "at least as many");
  expect_op_error(error_of([&] {
                    ember::masked_scatter(ember::zeros({3}), ember::ones({3}), ember::ones({3}));
                  }),
                  "masked_scatter", "expected bool");
}

// Results that are counts, positions or bins carry no gradient even from an input that
// requires one (PyTorch's are not differentiable either); mode's values do, its indices not.
TEST(ShapeVocabulary, NonDifferentiableResults) {
  Tensor x = f64({0.5, 2, 2, -1, 3, 0.5}, {2, 3}).requires_grad_();
  EXPECT_FALSE(ember::histc(x, 4).requires_grad());
  EXPECT_FALSE(ember::searchsorted(f64({0, 1, 2}, {3}), x).requires_grad());
  EXPECT_FALSE(ember::bucketize(x, f64({0, 1, 2}, {3})).requires_grad());
  EXPECT_FALSE(
      ember::bincount(i64({0, 1}, {2}), f64({1, 2}, {2}).requires_grad_()).requires_grad());
  ember::Unique u = ember::unique_consecutive(x, 1);
  EXPECT_FALSE(u.values.requires_grad() || u.inverse.requires_grad() || u.counts.requires_grad());
  ember::ValuesIndices m = ember::mode(x, 1);
  EXPECT_TRUE(m.values.requires_grad());
  EXPECT_FALSE(m.indices.requires_grad());
  EXPECT_FALSE(ember::tril_indices(3, 3, 0, {.requires_grad = false}).requires_grad());
  // Along a dim, unique compares whole slices: columns [0.5, -1], [2, 3], [2, 0.5].
  expect_doubles_near(ember::unique(x.detach(), 1).values, {0.5, 2, 2, -1, 0.5, 3}, "unique dim 1");
  expect_doubles_near(u.counts, {1, 1, 1}, "unique_consecutive dim 1 counts");
}

// The ops whose output size depends on the data read the device, as nonzero does: inside a
// captured step that read is refused, naming the op the user called, and nothing is captured.
TEST(ShapeVocabularyCuda, DataDependentOpsAreRefusedInsideACapturedStep) {
  SKIP_WITHOUT_CUDA();
  const std::vector<std::pair<std::string, std::function<void(const Tensor&)>>> ops = {
      {"unique", [](const Tensor& x) { (void)ember::unique(x); }},
      {"bincount", [](const Tensor& x) { (void)ember::bincount(x.to(DType::i64)); }},
      {"mode", [](const Tensor& x) { (void)ember::mode(x); }},
      {"histc", [](const Tensor& x) { (void)ember::histc(x, 4); }},
      {"masked_scatter",
       [](const Tensor& x) { (void)ember::masked_scatter(x, ember::gt(x, 1.0), x); }}};
  for (const auto& [op, run] : ops) {
    ember::train::CapturedStep step(
        [&](const std::vector<Tensor>& in) {
          run(in[0]);
          return std::vector<Tensor>{in[0] * 2.0};
        },
        {.warmup = 0});
    const std::string m = error_of([&] { step({ember::arange(4)}); }, op);
    EXPECT_NE(m.find(op + ":"), std::string::npos) << m;  // the step may add its own context
    EXPECT_NE(m.find("inside a captured step"), std::string::npos) << m;
    EXPECT_EQ(step.graph_count(), 0) << op;
  }
}

}  // namespace
