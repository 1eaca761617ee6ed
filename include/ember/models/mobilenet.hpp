// ember/models/mobilenet.hpp — MobileNetV2 (Sandler et al. 2018) as torchvision 0.14 builds it:
// the same modules, parameter and buffer names (features.0.0.weight, features.1.conv.0.1.
// running_mean, features.2.conv.2.weight, features.18.1.bias, classifier.1.weight, ...
// num_batches_tracked included) and the same initialisation, so torchvision's weights saved as
// safetensors load with io::load_state (docs/vision.md).
//
//   nn::MobileNetV2 net = models::mobilenet_v2({.num_classes = 10});
//   Tensor logits = net(images);                      // [N, 3, H, W] -> [N, 10]
//   io::load_state(net, "mobilenet_v2.safetensors");  // torchvision's state_dict, strict
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "ember/nn/conv.hpp"
#include "ember/nn/dropout.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"

namespace ember::nn {

/// torchvision's InvertedResidual arguments: input and output channels, the depthwise
/// convolution's stride (1 or 2) and the expansion of the hidden width (round(inp · ratio)).
struct InvertedResidualOptions {
  int64_t inp = 0;
  int64_t oup = 0;
  int64_t stride = 1;
  int64_t expand_ratio = 1;
  static constexpr auto fields() {
    using O = InvertedResidualOptions;
    return std::tuple{field("inp", &O::inp, opts::above(0)), field("oup", &O::oup, opts::above(0)),
                      field("stride", &O::stride, opts::closed(1, 2)),
                      field("expand_ratio", &O::expand_ratio, opts::above(0))};
  }
};

/// conv = Sequential([1×1 expansion, BatchNorm, ReLU6] (when expand_ratio > 1), 3×3 depthwise
/// (stride), BatchNorm, ReLU6, 1×1 projection, BatchNorm); x + conv(x) when the stride is 1 and
/// the channels agree, else conv(x).
class InvertedResidualImpl : public ModuleImpl {
 public:
  explicit InvertedResidualImpl(InvertedResidualOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "InvertedResidual"; }
  json options() const override;
  /// Whether the block adds its input (stride 1, inp == oup).
  bool residual() const { return residual_; }

 private:
  InvertedResidualOptions options_;
  bool residual_ = false;
  Sequential conv_;
};
class InvertedResidual : public ModuleHolder<InvertedResidualImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// torchvision's MobileNetV2 keyword arguments (the defaults are its defaults). Every width is
/// torchvision's _make_divisible(c · width_mult, round_nearest).
struct MobileNetV2Options {
  int64_t num_classes = 1000;
  double width_mult = 1.0;
  int64_t round_nearest = 8;
  double dropout = 0.2;  // of the classifier's Dropout
  static constexpr auto fields() {
    using O = MobileNetV2Options;
    return std::tuple{field("num_classes", &O::num_classes, opts::above(0)),
                      field("width_mult", &O::width_mult, opts::above(0)),
                      field("round_nearest", &O::round_nearest, opts::above(0)),
                      field("dropout", &O::dropout, opts::closed(0, 1))};
  }
};

/// torchvision.models.MobileNetV2: features (0: 3×3 stride-2 convolution + BatchNorm + ReLU6,
/// 1..17: the inverted residuals of the paper's table 2, 18: 1×1 convolution to 1280 +
/// BatchNorm + ReLU6), a global average pool, classifier (Dropout, Linear). Convolutions are
/// drawn kaiming_normal_(fan_out), BatchNorms start at weight 1 and bias 0, the Linear's weight
/// normal(0, 0.01) and its bias 0. The input is [N, 3, H, W], the output [N, num_classes].
class MobileNetV2Impl : public ModuleImpl {
 public:
  explicit MobileNetV2Impl(MobileNetV2Options options = {});
  Tensor forward(const Tensor& x) override;
  /// Everything before the classifier: the pooled features [N, last_channel].
  Tensor features(const Tensor& x);
  std::string type_name() const override { return "MobileNetV2"; }
  json options() const override;
  const MobileNetV2Options& mobilenet_options() const { return options_; }
  /// The features Sequential (its 19 entries) and the classifier (Dropout, Linear).
  Sequential feature_layers() const { return features_; }
  Sequential classifier() const { return classifier_; }

 private:
  MobileNetV2Options options_;
  Sequential features_, classifier_;
};
class MobileNetV2 : public ModuleHolder<MobileNetV2Impl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn

namespace ember::models {

/// torchvision's mobilenet_v2 builder, with random weights (load torchvision's with
/// io::load_state).
nn::MobileNetV2 mobilenet_v2(const nn::MobileNetV2Options& options = {});

}  // namespace ember::models
