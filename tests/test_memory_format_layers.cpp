// tests/test_memory_format_layers.cpp — channels_last through the layers beyond convolutions,
// BatchNorm and the 2-D pools (tests/test_memory_format.cpp): interpolate, the adaptive 2-D
// pools at sizes that do not divide the plane, the 3-D pools, GroupNorm, InstanceNorm and the
// transposed convolutions as modules (Note [Memory formats] in src/core/tensor.cpp). Each case
// runs the same computation on an NCHW copy and expects the same values and gradients, and a
// channels_last result.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/norm.hpp"
#include "fixtures.hpp"

namespace ember {
namespace memory_format_layers {
namespace {

using ember_test::expect_close;
using ember_test::expect_equal;

constexpr MemoryFormat kLast = MemoryFormat::channels_last;
constexpr MemoryFormat kLast3d = MemoryFormat::channels_last_3d;

Tensor seeded(const Shape& shape, uint64_t seed) {
  manual_seed(seed);
  return randn(shape);
}

// The module's parameter `name` (the tensor itself: writes reach the module).
Tensor param(const nn::ModuleImpl& m, const std::string& name) {
  for (const auto& [n, t] : m.named_parameters())
    if (n == name) return t;
  ADD_FAILURE() << "no parameter " << name;
  return Tensor();
}

// f(x) on a channels_last copy and on an NCHW copy of x: the outputs and the input gradients
// (for a fixed weighting of the output) within tol, and the channels_last run's output in
// `format`.
using LayerFn = std::function<Tensor(const Tensor&)>;

void expect_format_kept(const LayerFn& f, const Tensor& x, MemoryFormat format, double tol,
                        const std::string& what) {
  Tensor plain = x.contiguous().detach(), last = x.contiguous(format).detach();
  plain.requires_grad_(true);
  last.requires_grad_(true);
  const Tensor yp = f(plain), yl = f(last);
  EXPECT_TRUE(yl.is_contiguous(format)) << what << ": output strides " << yl.strides().to_string()
                                        << " for shape " << yl.shape().to_string();
  expect_close(yl, yp, tol, tol, what + " output");
  const Tensor weights = seeded(yp.shape(), 99);
  (yp * weights).sum().backward();
  (yl * weights).sum().backward();
  expect_close(last.grad(), plain.grad(), tol, tol, what + " input gradient");
}

TEST(MemoryFormatLayers, InterpolateEveryModeKeepsChannelsLast) {
  const Tensor x = seeded({2, 3, 5, 7}, 1);
  struct Mode {
    InterpolateOptions options;
    std::string name;
  };
  const std::vector<Mode> modes = {
      {{.size = {9, 4}, .mode = "nearest"}, "nearest to (9, 4)"},
      {{.scale_factor = {1.5, 2.0}, .mode = "nearest-exact"}, "nearest-exact x(1.5, 2)"},
      {{.size = {8, 11}, .mode = "bilinear"}, "bilinear to (8, 11)"},
      {{.size = {3, 4}, .mode = "bilinear", .align_corners = true}, "bilinear aligned down"},
      {{.scale_factor = {2.0}, .mode = "bicubic"}, "bicubic x2"},
  };
  // The same index_selects and weighted sums per element in either layout: exact values; the
  // gradients' index_add sums the same terms in the same order.
  for (const Mode& m : modes)
    expect_format_kept([&](const Tensor& t) { return interpolate(t, m.options); }, x, kLast, 0.0,
                       m.name);
  expect_format_kept(
      [](const Tensor& t) {
        return interpolate(t, {.size = {4, 6, 3}, .mode = "trilinear"});
      },
      seeded({1, 2, 3, 4, 5}, 2), kLast3d, 0.0, "trilinear");
}

TEST(MemoryFormatLayers, InterpolateToTheSameSizeIsAChannelsLastCopy) {
  const Tensor x = seeded({1, 4, 3, 3}, 3).contiguous(kLast);
  const Tensor y = interpolate(x, {.size = {3, 3}, .mode = "bilinear"});
  EXPECT_FALSE(y.is_same(x));
  EXPECT_TRUE(y.is_contiguous(kLast));
  expect_equal(y, x, "copy");
}

TEST(MemoryFormatLayers, AdaptivePoolsAtUnevenSizes) {
  const Tensor x = seeded({2, 3, 7, 5}, 4);
  // avg: the window matrices over the NHWC rows; a GEMM's summation order, hence 1e-6.
  expect_format_kept([](const Tensor& t) { return adaptive_avg_pool2d(t, Size2d(3, 2)); }, x, kLast,
                     1e-6, "adaptive_avg_pool2d (3, 2)");
  expect_format_kept([](const Tensor& t) { return adaptive_avg_pool2d(t, Size2d(7, 3)); }, x, kLast,
                     1e-6, "adaptive_avg_pool2d (7, 3)");
  expect_format_kept([](const Tensor& t) { return adaptive_max_pool2d(t, Size2d(3, 2)); }, x, kLast,
                     0.0, "adaptive_max_pool2d (3, 2)");
  const auto [values, indices] =
      adaptive_max_pool2d_with_indices(x.contiguous(kLast), Size2d(4, 3));
  const auto [want_values, want_indices] = adaptive_max_pool2d_with_indices(x, Size2d(4, 3));
  EXPECT_TRUE(indices.is_contiguous(kLast));
  expect_equal(values, want_values, "values");
  expect_equal(indices, want_indices, "indices");
}

TEST(MemoryFormatLayers, ThreeDimensionalPoolsKeepChannelsLast3d) {
  const Tensor x = seeded({2, 3, 5, 6, 4}, 5);
  expect_format_kept([](const Tensor& t) { return max_pool3d(t, Size3d(2, 3, 2)); }, x, kLast3d,
                     0.0, "max_pool3d");
  expect_format_kept(
      [](const Tensor& t) { return avg_pool3d(t, Size3d(3, 2, 2), Size3d(2, 2, 1), Size3d(1)); }, x,
      kLast3d, 1e-6, "avg_pool3d");
  expect_format_kept([](const Tensor& t) { return adaptive_avg_pool3d(t, Size3d(2, 4, 3)); }, x,
                     kLast3d, 1e-6, "adaptive_avg_pool3d");
  expect_format_kept([](const Tensor& t) { return adaptive_max_pool3d(t, Size3d(3, 4, 3)); }, x,
                     kLast3d, 0.0, "adaptive_max_pool3d");
  const auto [v, i] = max_pool3d_with_indices(x.contiguous(kLast3d), Size3d(2));
  const auto [wv, wi] = max_pool3d_with_indices(x, Size3d(2));
  EXPECT_TRUE(i.is_contiguous(kLast3d));
  expect_equal(v, wv, "max_pool3d values");
  expect_equal(i, wi, "max_pool3d indices");
}

TEST(MemoryFormatLayers, GroupAndInstanceNormKeepChannelsLast) {
  nn::GroupNorm group(nn::GroupNormOptions{.num_groups = 2, .num_channels = 4});
  nn::InstanceNorm2d instance(
      nn::InstanceNormOptions{.num_features = 4, .affine = true, .track_running_stats = true});
  {
    NoGradGuard no_grad;
    param(*group, "weight").copy_(seeded({4}, 6));
    param(*group, "bias").copy_(seeded({4}, 7));
    param(*instance, "weight").copy_(seeded({4}, 8));
  }
  const Tensor x = seeded({2, 4, 3, 5}, 9);
  expect_format_kept([&](const Tensor& t) { return group(t); }, x, kLast, 1e-6, "GroupNorm");
  expect_format_kept([&](const Tensor& t) { return instance(t); }, x, kLast, 1e-6,
                     "InstanceNorm2d (training)");
  instance->eval();
  expect_format_kept([&](const Tensor& t) { return instance(t); }, x, kLast, 1e-6,
                     "InstanceNorm2d (eval, running statistics)");
}

TEST(MemoryFormatLayers, ConvTransposeModulesAfterModuleTo) {
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions{
      .in_channels = 4, .out_channels = 3, .kernel_size = 3, .stride = 2, .padding = 1});
  nn::ConvTranspose2d plain(nn::ConvTranspose2dOptions{
      .in_channels = 4, .out_channels = 3, .kernel_size = 3, .stride = 2, .padding = 1});
  {
    NoGradGuard no_grad;
    param(*plain, "weight").copy_(param(*up, "weight"));
    param(*plain, "bias").copy_(param(*up, "bias"));
  }
  up->to(kLast);
  EXPECT_TRUE(param(*up, "weight").is_contiguous(kLast));
  const Tensor x = seeded({2, 4, 5, 6}, 10);
  const Tensor y = up(x.contiguous(kLast));
  EXPECT_TRUE(y.is_contiguous(kLast));
  expect_close(y, plain(x), 1e-5, 1e-5, "ConvTranspose2d");
  y.sum().backward();
  plain(x).sum().backward();
  EXPECT_TRUE(param(*up, "weight").grad().is_contiguous(kLast));
  expect_close(param(*up, "weight").grad(), param(*plain, "weight").grad(), 1e-5, 1e-5,
               "weight gradient");
}

}  // namespace
}  // namespace memory_format_layers
}  // namespace ember
