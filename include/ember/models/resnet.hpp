// ember/models/resnet.hpp — ResNet (He et al. 2015) as torchvision 0.14 builds it: the same
// modules, parameter and buffer names (conv1.weight, bn1.running_mean, layer1.0.conv1.weight,
// layer2.0.downsample.0.weight, fc.bias, ... num_batches_tracked included), the same
// initialisation, so torchvision's weights saved as safetensors load with io::load_state
// (docs/vision.md).
//
//   nn::ResNet net = models::resnet18({.num_classes = 10});
//   Tensor logits = net(images);                  // [N, 3, H, W] -> [N, 10]
//   io::load_state(net, "resnet18.safetensors");  // torchvision's state_dict, strict
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"

namespace ember::nn {

/// The residual block a ResNet stacks: BasicBlock (two 3×3 convolutions, expansion 1:
/// ResNet-18/34) or Bottleneck (1×1, 3×3, 1×1, expansion 4: ResNet-50/101/152).
enum class ResNetBlock { basic, bottleneck };

/// torchvision's ResNet keyword arguments (the defaults are its defaults).
struct ResNetOptions {
  int64_t num_classes = 1000;
  /// Zeroes the last BatchNorm's weight of every block (bn2 of a BasicBlock, bn3 of a
  /// Bottleneck), so each residual branch starts as the identity.
  bool zero_init_residual = false;
  /// Groups of the 3×3 convolution and channels per group (ResNeXt: 32 and 4; Wide ResNet:
  /// 1 and 128). A BasicBlock takes only the defaults 1 and 64.
  int64_t groups = 1;
  int64_t width_per_group = 64;
  /// Per stage 2, 3, 4: dilate instead of striding (keeps the resolution; Bottleneck only).
  std::array<bool, 3> replace_stride_with_dilation = {false, false, false};
};

/// One block's constructor arguments, as torchvision's BasicBlock / Bottleneck take them
/// (downsample: whether the identity path is conv1x1(stride) + BatchNorm, "downsample.0/1").
struct ResNetBlockOptions {
  int64_t inplanes = 0;
  int64_t planes = 0;
  int64_t stride = 1;
  bool downsample = false;
  int64_t groups = 1;
  int64_t base_width = 64;
  int64_t dilation = 1;
};

/// conv1, bn1, relu, conv2, bn2[, downsample]: relu(bn2(conv2(relu(bn1(conv1(x))))) + x).
class BasicBlockImpl : public ModuleImpl {
 public:
  static constexpr int64_t kExpansion = 1;
  explicit BasicBlockImpl(ResNetBlockOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }
  json options() const override;
  /// The block's last BatchNorm (the one zero_init_residual zeroes).
  BatchNorm2d last_norm() const { return bn2_; }

 private:
  ResNetBlockOptions options_;
  Conv2d conv1_, conv2_;
  BatchNorm2d bn1_, bn2_;
  Module downsample_;  // undefined without a downsample
};
class BasicBlock : public ModuleHolder<BasicBlockImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// conv1 (1×1), bn1, conv2 (3×3, stride, groups, dilation), bn2, conv3 (1×1, ×4), bn3, relu
/// [, downsample]; width = planes · base_width / 64 · groups.
class BottleneckImpl : public ModuleImpl {
 public:
  static constexpr int64_t kExpansion = 4;
  explicit BottleneckImpl(ResNetBlockOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Bottleneck"; }
  json options() const override;
  BatchNorm2d last_norm() const { return bn3_; }

 private:
  ResNetBlockOptions options_;
  Conv2d conv1_, conv2_, conv3_;
  BatchNorm2d bn1_, bn2_, bn3_;
  Module downsample_;  // undefined without a downsample
};
class Bottleneck : public ModuleHolder<BottleneckImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// torchvision.models.ResNet: conv1 (7×7, stride 2), bn1, relu, maxpool (3×3, stride 2),
/// layer1..layer4 (Sequentials of blocks; 64, 128, 256, 512 planes), avgpool (adaptive, 1×1),
/// fc. Convolutions are drawn kaiming_normal_(fan_out, relu), BatchNorms start at weight 1
/// and bias 0, fc as nn::Linear. The input is [N, 3, H, W] (the stem and the strided stages
/// divide H and W by 32, rounding up; the adaptive pool averages what is left), the output
/// [N, num_classes]. BatchNorm uses batch statistics in train() and the running ones in eval().
class ResNetImpl : public ModuleImpl {
 public:
  /// `layers`: blocks per stage (four numbers, each ≥ 1); ResNet-18 is {basic, {2, 2, 2, 2}}.
  ResNetImpl(ResNetBlock block, std::vector<int64_t> layers, ResNetOptions options = {});
  Tensor forward(const Tensor& x) override;
  /// Everything before fc: the pooled features [N, 512 · expansion].
  Tensor features(const Tensor& x);
  std::string type_name() const override { return "ResNet"; }
  /// {"block": "BasicBlock" | "Bottleneck", "layers": [...], and ResNetOptions' fields}.
  json options() const override;
  std::string extra_repr() const override;

  ResNetBlock block() const { return block_; }
  const std::vector<int64_t>& layers() const { return layers_; }
  const ResNetOptions& resnet_options() const { return options_; }
  /// The classifier (fc) and stage i (1..4, layer1..layer4).
  Linear fc() const { return fc_; }
  Sequential layer(int i) const;

 private:
  ResNetBlock block_;
  std::vector<int64_t> layers_;
  ResNetOptions options_;
  Conv2d conv1_;
  BatchNorm2d bn1_;
  MaxPool2d maxpool_;
  std::vector<Sequential> stages_;
  Linear fc_;
};
class ResNet : public ModuleHolder<ResNetImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn

namespace ember::models {

/// torchvision's builders, with random weights (load torchvision's with io::load_state):
/// resnet18/34 (BasicBlock, {2,2,2,2} / {3,4,6,3}), resnet50/101/152 (Bottleneck, {3,4,6,3} /
/// {3,4,23,3} / {3,8,36,3}), resnext50_32x4d (groups 32, width_per_group 4) and
/// wide_resnet50_2 (width_per_group 128), the last two setting those fields of `options`.
nn::ResNet resnet18(const nn::ResNetOptions& options = {});
nn::ResNet resnet34(const nn::ResNetOptions& options = {});
nn::ResNet resnet50(const nn::ResNetOptions& options = {});
nn::ResNet resnet101(const nn::ResNetOptions& options = {});
nn::ResNet resnet152(const nn::ResNetOptions& options = {});
nn::ResNet resnext50_32x4d(nn::ResNetOptions options = {});
nn::ResNet wide_resnet50_2(nn::ResNetOptions options = {});

/// The builder of that name ("resnet18", ..., "wide_resnet50_2"); another name is an
/// ember::Error listing them. resnet_names() lists them in that order.
nn::ResNet resnet(const std::string& name, const nn::ResNetOptions& options = {});
const std::vector<std::string>& resnet_names();

}  // namespace ember::models
