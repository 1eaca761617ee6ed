// tests/test_nn_vocabulary.cpp — issue 32's nn functional ops and losses
// (include/ember/ops_nn.hpp) beyond the op driver's cases (tests/test_op_cases_nn.cpp): bad
// input refused with an error naming the op, edge cases (empty, saturated, zero vectors,
// clamped variances), the modules (options, PyTorch's printed form, forward with indices) and
// the loss modules. Expected values are PyTorch 1.13's, computed with /usr/bin/python3.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ember/autocast.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/distance.hpp"
#include "ember/nn/loss.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/pool3d.hpp"
#include "ember/ops_nn.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using ember::DType;
using ember::Reduction;
using ember::Shape;
using ember::Size2d;
using ember::Size3d;
using ember::Tensor;
using ember::test_util::error_of;
using ember::test_util::expect_op_error;
using ember_test::doubles;
using ember_test::f64;
using ember_test::i64;
namespace nn = ember::nn;

// ---- bad input

TEST(NnVocabulary, LossesRefuseBadInput) {
  const Tensor x = ember::randn({3, 4}, {.dtype = DType::f64});
  expect_op_error(error_of([&] {
                    ember::multilabel_margin_loss(x, i64(std::vector<int64_t>(12, 4), {3, 4}));
                  }),
                  "multilabel_margin_loss", "target 4 at position 0");
  expect_op_error(error_of([&] {
                    ember::multilabel_margin_loss(x, i64({0, 1, 2}, {3}));
                  }),
                  "multilabel_margin_loss", "expected equal shapes");
  expect_op_error(error_of([&] {
                    ember::multi_margin_loss(x, i64({0, 1, 2}, {3}), 3);
                  }),
                  "multi_margin_loss", "p 3 (expected 1 or 2)");
  expect_op_error(error_of([&] {
                    ember::multi_margin_loss(x, i64({0, 1, 4}, {3}));
                  }),
                  "multi_margin_loss", "target 4 at position 2 is out of range");
  expect_op_error(error_of([&] {
                    ember::multi_margin_loss(x, i64({0, 1, 2}, {3}), 1, 1.0,
                                             ember::ones({3}, {.dtype = DType::f64}));
                  }),
                  "multi_margin_loss", "expected one weight per class: [4]");
  expect_op_error(
      error_of([&] { ember::soft_margin_loss(x, ember::ones({4}, {.dtype = DType::f64})); }),
      "soft_margin_loss", "expected equal shapes");
  expect_op_error(error_of([&] {
                    ember::gaussian_nll_loss(x, x, -ember::ones({3, 4}, {.dtype = DType::f64}));
                  }),
                  "gaussian_nll_loss", "var has negative entries");
  expect_op_error(
      error_of([&] { ember::gaussian_nll_loss(x, x, ember::ones({4}, {.dtype = DType::f64})); }),
      "gaussian_nll_loss", "var shape [4] for input shape [3, 4]");
  expect_op_error(
      error_of([&] { ember::triplet_margin_with_distance_loss(x, x, x, nullptr, 0.0); }),
      "triplet_margin_with_distance_loss", "margin 0 (expected margin > 0)");
  expect_op_error(
      error_of([&] { ember::triplet_margin_with_distance_loss(x, x, x.reshape({12})); }),
      "triplet_margin_with_distance_loss", "expected the same number of dims");
  expect_op_error(error_of([&] { ember::hinge_embedding_loss(x, x, 1.0, Reduction::batchmean); }),
                  "hinge_embedding_loss", "batchmean");
  // A dtype the catalogue does not list is refused before anything runs.
  expect_op_error(error_of([&] { ember::soft_margin_loss(x.to(DType::i64), x.to(DType::i64)); }),
                  "soft_margin_loss", "unsupported dtype i64");
}

TEST(NnVocabulary, DistancesRefuseBadInput) {
  const Tensor a = ember::randn({3, 4}, {.dtype = DType::f64});
  expect_op_error(error_of([&] { ember::cosine_similarity(a, a, 2); }), "cosine_similarity",
                  "dim 2 for inputs of shape [3, 4]");
  expect_op_error(error_of([&] {
                    ember::cosine_similarity(a, ember::randn({2, 4}, {.dtype = DType::f64}));
                  }),
                  "cosine_similarity", "[3, 4]");
  expect_op_error(error_of([&] { ember::pairwise_distance(a, a, -1.0); }), "pairwise_distance",
                  "p -1 (expected p >= 0)");
  expect_op_error(error_of([&] {
                    ember::pdist(a.reshape({1, 3, 4}));
                  }),
                  "pdist", "expected a 2-D [N, M] set of rows");
  expect_op_error(error_of([&] { ember::pdist(a, -2.0); }), "pdist", "p -2 (expected p >= 0)");
}

TEST(NnVocabulary, PoolsRefuseBadInput) {
  const Tensor x = ember::randn({1, 2, 4, 4, 4}, {.dtype = DType::f64});
  expect_op_error(error_of([&] {
                    ember::max_pool3d(x.reshape({2, 4, 4, 4, 1, 1}), 2);
                  }),
                  "max_pool3d", "expected 5-D [N, C, D, H, W] or 4-D [C, D, H, W]");
  expect_op_error(error_of([&] { ember::max_pool3d(x, 2, std::nullopt, 2); }), "max_pool3d",
                  "padding (2, 2, 2) (expected 0 <= padding <= half the kernel size (2, 2, 2))");
  expect_op_error(error_of([&] { ember::max_pool3d(x, 5); }), "max_pool3d",
                  "output size 0 is too small");
  expect_op_error(error_of([&] { ember::avg_pool3d(x, 2, std::nullopt, 0, false, true, 0); }),
                  "avg_pool3d", "divisor_override 0");
  expect_op_error(error_of([&] { ember::adaptive_avg_pool3d(x, Size3d(0, 1, 1)); }),
                  "adaptive_avg_pool3d", "expected every entry >= 1");
  expect_op_error(error_of([&] {
                    ember::lp_pool2d(x.reshape({4, 4, 8}), 0.0, 2);
                  }),
                  "lp_pool2d", "norm_type 0 (expected a finite power > 0)");
  auto [y, idx] = ember::max_pool3d_with_indices(x, 2);
  expect_op_error(error_of([&] { ember::max_unpool3d(y, idx + 100, 2); }), "max_unpool3d",
                  "is out of range (expected indices in [0, 64)");
  expect_op_error(error_of([&] {
                    ember::max_unpool3d(y, idx.reshape({2, 2, 2, 2}), 2);
                  }),
                  "max_unpool3d", "indices shape [2, 2, 2, 2]");
  expect_op_error(error_of([&] { ember::max_unpool3d(y, idx, 2, std::nullopt, 0, Size3d(9)); }),
                  "max_unpool3d", "output_size (9, 9, 9)");
  expect_op_error(
      error_of([&] {
        ember::max_unpool2d(y.reshape({2, 2, 2, 2}), idx.to(DType::f64).reshape({2, 2, 2, 2}), 2);
      }),
      "max_unpool2d", "");
}

TEST(NnVocabulary, ChannelAndGridOpsRefuseBadInput) {
  const Tensor x = ember::randn({2, 6, 3}, {.dtype = DType::f64});
  expect_op_error(error_of([&] { ember::channel_shuffle(x, 4); }), "channel_shuffle",
                  "6 channels do not split into 4 groups");
  expect_op_error(error_of([&] {
                    ember::channel_shuffle(x.reshape({12, 3}), 2);
                  }),
                  "channel_shuffle", "expected at least 3 dims");
  expect_op_error(error_of([&] {
                    ember::local_response_norm(x.reshape({12, 3}), 2);
                  }),
                  "local_response_norm", "expected at least 3 dims");
  expect_op_error(error_of([&] { ember::local_response_norm(x, 0); }), "local_response_norm",
                  "size 0 (expected size >= 1)");
  const Tensor theta = ember::randn({2, 2, 3}, {.dtype = DType::f64});
  expect_op_error(error_of([&] {
                    ember::affine_grid(theta, {2, 1, 4});
                  }),
                  "affine_grid", "expected [N, C, H, W] or [N, C, D, H, W]");
  expect_op_error(error_of([&] {
                    ember::affine_grid(theta, {3, 1, 4, 4});
                  }),
                  "affine_grid",
                  "theta shape [2, 2, 3] for size [3, 1, 4, 4] (expected [3, 2, 3])");
  expect_op_error(error_of([&] {
                    ember::affine_grid(theta, {2, 1, 2, 4, 4});
                  }),
                  "affine_grid", "(expected [2, 3, 4])");
}

// ---- edge cases (values from PyTorch 1.13)

TEST(NnVocabulary, LossEdgeCases) {
  // No labels at all (a -1 first): nothing to compare, loss 0.
  const Tensor x = f64({0.5, -1.0, 2.0}, {1, 3});
  EXPECT_EQ(doubles(ember::multilabel_margin_loss(x, i64({-1, 0, 1}, {1, 3}))),
            std::vector<double>{0.0});
  // Every class a label: no non-label to compare with either.
  EXPECT_EQ(doubles(ember::multilabel_margin_loss(x, i64({2, 0, 1}, {1, 3}))),
            std::vector<double>{0.0});
  // A saturated soft margin stays finite: log(1 + e^1000) = 1000.
  EXPECT_DOUBLE_EQ(doubles(ember::soft_margin_loss(f64({-1000.0}, {1}), f64({1.0}, {1})))[0],
                   1000.0);
  // var 0 is clamped to eps (finite), and the gradient still reaches var (as PyTorch's).
  Tensor var = f64({0.0, 2.0}, {2}).requires_grad_(true);
  Tensor l = ember::gaussian_nll_loss(f64({1.0, 1.0}, {2}), f64({0.0, 0.0}, {2}), var, false, 1e-6,
                                      Reduction::sum);
  // 0.5·(log 1e-6 + 1/1e-6) + 0.5·(log 2 + 1/2)
  EXPECT_NEAR(l.item<double>(), 0.5 * (std::log(1e-6) + 1e6) + 0.5 * (std::log(2.0) + 0.5), 1e-6);
  l.backward();
  const std::vector<double> g = doubles(var.grad());
  EXPECT_NEAR(g[0], 0.5 * (1.0 / 1e-6 - 1.0 / 1e-12), 1.0);  // the clamped value's derivative
  EXPECT_NEAR(g[1], 0.5 * (0.5 - 0.25), 1e-12);
  // Target values other than ±1 get both hinge terms, as PyTorch's where-form.
  EXPECT_NEAR(doubles(ember::hinge_embedding_loss(f64({0.25}, {1}), f64({0.0}, {1}), 1.0))[0],
              0.25 + 0.75, 1e-12);
}

// The existing losses the issue asks about: cross_entropy with probability targets, label
// smoothing (and class weights) and reduction none, as torch 1.13.
TEST(NnVocabulary, CrossEntropySoftTargetsWithSmoothing) {
  const Tensor x = f64({0.5, -1.0, 2.0, 0.1, 0.2, -0.3}, {2, 3});
  const Tensor t = f64({0.2, 0.3, 0.5, 1.0, 0.0, 0.0}, {2, 3});
  std::vector<double> got =
      doubles(ember::cross_entropy(x, t, {.reduction = Reduction::none, .label_smoothing = 0.1}));
  EXPECT_NEAR(got[0], 1.471311296657157, 1e-12);
  EXPECT_NEAR(got[1], 1.0308276555532594, 1e-12);
  got = doubles(ember::cross_entropy(
      x, t,
      {.reduction = Reduction::none, .label_smoothing = 0.2, .weight = f64({1.0, 2.0, 0.5}, {3})}));
  EXPECT_NEAR(got[0], 2.439007458412015, 1e-12);
  EXPECT_NEAR(got[1], 1.0548552440717012, 1e-12);
}

TEST(NnVocabulary, DistanceEdgeCases) {
  // A zero vector: the clamped norm gives 0, never NaN.
  EXPECT_EQ(doubles(ember::cosine_similarity(ember::zeros({3}, {.dtype = DType::f64}),
                                             ember::ones({3}, {.dtype = DType::f64}), 0)),
            std::vector<double>{0.0});
  // One row has no pairs; two rows one.
  EXPECT_EQ(ember::pdist(ember::ones({1, 3}, {.dtype = DType::f64})).shape(), Shape{0});
  EXPECT_NEAR(doubles(ember::pdist(f64({0, 0, 3, 4}, {2, 2})))[0], 5.0, 1e-12);
  // 1-D inputs: a 0-d distance (torch 2.x).
  EXPECT_EQ(ember::pairwise_distance(f64({0, 0}, {2}), f64({3, 4}, {2})).shape(), Shape{});
}

TEST(NnVocabulary, PoolAndChannelEdgeCases) {
  // Unpooling the pool's own indices puts every max back where it was (positive values: the
  // zeros around them must not win a window).
  const Tensor x = ember::abs(ember::randn({2, 3, 4, 6, 4}, {.dtype = DType::f64})) + 0.1;
  auto [y, idx] = ember::max_pool3d_with_indices(x, 2);
  const Tensor back = ember::max_unpool3d(y, idx, 2);
  EXPECT_EQ(back.shape(), x.shape());
  EXPECT_EQ(doubles(ember::max_pool3d(back, 2)), doubles(y));
  // The global adaptive pools are the mean and the max.
  EXPECT_NEAR(doubles(ember::adaptive_avg_pool3d(x, 1).sum())[0], doubles(x.sum())[0] / 96.0, 1e-9);
  EXPECT_EQ(doubles(ember::adaptive_max_pool3d(x, 1).flatten())[0],
            doubles(ember::max(x.select(0, 0).select(0, 0)))[0]);
  // LPPool with p = 1 over positive values is a sum pool.
  const Tensor p = ember::abs(x.select(0, 0)) + 0.5;  // unbatched [C, D, H, W]
  EXPECT_NEAR(doubles(ember::lp_pool3d(p, 1.0, 2).sum())[0], doubles(p.sum())[0], 1e-9);
  // Empty input: local_response_norm returns it as it is.
  EXPECT_EQ(ember::local_response_norm(ember::zeros({0, 3, 4}, {.dtype = DType::f64}), 3).shape(),
            (Shape{0, 3, 4}));
  // channel_shuffle with one group is the identity; on integers too.
  const Tensor ints = ember::arange(12.0, {.dtype = DType::i64}).reshape({1, 6, 2});
  EXPECT_EQ(ints.to_vector<int64_t>(), ember::channel_shuffle(ints, 1).to_vector<int64_t>());
  EXPECT_EQ(ember::channel_shuffle(ints, 2).reshape({12}).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
  // affine_grid of the identity over one pixel: the centre (0, 0).
  const Tensor eye = f64({1, 0, 0, 0, 1, 0}, {1, 2, 3});
  EXPECT_EQ(doubles(ember::affine_grid(eye, {1, 1, 1, 1})), (std::vector<double>{0.0, 0.0}));
}

// ---- modules

TEST(NnVocabulary, ModulesPrintAsPyTorch) {
  EXPECT_EQ(nn::MaxPool3d(nn::MaxPool3dOptions{.kernel_size = 2})->extra_repr(),
            "kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False");
  EXPECT_EQ(nn::MaxPool3d(
                nn::MaxPool3dOptions{.kernel_size = {1, 2, 2}, .stride = 1, .padding = {0, 1, 1}})
                ->extra_repr(),
            "kernel_size=(1, 2, 2), stride=1, padding=(0, 1, 1), dilation=1, ceil_mode=False");
  EXPECT_EQ(nn::AvgPool3d(nn::AvgPool3dOptions{.kernel_size = 3, .stride = 2, .padding = 1})
                ->extra_repr(),
            "kernel_size=3, stride=2, padding=1");
  EXPECT_EQ(nn::AdaptiveAvgPool3d(Size3d(1, 2, 3))->extra_repr(), "output_size=(1, 2, 3)");
  EXPECT_EQ(nn::AdaptiveMaxPool3d(Size3d(2))->extra_repr(), "output_size=2");
  EXPECT_EQ(nn::MaxUnpool1d(nn::MaxUnpool1dOptions{.kernel_size = 2})->extra_repr(),
            "kernel_size=(2,), stride=(2,), padding=(0,)");
  EXPECT_EQ(nn::MaxUnpool2d(nn::MaxUnpool2dOptions{.kernel_size = 2, .stride = 1})->extra_repr(),
            "kernel_size=(2, 2), stride=(1, 1), padding=(0, 0)");
  EXPECT_EQ(nn::MaxUnpool3d(nn::MaxUnpool3dOptions{.kernel_size = {1, 2, 2}})->extra_repr(),
            "kernel_size=(1, 2, 2), stride=(1, 2, 2), padding=(0, 0, 0)");
  EXPECT_EQ(
      nn::LPPool2d(nn::LPPool2dOptions{
                       .norm_type = 2.5, .kernel_size = {2, 3}, .stride = 1, .ceil_mode = true})
          ->extra_repr(),
      "norm_type=2.5, kernel_size=(2, 3), stride=1, ceil_mode=True");
  EXPECT_EQ(nn::LPPool1d(nn::LPPool1dOptions{.kernel_size = 3})->extra_repr(),
            "norm_type=2.0, kernel_size=3, stride=None, ceil_mode=False");
  EXPECT_EQ(nn::ChannelShuffle(2)->extra_repr(), "groups=2");
  EXPECT_EQ(nn::LocalResponseNorm(3)->extra_repr(), "3, alpha=0.0001, beta=0.75, k=1.0");
  EXPECT_EQ(nn::CosineSimilarity()->extra_repr(), "");
  EXPECT_EQ(nn::PairwiseDistance()->extra_repr(), "");
}

TEST(NnVocabulary, ModulesForward) {
  const Tensor x = ember::randn({1, 2, 4, 4, 4}, {.dtype = DType::f64});
  nn::MaxPool3d pool(nn::MaxPool3dOptions{.kernel_size = 2});
  auto [y, idx] = pool->forward_with_indices(x);
  EXPECT_EQ(doubles(pool(x)), doubles(ember::max_pool3d(x, 2)));
  nn::MaxUnpool3d unpool(nn::MaxUnpool3dOptions{.kernel_size = 2});
  EXPECT_EQ(doubles(unpool->forward(y, idx)), doubles(ember::max_unpool3d(y, idx, 2)));
  expect_op_error(error_of([&] { unpool(y); }), "MaxUnpool3d", "forward needs the pool's indices");
  nn::AdaptiveMaxPool3d amax(Size3d(2, 1, 3));
  EXPECT_EQ(doubles(amax->forward_with_indices(x).second),
            doubles(ember::adaptive_max_pool3d_with_indices(x, Size3d(2, 1, 3)).second));
  nn::LPPool3d lp(nn::LPPool3dOptions{.norm_type = 2.0, .kernel_size = 2});
  EXPECT_EQ(doubles(lp(x)), doubles(ember::lp_pool3d(x, 2.0, 2)));
  const Tensor a = ember::randn({3, 4}, {.dtype = DType::f64});
  const Tensor b = ember::randn({3, 4}, {.dtype = DType::f64});
  nn::CosineSimilarity cos;
  EXPECT_EQ(doubles(cos->forward(a, b)), doubles(ember::cosine_similarity(a, b)));
  expect_op_error(error_of([&] { cos(a); }), "CosineSimilarity", "forward needs two inputs");
  nn::PairwiseDistance dist(nn::PairwiseDistanceOptions{.p = 1.0});
  EXPECT_EQ(doubles(dist->forward(a, b)), doubles(ember::pairwise_distance(a, b, 1.0)));
  nn::LocalResponseNorm lrn(2);
  EXPECT_EQ(doubles(lrn(x)), doubles(ember::local_response_norm(x, 2)));
  nn::ChannelShuffle shuffle(2);
  EXPECT_EQ(doubles(shuffle(x)), doubles(ember::channel_shuffle(x, 2)));
  // Bad options are refused when the module is made.
  expect_op_error(error_of([] { nn::MaxPool3d(nn::MaxPool3dOptions{.kernel_size = 0}); }),
                  "MaxPool3d", "kernel_size 0");
  expect_op_error(error_of([] { nn::LPPool1d(nn::LPPool1dOptions{.norm_type = -1.0}); }),
                  "LPPool1d", "norm_type -1");
  expect_op_error(error_of([] { nn::ChannelShuffle(0); }), "ChannelShuffle", "groups");
}

TEST(NnVocabulary, LossModules) {
  const Tensor x = ember::randn({4, 5}, {.dtype = DType::f64});
  const Tensor y = i64({0, 3, 4, 1}, {4});
  const Tensor w = ember::rand({5}, {.dtype = DType::f64});
  nn::MultiMarginLoss mm({.p = 2, .margin = 0.5, .weight = w, .reduction = Reduction::sum});
  EXPECT_EQ(doubles(mm(x, y)), doubles(ember::multi_margin_loss(x, y, 2, 0.5, w, Reduction::sum)));
  const Tensor t = ember::rand({4, 5}, {.dtype = DType::f64});
  nn::MultiLabelSoftMarginLoss msm({.weight = w});
  EXPECT_EQ(doubles(msm(x, t)), doubles(ember::multilabel_soft_margin_loss(x, t, w)));
  nn::SoftMarginLoss sm({.reduction = Reduction::none});
  EXPECT_EQ(sm(x, ember::sign(t - 0.5)).shape(), x.shape());
  nn::HingeEmbeddingLoss he({.margin = 2.0});
  EXPECT_EQ(doubles(he(x, ember::sign(t - 0.5))),
            doubles(ember::hinge_embedding_loss(x, ember::sign(t - 0.5), 2.0)));
  nn::GaussianNLLLoss g({.full = true});
  EXPECT_EQ(doubles(g(x, t, t + 0.1)), doubles(ember::gaussian_nll_loss(x, t, t + 0.1, true)));
  nn::TripletMarginWithDistanceLoss tl(
      {.distance_function = [](const Tensor& a,
                               const Tensor& b) { return ember::pairwise_distance(a, b, 1.0); },
       .swap = true});
  EXPECT_EQ(
      doubles(tl(x, t, x * 0.5)),
      doubles(ember::triplet_margin_with_distance_loss(
          x, t, x * 0.5,
          [](const Tensor& a, const Tensor& b) { return ember::pairwise_distance(a, b, 1.0); }, 1.0,
          true)));
  nn::MultiLabelMarginLoss ml;
  EXPECT_EQ(
      ml(x, i64({0, 1, -1, 0, 0, 2, -1, 0, 0, 0, 4, 3, 2, 1, 0, -1, 0, 0, 0, 0}, {4, 5})).shape(),
      Shape{});
}

// ---- second batch: grid_sample, fractional pools, conv_transpose3d, bicubic

TEST(NnVocabulary, SamplingAndTransposedConvRefuseBadInput) {
  const Tensor x = ember::randn({1, 2, 4, 5}, {.dtype = DType::f64});
  const Tensor grid = ember::rand({1, 3, 3, 2}, {.dtype = DType::f64});
  expect_op_error(error_of([&] { ember::grid_sample(x, grid, "area"); }), "grid_sample",
                  "mode 'area' (expected \"bilinear\", \"nearest\" or \"bicubic\")");
  expect_op_error(error_of([&] {
                    ember::grid_sample(x.unsqueeze(2),
                                       ember::rand({1, 2, 2, 2, 3}, {.dtype = DType::f64}),
                                       "bicubic");
                  }),
                  "grid_sample", "mode 'bicubic' needs 4-D input");
  expect_op_error(error_of([&] { ember::grid_sample(x, grid, "bilinear", "mirror"); }),
                  "grid_sample", "padding_mode 'mirror'");
  expect_op_error(error_of([&] { ember::grid_sample(x, grid.narrow(3, 0, 1)); }), "grid_sample",
                  "grid shape [1, 3, 3, 1] for input shape [1, 2, 4, 5]");
  expect_op_error(error_of([&] {
                    ember::grid_sample(x.reshape({2, 4, 5}), grid);
                  }),
                  "grid_sample", "expected 4-D [N, C, H, W] or 5-D");
  expect_op_error(error_of([&] {
                    ember::fractional_max_pool2d(x, 2,
                                                 {.output_size = std::vector<int64_t>{2, 2},
                                                  .output_ratio = std::vector<double>{0.5, 0.5}});
                  }),
                  "fractional_max_pool2d", "exactly one of output_size and output_ratio");
  expect_op_error(error_of([&] {
                    ember::fractional_max_pool2d(x, 2, {.output_size = std::vector<int64_t>{4, 4}});
                  }),
                  "fractional_max_pool2d", "output + kernel - 1 <= input");
  expect_op_error(error_of([&] {
                    ember::fractional_max_pool2d(
                        x, 2,
                        {.output_size = std::vector<int64_t>{2, 2},
                         .random_samples = ember::rand({1, 2, 3}, {.dtype = DType::f64})});
                  }),
                  "fractional_max_pool2d", "random_samples shape [1, 2, 3] (expected [1, 2, 2])");
  const Tensor v = ember::randn({1, 2, 3, 3, 3}, {.dtype = DType::f64});
  expect_op_error(
      error_of([&] {
        ember::fractional_max_pool3d(v, 2, {.output_size = std::vector<int64_t>{2, 2, 2}});
      }),
      "fractional_max_pool3d", "output + kernel - 1 < input");
  const Tensor w = ember::randn({2, 3, 2, 2, 2}, {.dtype = DType::f64});
  expect_op_error(error_of([&] { ember::conv_transpose3d(v, w.narrow(0, 0, 1)); }),
                  "conv_transpose3d", "weight shape [1, 3, 2, 2, 2]");
  expect_op_error(error_of([&] { ember::conv_transpose3d(v, w, Tensor(), 1, 0, Size3d(1, 0, 0)); }),
                  "conv_transpose3d", "output_padding (1, 0, 0)");
  expect_op_error(
      error_of([&] { ember::conv_transpose3d(v, w, ember::zeros({2}, {.dtype = DType::f64})); }),
      "conv_transpose3d", "bias shape [2] (expected [3])");
  expect_op_error(error_of([&] {
                    ember::interpolate(v, {.size = {4, 4, 4}, .mode = "bicubic"});
                  }),
                  "interpolate", "mode 'bicubic' needs 4-D input");
}

TEST(NnVocabulary, SamplingEdgeCases) {
  // The identity grid with align_corners samples every pixel centre: grid_sample returns its
  // input, in both modes and for 2-D and 3-D inputs.
  const Tensor x = ember::randn({2, 3, 4, 5}, {.dtype = DType::f64});
  const Tensor eye = f64({1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0}, {2, 2, 3});
  const Tensor g = ember::affine_grid(eye, x.shape(), true);
  for (const char* mode : {"bilinear", "nearest"}) {
    const std::vector<double> got = doubles(ember::grid_sample(x, g, mode, "zeros", true));
    const std::vector<double> want = doubles(x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << mode << i;
  }
  const Tensor v = ember::randn({1, 2, 3, 4, 2}, {.dtype = DType::f64});
  const Tensor eye3 = f64({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, {1, 3, 4});
  const std::vector<double> got = doubles(
      ember::grid_sample(v, ember::affine_grid(eye3, v.shape(), true), "bilinear", "border", true));
  const std::vector<double> want = doubles(v);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  // Points far outside: zeros padding reads 0, border the edge pixel.
  const Tensor far = f64({5.0, 5.0}, {1, 1, 1, 2});
  const Tensor img = f64({1, 2, 3, 4}, {1, 1, 2, 2});
  EXPECT_EQ(doubles(ember::grid_sample(img, far)), std::vector<double>{0.0});
  EXPECT_EQ(doubles(ember::grid_sample(img, far, "bilinear", "border")), std::vector<double>{4.0});
  // Fractional pooling draws its offsets from ember's generator: the same seed, the same result;
  // the indices point at the values.
  const Tensor p = ember::randn({2, 3, 9, 8}, {.dtype = DType::f64});
  ember::manual_seed(7);
  auto [a, ia] =
      ember::fractional_max_pool2d(p, 2, {.output_ratio = std::vector<double>{0.5, 0.5}});
  ember::manual_seed(7);
  auto [b, ib] =
      ember::fractional_max_pool2d(p, 2, {.output_ratio = std::vector<double>{0.5, 0.5}});
  EXPECT_EQ(a.shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(doubles(a), doubles(b));
  EXPECT_EQ(doubles(a), doubles(ember::gather(p.reshape({2, 3, 72}), 2, ia.reshape({2, 3, 16}))));
  // Bicubic to the same size is a copy; an unbatched conv_transpose3d is the batched one's row.
  EXPECT_EQ(doubles(ember::interpolate(x, {.size = {4, 5}, .mode = "bicubic"})), doubles(x));
  const Tensor w = ember::randn({2, 3, 2, 2, 2}, {.dtype = DType::f64});
  EXPECT_EQ(doubles(ember::conv_transpose3d(v.select(0, 0), w, Tensor(), 2)),
            doubles(ember::conv_transpose3d(v, w, Tensor(), 2).select(0, 0)));
}

TEST(NnVocabulary, SecondBatchModules) {
  EXPECT_EQ(nn::ConvTranspose3d(nn::ConvTranspose3dOptions{.in_channels = 2,
                                                           .out_channels = 4,
                                                           .kernel_size = 2,
                                                           .stride = 2,
                                                           .padding = 1,
                                                           .output_padding = 1})
                ->extra_repr(),
            "2, 4, kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(1, 1, 1), "
            "output_padding=(1, 1, 1)");
  nn::ConvTranspose3d up(nn::ConvTranspose3dOptions{.in_channels = 4,
                                                    .out_channels = 2,
                                                    .kernel_size = {2, 1, 2},
                                                    .groups = 2,
                                                    .bias = false,
                                                    .dilation = {2, 1, 1}});
  EXPECT_EQ(up->extra_repr(),
            "4, 2, kernel_size=(2, 1, 2), stride=(1, 1, 1), dilation=(2, 1, 1), groups=2, "
            "bias=False");
  EXPECT_EQ(up->named_parameters().size(), 1u);
  EXPECT_EQ(up->named_parameters()[0].second.shape(), (Shape{4, 1, 2, 1, 2}));
  const Tensor x = ember::randn({1, 4, 2, 3, 2});
  EXPECT_EQ(up(x).shape(), (Shape{1, 2, 4, 3, 3}));
  nn::FractionalMaxPool2d frac(
      nn::FractionalMaxPool2dOptions{.kernel_size = 2, .output_size = Size2d(3, 2)});
  EXPECT_EQ(frac->extra_repr(), "");
  EXPECT_EQ(frac(ember::randn({2, 5, 5})).shape(), (Shape{2, 3, 2}));
  nn::FractionalMaxPool3d frac3(
      nn::FractionalMaxPool3dOptions{.kernel_size = 2, .output_ratio = {0.5}});
  EXPECT_EQ(frac3(ember::randn({1, 1, 6, 6, 8})).shape(), (Shape{1, 1, 3, 3, 4}));
  expect_op_error(error_of([] { nn::FractionalMaxPool2d(nn::FractionalMaxPool2dOptions{}); }),
                  "FractionalMaxPool2d", "exactly one of output_size and output_ratio");
}

// Under autocast the losses and distances run in f32 (the policy table, docs/mixed_precision.md):
// bf16 inputs are widened, so an f32-only composite takes them, as PyTorch's autocast does.
TEST(NnVocabulary, LossesRunInF32UnderAutocast) {
  const Tensor x = ember::randn({4, 5}).to(DType::bf16);
  const Tensor y = ember::randn({4, 5}).to(DType::bf16);
  const Tensor labels = i64({0, 3, 4, 1}, {4});
  ember::AutocastGuard autocast(DType::bf16);
  EXPECT_EQ(ember::multi_margin_loss(x, labels).dtype(), DType::f32);
  EXPECT_EQ(ember::soft_margin_loss(x, ember::sign(y)).dtype(), DType::f32);
  EXPECT_EQ(ember::gaussian_nll_loss(x, y, ember::abs(y) + 0.5).dtype(), DType::f32);
  EXPECT_EQ(ember::cosine_similarity(x, y).dtype(), DType::f32);
  EXPECT_EQ(ember::pdist(x).dtype(), DType::f32);
  EXPECT_EQ(ember::triplet_margin_with_distance_loss(x, y, x * 0.5).dtype(), DType::f32);
}

}  // namespace
