// tests/test_layers_conv_nd.cpp — the convolution family beyond Conv2d: Conv1d,
// Conv3d, ConvTranspose1d/2d, the 1-D and adaptive pools, Upsample, PixelShuffle/Unshuffle,
// Unfold/Fold (modules), and their functional ops' edge cases.
//
// Tier 1 of the modules (against PyTorch runs: outputs, gradients, state_dict names, repr) is
// the layer fixture suite of tests/test_layers_conv_norm.cpp, which replays every case of
// tests/data/layer_fixtures.json, the cases of this family included (gen_layer_fixtures.py,
// section "convolution, pooling and upsampling modules"). The ops' three tiers run in
// tests/test_catalogue.cpp. Here: gradchecks of shapes the catalogue cases leave out
// (unbatched inputs, "same" paddings with even kernels, padding modes, adaptive windows that
// overlap), PyTorch's default initialisation, config round trips and checkpoints, error
// messages, and a small U-Net-like training step (CPU, and CUDA against the CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "ember/io/checkpoint.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim/sgd.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "layer_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file, the op names are the subject
using Inputs = std::vector<Tensor>;
using ember::test_util::expect_error;

using ember::test_util::data;
using ember::test_util::expect_gradcheck;

// ---- gradchecks beyond the catalogue cases

TEST(ConvNdGradcheck, ConvolutionsUnbatchedSameAndModes) {
  manual_seed(31);
  expect_gradcheck("conv1d unbatched",
                   [](const Inputs& x) { return conv1d(x[0], x[1], x[2], 2, 1); },
                   {data({3, 8}), data({2, 3, 3}, 0.5), data({2})});
  expect_gradcheck("conv2d same, even kernel, dilation",
                   [](const Inputs& x) {
                     return conv2d(x[0], x[1], Tensor(), 1, ConvPadding::same, {1, 2});
                   },
                   {data({1, 2, 5, 6}), data({3, 2, 2, 3}, 0.5)});
  expect_gradcheck("conv3d unbatched, stride",
                   [](const Inputs& x) {
                     return conv3d(x[0], x[1], x[2], {2, 1, 2}, 1);
                   },
                   {data({2, 3, 4, 4}), data({2, 2, 2, 2, 3}, 0.5), data({2})});
  expect_gradcheck("conv_transpose2d unbatched",
                   [](const Inputs& x) {
                     return conv_transpose2d(x[0], x[1], x[2], {2, 1}, 1);
                   },
                   {data({2, 3, 3}), data({2, 3, 3, 2}, 0.5), data({3})});
  expect_gradcheck(
      "conv_transpose1d dilation, output_padding",
      [](const Inputs& x) { return conv_transpose1d(x[0], x[1], Tensor(), 1, 1, 1, 1, 2); },
      {data({2, 2, 5}), data({2, 3, 3}, 0.5)});
  nn::Conv1d reflect(nn::Conv1dOptions{.in_channels = 2,
                                       .out_channels = 2,
                                       .kernel_size = 3,
                                       .padding = 2,
                                       .padding_mode = "reflect"});
  Tensor w = reflect->named_parameters()[0].second.detach().to(DType::f64);
  expect_gradcheck("reflect padding then conv1d",
                   [](const Inputs& x) {
                     return conv1d(pad(x[0], {2, 2}, "reflect"), x[1]);
                   },
                   {data({1, 2, 6}), w});
}

TEST(ConvNdGradcheck, PoolsAndResampling) {
  manual_seed(32);
  expect_gradcheck("adaptive_avg_pool2d overlapping windows",
                   [](const Inputs& x) {
                     return adaptive_avg_pool2d(x[0], {4, 3});
                   },
                   {data({1, 2, 5, 5})});
  expect_gradcheck("adaptive_avg_pool1d unbatched",
                   [](const Inputs& x) { return adaptive_avg_pool1d(x[0], 3); }, {data({2, 7})});
  expect_gradcheck(
      "interpolate bilinear down, align_corners",
      [](const Inputs& x) {
        return interpolate(x[0], {.size = {3, 4}, .mode = "bilinear", .align_corners = true});
      },
      {data({1, 2, 5, 7})});
  expect_gradcheck("interpolate nearest 3-D volume",
                   [](const Inputs& x) {
                     return interpolate(x[0], {.scale_factor = {2.0, 1.0, 1.5}});
                   },
                   {data({1, 1, 2, 3, 2})});
  expect_gradcheck("fold of unfold",
                   [](const Inputs& x) {
                     return col2im(im2col(x[0], 3, 1, 1, 2), {5, 4}, 3, 1, 1, 2);
                   },
                   {data({2, 2, 5, 4})});
}

// fold(unfold(x)) is x times the number of blocks covering each pixel (PyTorch's identity).
TEST(FoldUnfold, FoldOfUnfoldCountsBlocks) {
  Tensor x = randn({1, 2, 4, 5});
  Tensor ones = ember::ones({1, 2, 4, 5});
  Tensor counts = col2im(im2col(ones, {2, 3}), {4, 5}, {2, 3});
  ember_test::expect_close(col2im(im2col(x, {2, 3}), {4, 5}, {2, 3}), x * counts, 1e-6, 1e-6,
                           "fold(unfold(x))");
}

// Adaptive max pooling's indices point at the maximum of each window (h·W + w).
TEST(AdaptivePools, MaxIndicesPointAtTheMaximum) {
  Tensor x = randn({2, 3, 7, 6});
  auto [v, i] = adaptive_max_pool2d_with_indices(x, {3, 4});
  Tensor flat = x.reshape({2, 3, 42});
  Tensor picked = gather(flat, 2, i.reshape({2, 3, 12})).reshape({2, 3, 3, 4});
  ember_test::expect_equal(picked, v, "values at the indices");
  ember_test::expect_close(adaptive_max_pool2d(x, {7, 6}), x, 0, 0, "identity size");
  ember_test::expect_close(adaptive_avg_pool2d(x, 1), x.mean({2, 3}, true), 1e-6, 1e-6,
                           "global average");
}

// ---- modules: initialisation, configs, checkpoints

TEST(ConvNdModules, DefaultInitAndTransposedWeightLayout) {
  manual_seed(33);
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions{
      .in_channels = 8, .out_channels = 6, .kernel_size = 3, .stride = 2, .groups = 2});
  const nn::NamedTensors p = up->named_parameters();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].first, "weight");
  EXPECT_EQ(p[0].second.shape(), (Shape{8, 3, 3, 3}));  // [in, out/groups, kh, kw]
  EXPECT_EQ(p[1].second.shape(), (Shape{6}));
  // PyTorch's bound: 1/√fan_in with fan_in = weight.size(1)·kh·kw = 27.
  const double bound = 1.0 / std::sqrt(27.0);
  for (const auto& [name, t] : p) {
    const std::vector<float> v = t.to_vector<float>();
    for (float e : v) EXPECT_LE(std::abs(e), bound + 1e-6) << name;
  }
  nn::Conv3d c3(nn::Conv3dOptions{.in_channels = 2, .out_channels = 4, .kernel_size = {1, 2, 3}});
  EXPECT_EQ(c3->named_parameters()[0].second.shape(), (Shape{4, 2, 1, 2, 3}));
  EXPECT_EQ(up->type_name() + "(" + up->extra_repr() + ")",
            "ConvTranspose2d(8, 6, kernel_size=(3, 3), stride=(2, 2), groups=2)");
  EXPECT_EQ(c3->extra_repr(), "2, 4, kernel_size=(1, 2, 3), stride=(1, 1, 1)");
}

std::vector<nn::Module> every_new_module() {
  return {
      nn::Conv1d(nn::Conv1dOptions{.in_channels = 4,
                                   .out_channels = 2,
                                   .kernel_size = 3,
                                   .stride = 2,
                                   .padding = 1,
                                   .groups = 2,
                                   .padding_mode = "circular"}),
      nn::Conv2d(2, 3, 3, 1, 1, 1, 1, true, "reflect"),
      nn::Conv2d(nn::Conv2dOptions{.in_channels = 2,
                                   .out_channels = 2,
                                   .kernel_size = {2, 3},
                                   .padding_mode = "circular",
                                   .padding_preset = ConvPadding::same}),
      nn::Conv1d(nn::Conv1dOptions{.in_channels = 2,
                                   .out_channels = 2,
                                   .kernel_size = 4,
                                   .padding_preset = ConvPadding::valid}),
      nn::Conv3d(nn::Conv3dOptions{.in_channels = 1,
                                   .out_channels = 1,
                                   .kernel_size = 2,
                                   .padding_preset = ConvPadding::same}),
      nn::Conv3d(nn::Conv3dOptions{
          .in_channels = 2, .out_channels = 2, .kernel_size = {1, 2, 3}, .bias = false}),
      nn::ConvTranspose1d(nn::ConvTranspose1dOptions{
          .in_channels = 2, .out_channels = 3, .kernel_size = 4, .stride = 2, .padding = 1}),
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions{.in_channels = 4,
                                                     .out_channels = 2,
                                                     .kernel_size = {2, 3},
                                                     .stride = 2,
                                                     .output_padding = 1,
                                                     .dilation = {1, 2}}),
      nn::MaxPool1d(nn::MaxPool1dOptions{.kernel_size = 3, .stride = 2, .padding = 1}),
      nn::AvgPool1d(nn::AvgPool1dOptions{.kernel_size = 2}),
      nn::AdaptiveAvgPool1d(5),
      nn::AdaptiveAvgPool2d(Size2d{3, 2}),
      nn::AdaptiveMaxPool1d(2),
      nn::AdaptiveMaxPool2d(Size2d{1, 1}),
      nn::Upsample(InterpolateOptions{.scale_factor = {2.0}, .mode = "bilinear"}),
      nn::Upsample(InterpolateOptions{.size = {4, 6}}),
      nn::PixelShuffle(2),
      nn::PixelUnshuffle(3),
      nn::Unfold(nn::FoldOptions{.kernel_size = {2, 3}, .padding = 1}),
      nn::Fold(nn::FoldOptions{.output_size = {4, 5}, .kernel_size = 2, .stride = 2}),
  };
}

TEST(ConvNdModules, ConfigRoundTrip) {
  for (const nn::Module& m : every_new_module()) ember::test_util::expect_config_round_trip(m);
}

TEST(ConvNdModules, SaveAndLoadModel) {
  manual_seed(34);
  nn::Sequential net({nn::Conv1d(nn::Conv1dOptions{.in_channels = 2,
                                                   .out_channels = 4,
                                                   .kernel_size = 3,
                                                   .padding = 1,
                                                   .padding_mode = "replicate"}),
                      nn::MaxPool1d(nn::MaxPool1dOptions{.kernel_size = 2}),
                      nn::ConvTranspose1d(nn::ConvTranspose1dOptions{
                          .in_channels = 4, .out_channels = 2, .kernel_size = 2, .stride = 2}),
                      nn::AdaptiveAvgPool1d(3)});
  net->eval();
  const std::string path =
      (std::filesystem::temp_directory_path() / "ember_conv_nd_model.safetensors").string();
  io::save_model(net, path);
  nn::Module back = io::load_model(path);
  std::filesystem::remove(path);
  Tensor x = randn({2, 2, 8});
  ember_test::expect_close(back(x), net(x), 0, 0, "reloaded Conv1d/ConvTranspose1d model");
}

// ---- errors name the op, what came and what was expected

TEST(ConvNdErrors, MessagesNameExpectedAndGot) {
  const Tensor x1 = zeros({2, 4, 9}), x2 = zeros({2, 4, 6, 6});
  expect_error([&] { conv1d(x2, zeros({2, 4, 3})); }, {"conv1d", "[2, 4, 6, 6]", "3-D [N, C, L]"});
  expect_error(
      [&] {
        conv1d(x1, zeros({3, 2, 3}), Tensor(), 1, 0, 1, 2);
      },
      {"conv1d", "out_channels 3 is not divisible by groups 2"});
  expect_error(
      [&] {
        conv1d(x1, zeros({2, 3, 3}));
      },
      {"conv1d", "input has 4 channels", "expected 3"});
  expect_error(
      [&] {
        conv1d(x1, zeros({2, 4, 3}), Tensor(), 2, ConvPadding::same);
      },
      {"conv1d", "'same'", "stride 1"});
  expect_error(
      [&] {
        conv3d(x1, zeros({2, 4, 3, 3, 3}));
      },
      {"conv3d", "[2, 4, 9]", "5-D [N, C, D, H, W] or 4-D"});
  expect_error(
      [&] {
        conv3d(zeros({1, 4, 2, 6, 6}), zeros({2, 4, 3, 3, 3}));
      },
      {"conv3d", "kernel depth 3", "padded input depth 2"});
  expect_error(
      [&] {
        conv_transpose2d(x2, zeros({4, 2, 3, 3}), Tensor(), 2, 1, 2);
      },
      {"conv_transpose2d", "output_padding (2, 2)", "smaller than the stride (2, 2)"});
  expect_error(
      [&] {
        conv_transpose2d(x2, zeros({3, 2, 3, 3}));
      },
      {"conv_transpose2d", "input has 4 channels", "expected 3"});
  expect_error(
      [&] {
        conv_transpose2d(x2, zeros({4, 2, 3, 3}), Tensor(), 1, 0, 0, 3);
      },
      {"conv_transpose2d", "in_channels 4 is not divisible by groups 3"});
  expect_error(
      [&] {
        conv_transpose1d(x1, zeros({4, 2, 3}), Tensor(), 1, 0, 1);
      },
      {"conv_transpose1d", "output_padding 1", "stride 1"});
  expect_error(
      [&] {
        conv_transpose2d(x2, zeros({4, 2, 3, 3}), zeros({3}));
      },
      {"conv_transpose2d", "bias shape [3]", "expected [2]"});
  expect_error([&] { max_pool1d(x2, 2); }, {"max_pool1d", "[2, 4, 6, 6]", "3-D [N, C, L]"});
  expect_error([&] { avg_pool1d(x1, 2, 1, 2); }, {"avg_pool1d", "padding 2", "half the kernel"});
  expect_error([&] { adaptive_avg_pool2d(x1.reshape({72}), 2); },
               {"adaptive_avg_pool2d", "[72]", "4-D [N, C, H, W]"});
  expect_error(
      [&] {
        adaptive_max_pool2d(x2, {0, 2});
      },
      {"adaptive_max_pool2d", "output size (0, 2)", ">= 1"});
  expect_error(
      [&] {
        interpolate(x2, {.size = {4, 4}, .scale_factor = {2.0}});
      },
      {"interpolate", "only one of size and scale_factor", "[4, 4]"});
  expect_error([&] { interpolate(x2, {}); }, {"interpolate", "size or scale_factor", "neither"});
  expect_error([&] { interpolate(x1, {.size = {4}, .mode = "bilinear"}); },
               {"interpolate", "'bilinear' needs 4-D input", "3-D"});
  expect_error([&] { interpolate(x2, {.size = {4}, .align_corners = true}); },
               {"interpolate", "align_corners", "'nearest'"});
  expect_error([&] { interpolate(x2, {.size = {4}, .mode = "area"}); },
               {"interpolate", "'area'", "expected nearest"});
  expect_error([&] { im2col(x1.reshape({72}), 2); }, {"im2col", "[72]"});
  expect_error(
      [&] {
        col2im(zeros({1, 12, 14}), {4, 5}, {2, 3}, 1, 1, {1, 2});
      },
      {"col2im", "14 blocks", "expected 15"});
  expect_error(
      [&] {
        col2im(zeros({1, 10, 15}), {4, 5}, {2, 3});
      },
      {"col2im", "10 rows", "multiple of kh·kw = 6"});
  expect_error(
      [] {
        nn::ConvTranspose2d(nn::ConvTranspose2dOptions{
            .in_channels = 2, .out_channels = 2, .kernel_size = 3, .output_padding = 1});
      },
      {"ConvTranspose2d", "output_padding (1, 1)"});
  expect_error(
      [] {
        nn::Conv1d(
            nn::Conv1dOptions{.in_channels = 3, .out_channels = 2, .kernel_size = 3, .groups = 2});
      },
      {"Conv1d", "in_channels 3 is not divisible by groups 2"});
  expect_error([] { nn::Conv2d(2, 2, 3, 1, 1, 1, 1, true, "mirror"); },
               {"Conv2d", "padding_mode 'mirror'", "reflect"});
  expect_error([] { nn::Upsample(InterpolateOptions{}); }, {"Upsample", "neither"});
  expect_error(
      [] {
        nn::Conv1d(nn::Conv1dOptions{.in_channels = 1,
                                     .out_channels = 1,
                                     .kernel_size = 3,
                                     .stride = 2,
                                     .padding_preset = ConvPadding::same});
      },
      {"Conv1d", "padding='same' needs stride 1"});
}

// ---- a small U-Net-like step: Conv1d encoder, Conv2d + ConvTranspose2d decoder with a skip

struct TinyUNet {
  nn::Conv1d stem{
      nn::Conv1dOptions{.in_channels = 2, .out_channels = 4, .kernel_size = 3, .padding = 1}};
  nn::Conv2d down{nn::Conv2dOptions{
      .in_channels = 4, .out_channels = 8, .kernel_size = 3, .stride = 2, .padding = 1}};
  nn::ConvTranspose2d up{nn::ConvTranspose2dOptions{
      .in_channels = 8, .out_channels = 4, .kernel_size = 2, .stride = 2}};
  nn::Conv2d head{nn::Conv2dOptions{.in_channels = 8, .out_channels = 1, .kernel_size = 1}};

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> p;
    for (const nn::Module& m : std::vector<nn::Module>{stem, down, up, head})
      for (auto& [n, t] : m->named_parameters()) p.push_back(t);
    return p;
  }
  void to(Device d) {
    for (const nn::Module& m : std::vector<nn::Module>{stem, down, up, head}) m->to(d);
  }
  // x [N, 2, H·W] as a sequence -> [N, 4, H, W] -> down, up, concat skip -> [N, 1, H, W].
  Tensor operator()(const Tensor& x, int64_t h, int64_t w) const {
    Tensor s = relu(stem(x)).reshape({x.shape()[0], 4, h, w});
    Tensor d = relu(down(s));
    Tensor u = relu(up(d));
    return head(cat({u, s}, 1));
  }
};

std::vector<double> train_unet(Device device, int steps) {
  manual_seed(35);
  TinyUNet net;
  Tensor x = randn({3, 2, 64}), target = randn({3, 1, 8, 8});
  net.to(device);
  x = x.to(device);
  target = target.to(device);
  optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = mse_loss(net(x, 8, 8), target);
    loss.backward();
    opt.step();
    losses.push_back(loss.to(Device::cpu()).to_vector<float>()[0]);
  }
  return losses;
}

TEST(ConvNdTraining, TinyUNetStepLowersTheLoss) {
  const std::vector<double> losses = train_unet(Device::cpu(), 20);
  for (double l : losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.9 * losses.front())
      << "loss " << losses.front() << " -> " << losses.back();
}

TEST(ConvNdTraining, CudaMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the device tier runs on a GPU machine";
  const std::vector<double> cpu = train_unet(Device::cpu(), 5), gpu = train_unet(Device::cuda(), 5);
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * (1.0 + std::abs(cpu[i]))) << "step " << i;
}

}  // namespace
