// tests/test_memory_format.cpp — channels_last (NHWC) tensors and models (Note [Memory formats]
// in src/core/tensor.cpp): the Tensor API, the ops that keep the format (elementwise,
// convolutions through oneDNN / cuDNN / im2col, BatchNorm, the pools), gradients laid out as
// their parameters, optimizers and checkpoints over channels_last weights, and a ResNet-18
// training step that must equal the NCHW one. Every comparison is against the same
// computation in NCHW; the GPU cases (skipped without one) against the CPU too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/conv_backend.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/models/resnet.hpp"
#include "ember/nn/conv.hpp"
#include "ember/optim/clip.hpp"
#include "ember/optim/sgd.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace ember {
namespace {

using ember_test::expect_close;
using ember_test::expect_equal;
using ember_test::kGpu;
using ember_test::seeded_randn;
using test_util::error_of;

constexpr MemoryFormat kLast = MemoryFormat::channels_last;
constexpr MemoryFormat kLast3d = MemoryFormat::channels_last_3d;
constexpr MemoryFormat kPlain = MemoryFormat::contiguous;

// ---- the Tensor API ----

TEST(MemoryFormat, ChannelsLastStridesValuesAndChecks) {
  const Tensor x = seeded_randn({2, 3, 4, 5}, 1);
  const Tensor y = x.to(kLast);
  EXPECT_EQ(y.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(y.is_contiguous(kLast));
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_FALSE(x.is_contiguous(kLast));
  EXPECT_EQ(y.suggest_memory_format(), kLast);
  EXPECT_EQ(x.suggest_memory_format(), kPlain);
  expect_equal(y, x, "channels_last copy");
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());  // read in logical order
  EXPECT_TRUE(y.to(kLast).is_same(y));
  EXPECT_TRUE(y.contiguous(kLast).is_same(y));
  const Tensor back = y.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  expect_equal(back, x, "back to contiguous");
  // clone and dtype conversion keep the format; clone(contiguous) does not.
  EXPECT_EQ(y.clone().strides(), y.strides());
  EXPECT_TRUE(y.clone(kPlain).is_contiguous());
  EXPECT_EQ(y.to(DType::f64).strides(), y.strides());
  expect_equal(y.to(DType::f64).to(DType::f32), x, "f64 round trip");
}

TEST(MemoryFormat, SizeOneDimsAreBothFormats) {
  // [N, 1, H, W]: contiguous strides also satisfy channels_last; contiguous(channels_last)
  // keeps the tensor, to(channels_last) gives the exact strides (as torch).
  const Tensor x = seeded_randn({2, 1, 3, 4}, 2);
  EXPECT_TRUE(x.is_contiguous(kLast));
  EXPECT_EQ(x.suggest_memory_format(), kPlain);
  EXPECT_TRUE(x.contiguous(kLast).is_same(x));
  const Tensor y = x.to(kLast);
  EXPECT_EQ(y.strides(), (Shape{12, 1, 4, 1}));
  EXPECT_EQ(y.suggest_memory_format(), kLast);
  expect_equal(y, x, "exact channels_last");
}

TEST(MemoryFormat, ChannelsLast3d) {
  const Tensor x = seeded_randn({2, 3, 2, 3, 4}, 3);
  const Tensor y = x.to(kLast3d);
  EXPECT_EQ(y.strides(), (Shape{72, 1, 36, 12, 3}));
  EXPECT_TRUE(y.is_contiguous(kLast3d));
  EXPECT_EQ(y.suggest_memory_format(), kLast3d);
  expect_equal(y, x, "channels_last_3d copy");
  EXPECT_FALSE(x.is_contiguous(kLast));  // wrong rank: false, not an error
}

TEST(MemoryFormat, BadRequestsNameWhatWasExpected) {
  const Tensor x = seeded_randn({3, 4, 5}, 4);
  EXPECT_NE(error_of([&] { (void)x.to(kLast); })
                .find("memory format channels_last: expected a "
                      "tensor of 4 dims (got shape [3, 4, 5])"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)x.is_contiguous(MemoryFormat::preserve);
            }).find("MemoryFormat::preserve names no layout"),
            std::string::npos);
  nn::Conv2d conv(2, 3, 3);
  EXPECT_NE(error_of([&] { conv->to(MemoryFormat::preserve); }).find("Conv2d.to"),
            std::string::npos);
}

TEST(MemoryFormat, ConversionIsDifferentiable) {
  Tensor x = seeded_randn({2, 3, 4, 4}, 5);
  x.requires_grad_(true);
  const Tensor w = seeded_randn({2, 3, 4, 4}, 6);
  (x.to(kLast) * w).sum().backward();
  expect_equal(x.grad(), w, "gradient through to(channels_last)");
}

// ---- elementwise ops keep the format ----

TEST(MemoryFormat, ElementwiseOpsKeepTheFormat) {
  const Tensor a = seeded_randn({2, 5, 3, 4}, 7), b = seeded_randn({2, 5, 3, 4}, 8);
  const Tensor al = a.to(kLast), bl = b.to(kLast);
  const Tensor bias = seeded_randn({1, 5, 1, 1}, 9);
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
  };
  const std::vector<Case> cases = {
      {"relu", [](const Tensor& p, const Tensor&) { return relu(p); }},
      {"gelu", [](const Tensor& p, const Tensor&) { return gelu(p); }},
      {"add", [](const Tensor& p, const Tensor& q) { return p + q; }},
      {"mul scalar", [](const Tensor& p, const Tensor&) { return p * 3.0f; }},
      {"add bias", [&](const Tensor& p, const Tensor&) { return p + bias; }},
      {"add mixed", [&](const Tensor& p, const Tensor&) { return p + b; }},  // NHWC + NCHW
      {"where", [](const Tensor& p, const Tensor& q) { return where(gt(p, q), p, q); }},
  };
  for (const Case& c : cases) {
    const Tensor want = c.f(a, b), got = c.f(al, bl);
    expect_equal(got, want, c.name);
    EXPECT_EQ(got.suggest_memory_format(), kLast) << c.name;
  }
  Tensor inplace = al.clone();
  inplace.add_(b).mul_(2.0).clamp_(-1.0, 1.0);
  expect_equal(inplace, clamp((a + b) * 2.0f, -1.0, 1.0), "in-place chain");
  EXPECT_EQ(inplace.strides(), al.strides());
  Tensor filled = al.clone();
  filled.copy_(b);
  expect_equal(filled, b, "copy_ into channels_last");
}

TEST(MemoryFormat, ActivationGradientsKeepTheFormat) {
  // relu's and gelu's backward kernels write the forward input's format, walking every operand
  // in memory order (not a strided NCHW walk).
  for (const bool use_gelu : {false, true}) {
    Tensor x = seeded_randn({2, 6, 5, 4}, 80).to(kLast);
    x.requires_grad_(true);
    const Tensor h = x * 2.0f;  // a non-leaf: its gradient is the activation's backward output
    const Tensor y = use_gelu ? gelu(h, "tanh") : relu(h);
    const Tensor w = seeded_randn({2, 6, 5, 4}, 81);
    const Tensor gh = grad({y}, {h}, {w.to(kLast)})[0];
    EXPECT_EQ(gh.suggest_memory_format(), kLast) << (use_gelu ? "gelu" : "relu");
    const Tensor hp = h.detach().contiguous();
    Tensor hq = hp.clone();
    hq.requires_grad_(true);
    const Tensor yq = use_gelu ? gelu(hq, "tanh") : relu(hq);
    expect_equal(gh, grad({yq}, {hq}, {w})[0], use_gelu ? "gelu backward" : "relu backward");
  }
}

// ---- convolutions, BatchNorm, pools: NHWC equals NCHW ----

struct Outcome {
  Tensor y;
  std::vector<Tensor> grads;  // of x, then of each parameter
};

// f(x) with `params`, its gradients for sum(y · weights); inputs cast to `format` first.
Outcome run(const std::function<Tensor(const Tensor&, const std::vector<Tensor>&)>& f,
            const Tensor& x, const std::vector<Tensor>& params, MemoryFormat format,
            Device device) {
  auto leaf = [&](const Tensor& t) {
    Tensor l = t.to(device).detach();
    if (l.dim() == 4 || l.dim() == 5)
      l = l.to(format == kPlain ? kPlain : (l.dim() == 4 ? kLast : kLast3d)).detach();
    l.requires_grad_(true);
    return l;
  };
  Tensor xl = leaf(x);
  std::vector<Tensor> pl;
  for (const Tensor& p : params) pl.push_back(leaf(p));
  Outcome o;
  o.y = f(xl, pl);
  manual_seed(99);
  const Tensor weights = randn(o.y.shape()).to(device);
  (o.y * weights).sum().backward();
  o.grads.push_back(xl.grad());
  for (const Tensor& p : pl) o.grads.push_back(p.grad());
  if (format != kPlain) {
    EXPECT_TRUE(o.y.is_contiguous(x.dim() == 4 ? kLast : kLast3d)) << "output format";
    EXPECT_TRUE(xl.grad().strides() == xl.strides()) << "x's gradient is laid out as x";
  }
  o.y = o.y.to(Device::cpu());
  for (Tensor& g : o.grads) g = g.to(Device::cpu());
  return o;
}

void expect_same(const Outcome& got, const Outcome& want, double rtol, const std::string& what) {
  expect_close(got.y, want.y, rtol, rtol, what + " output");
  for (size_t i = 0; i < want.grads.size(); ++i)
    expect_close(got.grads[i], want.grads[i], rtol, rtol, what + " gradient " + std::to_string(i));
}

// NHWC against NCHW on `device` (and, on a GPU, NCHW on the CPU too).
void check_format(const std::string& what,
                  const std::function<Tensor(const Tensor&, const std::vector<Tensor>&)>& f,
                  const Tensor& x, const std::vector<Tensor>& params, double rtol,
                  Device device = Device::cpu()) {
  const Outcome plain = run(f, x, params, kPlain, device);
  const Outcome last = run(f, x, params, kLast, device);
  expect_same(last, plain, rtol, what + " (NHWC against NCHW)");
  if (device.is_cuda())
    expect_same(last, run(f, x, params, kPlain, Device::cpu()), rtol,
                what + " (GPU NHWC against CPU)");
}

auto conv_fn(Size2d stride, Size2d padding, Size2d dilation, int64_t groups) {
  return [=](const Tensor& x, const std::vector<Tensor>& p) {
    return conv2d(x, p[0], p[1], stride, padding, dilation, groups);
  };
}

void conv_cases(Device device, double rtol) {
  check_format("conv2d 3x3 pad 1", conv_fn(1, 1, 1, 1), seeded_randn({2, 8, 9, 7}, 11),
               {seeded_randn({16, 8, 3, 3}, 12), seeded_randn({16}, 13)}, rtol, device);
  check_format("conv2d strided dilated", conv_fn(2, 2, 2, 1), seeded_randn({2, 4, 11, 10}, 14),
               {seeded_randn({6, 4, 3, 3}, 15), seeded_randn({6}, 16)}, rtol, device);
  check_format("conv2d groups", conv_fn(1, 1, 1, 2), seeded_randn({2, 8, 6, 6}, 17),
               {seeded_randn({8, 4, 3, 3}, 18), seeded_randn({8}, 19)}, rtol, device);
  check_format("conv2d depthwise", conv_fn(1, 1, 1, 8), seeded_randn({2, 8, 6, 6}, 20),
               {seeded_randn({8, 1, 3, 3}, 21), seeded_randn({8}, 22)}, rtol, device);
  check_format("conv2d one input channel", conv_fn(1, 0, 1, 1), seeded_randn({3, 1, 8, 8}, 23),
               {seeded_randn({4, 1, 3, 3}, 24), seeded_randn({4}, 25)}, rtol, device);
}

TEST(MemoryFormat, Conv2dNhwcEqualsNchw) {
  conv_cases(Device::cpu(), 1e-5);
  // The path taken: oneDNN where it is here (NHWC without reorders of ember's tensors),
  // else im2col with the output made channels_last.
  const Tensor x = seeded_randn({2, 8, 9, 7}, 11).to(kLast),
               w = seeded_randn({16, 8, 3, 3}, 12).to(kLast);
  const Tensor y = conv2d(x, w, Tensor(), 1, 1);
  EXPECT_EQ(y.suggest_memory_format(), kLast);
  if (conv_library_status(Device::cpu()).find("not found") == std::string::npos) {
    EXPECT_EQ(conv_last_backend(), ConvBackend::onednn) << conv_fallback_reason();
  }
}

TEST(MemoryFormat, Conv2dIm2colFallbackKeepsTheFormat) {
  set_conv_library(false);
  conv_cases(Device::cpu(), 1e-5);
  set_conv_library(true);
}

TEST(MemoryFormat, Conv3dChannelsLast3d) {
  const auto f = [](const Tensor& x, const std::vector<Tensor>& p) {
    return conv3d(x, p[0], p[1], 1, 1);
  };
  const Tensor x = seeded_randn({2, 3, 4, 5, 5}, 26);
  const std::vector<Tensor> p = {seeded_randn({4, 3, 3, 3, 3}, 27), seeded_randn({4}, 28)};
  const Outcome plain = run(f, x, p, kPlain, Device::cpu());
  const Outcome last = run(f, x, p, kLast3d, Device::cpu());
  expect_same(last, plain, 1e-5, "conv3d NDHWC");
}

auto batch_norm_fn(bool training) {
  return [training](const Tensor& x, const std::vector<Tensor>& p) {
    Tensor rm = zeros({x.size(1)}, {.device = x.device()});
    Tensor rv = ones({x.size(1)}, {.device = x.device()});
    Tensor y = batch_norm(x, rm, rv, p[0], p[1], training, 0.1, 1e-5);
    return y + rm.reshape({1, x.size(1), 1, 1}) * rv.reshape({1, x.size(1), 1, 1});
  };
}

TEST(MemoryFormat, BatchNormNhwcEqualsNchw) {
  for (bool training : {true, false})
    check_format(training ? "batch_norm train" : "batch_norm eval", batch_norm_fn(training),
                 seeded_randn({4, 6, 5, 3}, 30) * 2.0f + 1.0f,
                 {seeded_randn({6}, 31), seeded_randn({6}, 32)}, 1e-5);
}

TEST(MemoryFormat, BatchNorm3dChannelsLast3d) {
  const auto f = [](const Tensor& x, const std::vector<Tensor>& p) {
    return batch_norm(x, Tensor(), Tensor(), p[0], p[1], true, 0.1, 1e-5);
  };
  const Tensor x = seeded_randn({3, 5, 2, 3, 4}, 90);
  const std::vector<Tensor> p = {seeded_randn({5}, 91), seeded_randn({5}, 92)};
  expect_same(run(f, x, p, kLast3d, Device::cpu()), run(f, x, p, kPlain, Device::cpu()), 1e-5,
              "batch_norm NDHWC");
}

TEST(MemoryFormat, MaxPoolIndicesAreThePlanesAlsoNhwc) {
  // Indices count within each (n, c) plane, as torch's, whatever the layout.
  const Tensor x = seeded_randn({2, 3, 7, 6}, 39);
  const auto [y, i] = max_pool2d_with_indices(x, 3, 2, 1);
  const auto [yl, il] = max_pool2d_with_indices(x.to(kLast), 3, 2, 1);
  EXPECT_EQ(il.suggest_memory_format(), kLast);
  expect_equal(yl, y, "values");
  expect_equal(il, i, "indices");
}

TEST(MemoryFormat, PoolsNhwcEqualNchw) {
  check_format(
      "max_pool2d",
      [](const Tensor& x, const std::vector<Tensor>&) { return max_pool2d(x, 3, 2, 1); },
      seeded_randn({2, 5, 9, 8}, 33), {}, 0.0);
  check_format(
      "avg_pool2d", [](const Tensor& x, const std::vector<Tensor>&) { return avg_pool2d(x, 2); },
      seeded_randn({2, 5, 8, 8}, 34), {}, 1e-6);
  check_format(
      "adaptive_avg_pool2d (1, 1)",
      [](const Tensor& x, const std::vector<Tensor>&) {
        return adaptive_avg_pool2d(x, Size2d(1, 1));
      },
      seeded_randn({2, 5, 7, 7}, 35), {}, 1e-6);
  check_format(
      "adaptive_avg_pool2d (4, 2) of 8x6",
      [](const Tensor& x, const std::vector<Tensor>&) {
        return adaptive_avg_pool2d(x, Size2d(4, 2));
      },
      seeded_randn({2, 5, 8, 6}, 36), {}, 1e-6);
}

// ---- models, optimizers, checkpoints ----

TEST(MemoryFormat, ModuleToChannelsLastConvertsFourDimParameters) {
  nn::Sequential net({nn::Conv2d(3, 8, 3, 1, 1), nn::BatchNorm2d(8), nn::ReLU(), nn::Flatten(),
                      nn::Linear(8 * 4 * 4, 2)});
  const Tensor w = net->named_parameters()[0].second;
  const Tensor before = w.clone(kPlain);
  net->to(kLast);
  for (const auto& [name, p] : net->named_parameters())
    EXPECT_EQ(p.suggest_memory_format(), p.dim() == 4 ? kLast : kPlain) << name;
  EXPECT_TRUE(net->named_parameters()[0].second.is_same(w)) << "converted in place";
  expect_equal(w, before, "values kept");
  net->to(kPlain);
  EXPECT_TRUE(w.is_contiguous());
}

TEST(MemoryFormat, GradientNormAndClipTakeChannelsLastGradients) {
  // The multi-tensor norm and clip (and the loss scaler's unscale) read each gradient as a flat
  // list: a channels_last gradient goes in as it lies and gives what its contiguous copy gives.
  std::vector<Tensor> plain, last;
  for (int i = 0; i < 3; ++i) {
    Tensor p = seeded_randn({2, 3 + i, 4, 5}, 60 + i);
    p.requires_grad_(true);
    Tensor q = p.detach().to(kLast);
    q.requires_grad_(true);
    p.set_grad(seeded_randn({2, 3 + i, 4, 5}, 70 + i));
    q.set_grad(p.grad().to(kLast));
    plain.push_back(p);
    last.push_back(q);
  }
  const Tensor n0 = optim::clip_grad_norm_tensor(plain, 0.5),
               n1 = optim::clip_grad_norm_tensor(last, 0.5);
  expect_close(n1, n0, 1e-6, 1e-6, "total norm");
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(last[i].grad().strides(), last[i].strides()) << "clipped in place";
    expect_close(last[i].grad(), plain[i].grad(), 1e-6, 1e-6, "clipped gradient");
  }
}

// ResNet-18 (train mode) with the model and its input channels_last against NCHW: the loss
// and every gradient of one step, then the weights after two SGD steps (momentum), within f32
// rounding as relative 2-norms (a ReLU or max-pool tie can flip a few elements between two
// summation orders; the norms see those as rounding, single elements would not); every
// gradient and momentum buffer laid out as its parameter; and a checkpoint of the
// channels_last model loads into an NCHW one with the same outputs.
double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(Device::cpu()).to(DType::f64), w = want.to(Device::cpu()).to(DType::f64);
  return norm(g - w).item<double>() / std::max(norm(w).item<double>(), 1e-30);
}

void resnet_steps(Device device, double tolerance) {
  std::vector<float> losses;
  std::vector<nn::ResNet> nets;
  std::vector<std::vector<Tensor>> grads(2);
  for (int last = 0; last < 2; ++last) {
    manual_seed(40);
    nn::ResNet net = models::resnet18({.num_classes = 10});
    net->to(device);
    if (last) net->to(kLast);
    optim::SGD opt(net->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
    manual_seed(41);
    const Tensor x0 = randn({4, 3, 64, 64}), y = randint(0, 10, {4}).to(device);
    const Tensor x = last ? x0.to(device).to(kLast) : x0.to(device);
    for (int s = 0; s < 2; ++s) {
      opt.zero_grad();
      Tensor loss = cross_entropy(net(x), y);
      loss.backward();
      if (s == 0) {
        losses.push_back(loss.item<float>());
        for (const auto& [name, p] : net->named_parameters()) {
          ASSERT_TRUE(p.grad().defined()) << name;
          grads[last].push_back(p.grad().clone(kPlain));
          if (last) {
            EXPECT_EQ(p.grad().strides(), p.strides()) << name << "'s gradient";
            if (p.dim() == 4) {
              EXPECT_EQ(p.suggest_memory_format(), kLast) << name;
            }
          }
        }
      }
      opt.step();
    }
    nets.push_back(net);
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-5 * (1.0 + std::fabs(losses[0])));
  const auto plain = nets[0]->named_parameters(), last = nets[1]->named_parameters();
  // The first step's gradients within f32 rounding; the weights two steps later within 1e-2:
  // a train-mode BatchNorm over 16 values per channel (layer4) amplifies one step's rounding
  // into the next step's gradients (NHWC and NCHW sum the statistics in different orders). A
  // layout bug in the optimizer (a permuted update) would be off by O(1).
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_LE(relative_error(grads[1][i], grads[0][i]), tolerance)
        << plain[i].first << "'s gradient";
    EXPECT_LE(relative_error(last[i].second, plain[i].second), 1e-2) << plain[i].first;
  }
  // Checkpoint: written in logical order, loaded into a contiguous model.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ember_nhwc_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  io::save_model(nn::Module(nets[1]), path);
  nn::Module back = io::load_model(path);
  std::filesystem::remove(path);
  manual_seed(42);
  const Tensor probe = randn({2, 3, 32, 32});
  nets[1]->eval();
  expect_close(back(probe), nets[1](probe.to(device).to(kLast)).to(Device::cpu()), 1e-4, 1e-4,
               "load_model(save_model(channels_last resnet18))");
}

TEST(MemoryFormat, ResNet18StepsNhwcEqualNchw) { resnet_steps(Device::cpu(), 1e-4); }

// ---- the GPU ----

TEST(MemoryFormatCuda, Conv2dNhwcEqualsNchwAndTheCpu) {
  SKIP_WITHOUT_CUDA();
  {
    const ember_test::CudnnConvolutionsScope im2col(false);
    conv_cases(kGpu, 1e-4);  // im2col + cuBLASLt
  }
  const ember_test::CudnnConvolutionsScope cudnn(true);
  conv_cases(kGpu, 1e-4);  // cuDNN, NHWC as it lies
  const Tensor x = seeded_randn({2, 8, 9, 7}, 11).to(kGpu).to(kLast);
  const Tensor w = seeded_randn({16, 8, 3, 3}, 12).to(kGpu).to(kLast);
  EXPECT_EQ(conv2d(x, w, Tensor(), 1, 1).suggest_memory_format(), kLast);
  EXPECT_EQ(conv_last_backend(), ConvBackend::cudnn) << conv_fallback_reason();
}

// Channels a multiple of a 16-byte pack take the pack kernel of max pooling's backward (Note
// [Max pooling's backward in channel packs]); overlapping windows (3, stride 2) send one input
// two gradients. f32 gives the CPU's bits; bf16 the CPU's within its rounding.
TEST(MemoryFormatCuda, MaxPoolBackwardInChannelPacks) {
  SKIP_WITHOUT_CUDA();
  const auto pool = [](const Tensor& x, const std::vector<Tensor>&) {
    return max_pool2d(x, 3, 2, 1);
  };
  check_format("max_pool2d 16 channels", pool, seeded_randn({2, 16, 9, 8}, 41), {}, 0.0, kGpu);
  check_format("max_pool2d 8 channels bf16", pool, seeded_randn({2, 8, 9, 8}, 42).to(DType::bf16),
               {}, 1e-2, kGpu);
}

TEST(MemoryFormatCuda, BatchNormAndPoolsNhwcEqualNchwAndTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (bool training : {true, false})
    check_format("batch_norm", batch_norm_fn(training),
                 seeded_randn({4, 40, 5, 3}, 36) * 2.0f + 1.0f,
                 {seeded_randn({40}, 37), seeded_randn({40}, 38)}, 1e-5, kGpu);
  check_format(
      "max_pool2d",
      [](const Tensor& x, const std::vector<Tensor>&) { return max_pool2d(x, 3, 2, 1); },
      seeded_randn({2, 5, 9, 8}, 33), {}, 0.0, kGpu);
  check_format(
      "avg_pool2d",
      [](const Tensor& x, const std::vector<Tensor>&) { return avg_pool2d(x, 3, 2, 1); },
      seeded_randn({2, 5, 9, 8}, 34), {}, 1e-6, kGpu);
  check_format(
      "adaptive_avg_pool2d (1, 1)",
      [](const Tensor& x, const std::vector<Tensor>&) {
        return adaptive_avg_pool2d(x, Size2d(1, 1));
      },
      seeded_randn({2, 5, 7, 7}, 35), {}, 1e-5, kGpu);
}

TEST(MemoryFormatCuda, ResNet18StepsNhwcEqualNchw) {
  SKIP_WITHOUT_CUDA();
  for (const bool cudnn : {false, true}) {
    const ember_test::CudnnConvolutionsScope route(cudnn);
    resnet_steps(kGpu, 1e-4);
  }
}

TEST(MemoryFormatCuda, DeviceCopiesKeepTheFormat) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = seeded_randn({2, 3, 4, 5}, 50).to(kLast);
  const Tensor g = x.to(kGpu);
  EXPECT_EQ(g.strides(), x.strides());
  const Tensor back = g.to(Device::cpu());
  EXPECT_EQ(back.strides(), x.strides());
  expect_equal(back, x, "round trip through the GPU");
}

}  // namespace
}  // namespace ember
