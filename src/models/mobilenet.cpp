// src/models/mobilenet.cpp — nn::MobileNetV2, its InvertedResidual block and torchvision's
// builder (include/ember/models/mobilenet.hpp). The module tree mirrors torchvision 0.14's
// (torchvision/models/mobilenetv2.py, its Conv2dNormActivation from ops/misc.py) child for
// child, so state_dict names and order are its own.
#include "ember/models/mobilenet.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "ember/error.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/init.hpp"
#include "ember/ops.hpp"
#include "nn/registry.hpp"

namespace ember::nn {

namespace {

// torchvision's _make_divisible: v rounded to the nearest multiple of `divisor` (at least
// `divisor`), one step up when that rounding lost more than 10%.
int64_t make_divisible(double v, int64_t divisor) {
  int64_t rounded = std::max<int64_t>(
      divisor, static_cast<int64_t>(v + static_cast<double>(divisor) / 2.0) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

// torchvision's Conv2dNormActivation with its defaults here: a convolution without bias
// (padding (k - 1) / 2), BatchNorm2d, ReLU6, as Sequential children 0, 1, 2.
Sequential conv_norm_relu6(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                           int64_t groups) {
  return Sequential{Conv2d(Conv2dOptions{.in_channels = in,
                                         .out_channels = out,
                                         .kernel_size = kernel,
                                         .stride = stride,
                                         .padding = (kernel - 1) / 2,
                                         .groups = groups,
                                         .bias = false}),
                    BatchNorm2d(out), ReLU6()};
}

// The paper's table 2, as torchvision lists it: expansion t, channels c, repeats n, stride s.
struct Stage {
  int64_t t, c, n, s;
};
constexpr Stage kStages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                             {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};

// torchvision's initialisation (its self.modules() loop, depth-first): convolutions
// kaiming_normal_(fan_out) (a = 0: the gain √2), BatchNorms weight 1 and bias 0 (BatchNorm2d's
// own start), Linear weight normal(0, 0.01) and bias 0.
void init_like_torchvision(const ModuleImpl& m) {
  for (const auto& [name, child] : m.named_children()) {
    if (auto* conv = dynamic_cast<Conv2dImpl*>(child.get()))
      init::kaiming_normal_(conv->weight(), {.mode = init::FanMode::fan_out});
    if (auto* linear = dynamic_cast<LinearImpl*>(child.get())) {
      init::normal_(linear->param("weight"), 0.0, 0.01);
      init::zeros_(linear->param("bias"));
    }
    init_like_torchvision(*child);
  }
}

}  // namespace

// ---- InvertedResidual ----

InvertedResidualImpl::InvertedResidualImpl(InvertedResidualOptions o)
    : options_((check_options(o, "InvertedResidual"), o)),
      residual_(o.stride == 1 && o.inp == o.oup) {
  // hidden_dim = int(round(inp * expand_ratio)): an integer ratio, so the product itself.
  const int64_t hidden = o.inp * o.expand_ratio;
  if (o.expand_ratio != 1) conv_->push_back(conv_norm_relu6(o.inp, hidden, 1, 1, 1));
  conv_->push_back(conv_norm_relu6(hidden, hidden, 3, o.stride, hidden));
  conv_->push_back(Conv2d(Conv2dOptions{
      .in_channels = hidden, .out_channels = o.oup, .kernel_size = 1, .bias = false}));
  conv_->push_back(BatchNorm2d(o.oup));
  register_module("conv", conv_.ptr());
}

Tensor InvertedResidualImpl::forward(const Tensor& x) {
  return residual_ ? x + conv_(x) : conv_(x);
}

json InvertedResidualImpl::options() const { return options_json(options_); }

// ---- MobileNetV2 ----

MobileNetV2Impl::MobileNetV2Impl(MobileNetV2Options o)
    : options_((check_options(o, "MobileNetV2"), o)) {
  const int64_t r = o.round_nearest;
  int64_t input = make_divisible(32.0 * o.width_mult, r);
  const int64_t last = make_divisible(1280.0 * std::max(1.0, o.width_mult), r);
  features_->push_back(conv_norm_relu6(3, input, 3, 2, 1));
  for (const Stage& s : kStages) {
    const int64_t output = make_divisible(static_cast<double>(s.c) * o.width_mult, r);
    for (int64_t i = 0; i < s.n; ++i) {
      features_->push_back(InvertedResidual(InvertedResidualOptions{
          .inp = input, .oup = output, .stride = i == 0 ? s.s : 1, .expand_ratio = s.t}));
      input = output;
    }
  }
  features_->push_back(conv_norm_relu6(input, last, 1, 1, 1));
  classifier_->push_back(Dropout(DropoutOptions{.p = o.dropout}));
  classifier_->push_back(Linear(last, o.num_classes));
  register_module("features", features_.ptr());
  register_module("classifier", classifier_.ptr());
  init_like_torchvision(*this);
}

Tensor MobileNetV2Impl::features(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 3, "MobileNetV2: input ", x.shape().to_string(),
              " (expected [N, 3, H, W])");
  return adaptive_avg_pool2d(features_(x), Size2d(1, 1)).flatten(1);
}

Tensor MobileNetV2Impl::forward(const Tensor& x) { return classifier_(features(x)); }

json MobileNetV2Impl::options() const { return options_json(options_); }

namespace {

// Registered when the library loads (nn::build(config()) rebuilds the model and its blocks).
[[maybe_unused]] const bool kRegistered = [] {
  registry::register_with<MobileNetV2Impl, MobileNetV2Options>("MobileNetV2");
  registry::register_with<InvertedResidualImpl, InvertedResidualOptions>("InvertedResidual");
  return true;
}();

}  // namespace

}  // namespace ember::nn

namespace ember::models {

nn::MobileNetV2 mobilenet_v2(const nn::MobileNetV2Options& options) {
  return nn::MobileNetV2(options);
}

}  // namespace ember::models
