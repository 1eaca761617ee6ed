// src/models/resnet.cpp — nn::ResNet, its two blocks and torchvision's builders
// (include/ember/models/resnet.hpp). The module tree mirrors torchvision 0.14's
// (torchvision/models/resnet.py) child for child, so state_dict names and order are its own.
#include "ember/models/resnet.hpp"

#include <utility>

#include "ember/error.hpp"
#include "ember/nn/init.hpp"
#include "ember/ops.hpp"

namespace ember::nn {

namespace {

// torchvision's conv3x3 and conv1x1: no bias (a BatchNorm follows each).
Conv2d conv3x3(int64_t in, int64_t out, int64_t stride = 1, int64_t groups = 1,
               int64_t dilation = 1) {
  return Conv2d(Conv2dOptions{.in_channels = in,
                              .out_channels = out,
                              .kernel_size = 3,
                              .stride = stride,
                              .padding = dilation,
                              .dilation = dilation,
                              .groups = groups,
                              .bias = false});
}

Conv2d conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return Conv2d(Conv2dOptions{
      .in_channels = in, .out_channels = out, .kernel_size = 1, .stride = stride, .bias = false});
}

// "downsample" = Sequential(conv1x1(inplanes, planes · expansion, stride), BatchNorm2d), or
// an undefined handle when the block keeps its input's shape.
Module make_downsample(const ResNetBlockOptions& o, int64_t expansion) {
  if (!o.downsample) return Module();
  return Sequential{conv1x1(o.inplanes, o.planes * expansion, o.stride),
                    BatchNorm2d(o.planes * expansion)};
}

json block_json(const ResNetBlockOptions& o) {
  return {{"inplanes", o.inplanes},     {"planes", o.planes}, {"stride", o.stride},
          {"downsample", o.downsample}, {"groups", o.groups}, {"base_width", o.base_width},
          {"dilation", o.dilation}};
}

void check_block(const ResNetBlockOptions& o, const char* op) {
  EMBER_CHECK(o.inplanes > 0 && o.planes > 0 && o.stride > 0 && o.groups > 0 && o.base_width > 0 &&
                  o.dilation > 0,
              op, ": inplanes ", o.inplanes, ", planes ", o.planes, ", stride ", o.stride,
              ", groups ", o.groups, ", base_width ", o.base_width, ", dilation ", o.dilation,
              " (expected every one positive)");
}

// The residual join both blocks end with: relu(bn(branch) + identity), in one pass
// (BatchNormImpl::forward_relu: batch_norm_relu's bits are the composite's).
Tensor join(BatchNorm2d& bn, const Tensor& branch, const Module& downsample, const Tensor& x) {
  const Tensor identity = downsample.defined() ? downsample(x) : x;
  return bn->forward_relu(branch, identity);
}

}  // namespace

// ---- BasicBlock ----

BasicBlockImpl::BasicBlockImpl(ResNetBlockOptions o)
    : options_((check_block(o, "BasicBlock"), o)),
      conv1_(conv3x3(o.inplanes, o.planes, o.stride)),
      conv2_(conv3x3(o.planes, o.planes)),
      bn1_(o.planes),
      bn2_(o.planes),
      downsample_(make_downsample(o, kExpansion)) {
  EMBER_CHECK(o.groups == 1 && o.base_width == 64, "BasicBlock: groups ", o.groups, ", base_width ",
              o.base_width, " (expected 1 and 64, as torchvision's BasicBlock)");
  EMBER_CHECK(o.dilation == 1, "BasicBlock: dilation ", o.dilation,
              " (expected 1: torchvision's BasicBlock has no dilation)");
  register_module("conv1", conv1_.ptr());
  register_module("bn1", bn1_.ptr());
  register_module("relu", ReLU().ptr());
  register_module("conv2", conv2_.ptr());
  register_module("bn2", bn2_.ptr());
  if (downsample_.defined()) register_module("downsample", downsample_.ptr());
}

Tensor BasicBlockImpl::forward(const Tensor& x) {
  const Tensor out = conv2_(bn1_->forward_relu(conv1_(x)));
  return join(bn2_, out, downsample_, x);
}

json BasicBlockImpl::options() const { return block_json(options_); }

// ---- Bottleneck ----

namespace {
int64_t bottleneck_width(const ResNetBlockOptions& o) {
  return o.planes * o.base_width / 64 * o.groups;  // int(planes · (base_width / 64.)) · groups
}
}  // namespace

BottleneckImpl::BottleneckImpl(ResNetBlockOptions o)
    : options_((check_block(o, "Bottleneck"), o)),
      conv1_(conv1x1(o.inplanes, bottleneck_width(o))),
      conv2_(conv3x3(bottleneck_width(o), bottleneck_width(o), o.stride, o.groups, o.dilation)),
      conv3_(conv1x1(bottleneck_width(o), o.planes * kExpansion)),
      bn1_(bottleneck_width(o)),
      bn2_(bottleneck_width(o)),
      bn3_(o.planes * kExpansion),
      downsample_(make_downsample(o, kExpansion)) {
  register_module("conv1", conv1_.ptr());
  register_module("bn1", bn1_.ptr());
  register_module("conv2", conv2_.ptr());
  register_module("bn2", bn2_.ptr());
  register_module("conv3", conv3_.ptr());
  register_module("bn3", bn3_.ptr());
  register_module("relu", ReLU().ptr());
  if (downsample_.defined()) register_module("downsample", downsample_.ptr());
}

Tensor BottleneckImpl::forward(const Tensor& x) {
  Tensor out = bn1_->forward_relu(conv1_(x));
  out = bn2_->forward_relu(conv2_(out));
  return join(bn3_, conv3_(out), downsample_, x);
}

json BottleneckImpl::options() const { return block_json(options_); }

// ---- ResNet ----

namespace {

const char* block_name(ResNetBlock b) {
  return b == ResNetBlock::basic ? "BasicBlock" : "Bottleneck";
}

int64_t expansion(ResNetBlock b) {
  return b == ResNetBlock::basic ? BasicBlockImpl::kExpansion : BottleneckImpl::kExpansion;
}

const ResNetOptions& checked(const ResNetOptions& o, const std::vector<int64_t>& layers) {
  EMBER_CHECK(layers.size() == 4, "ResNet: layers has ", layers.size(),
              " entries (expected 4: the blocks of layer1..layer4)");
  for (size_t i = 0; i < layers.size(); ++i)
    EMBER_CHECK(layers[i] >= 1, "ResNet: layers[", i, "] = ", layers[i], " (expected >= 1)");
  EMBER_CHECK(o.num_classes >= 1, "ResNet: num_classes ", o.num_classes, " (expected >= 1)");
  EMBER_CHECK(o.groups >= 1 && o.width_per_group >= 1, "ResNet: groups ", o.groups,
              ", width_per_group ", o.width_per_group, " (expected both >= 1)");
  return o;
}

// torchvision's initialisation, depth-first as its self.modules() loop: every convolution
// kaiming_normal_(fan_out, relu), every BatchNorm weight 1 and bias 0 (BatchNorm2d's own
// start), fc as nn::Linear draws it; with zero_init_residual each block's last BatchNorm weight
// 0. (The constructor cannot use named_modules(): no shared_ptr owns the module yet.)
void init_like_torchvision(const ModuleImpl& m, bool zero_init_residual) {
  for (const auto& [name, child] : m.named_children()) {
    if (auto* conv = dynamic_cast<Conv2dImpl*>(child.get()))
      init::kaiming_normal_(conv->weight(),
                            {.mode = init::FanMode::fan_out, .nonlinearity = "relu"});
    if (zero_init_residual) {
      if (auto* b = dynamic_cast<BasicBlockImpl*>(child.get()))
        init::constant_(b->last_norm()->param("weight"), 0.0);
      if (auto* b = dynamic_cast<BottleneckImpl*>(child.get()))
        init::constant_(b->last_norm()->param("weight"), 0.0);
    }
    init_like_torchvision(*child, zero_init_residual);
  }
}

ModulePtr make_block(ResNetBlock b, const ResNetBlockOptions& o) {
  if (b == ResNetBlock::basic) return std::make_shared<BasicBlockImpl>(o);
  return std::make_shared<BottleneckImpl>(o);
}

}  // namespace

ResNetImpl::ResNetImpl(ResNetBlock block, std::vector<int64_t> layers, ResNetOptions options)
    : block_(block),
      layers_(std::move(layers)),
      options_(checked(options, layers_)),
      conv1_(Conv2dOptions{.in_channels = 3,
                           .out_channels = 64,
                           .kernel_size = 7,
                           .stride = 2,
                           .padding = 3,
                           .bias = false}),
      bn1_(64),
      maxpool_(MaxPool2dOptions{.kernel_size = 3, .stride = Size2d(2), .padding = 1}),
      fc_(512 * expansion(block), options.num_classes) {
  register_module("conv1", conv1_.ptr());
  register_module("bn1", bn1_.ptr());
  register_module("relu", ReLU().ptr());
  register_module("maxpool", maxpool_.ptr());
  // torchvision's _make_layer: the first block of a stage strides (or dilates) and, when the
  // shape changes, downsamples the identity; the rest keep the stage's shape.
  int64_t inplanes = 64, dilation = 1;
  const int64_t exp = expansion(block);
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    int64_t stride = stage == 0 ? 1 : 2;
    const int64_t previous_dilation = dilation;
    if (stage > 0 && options_.replace_stride_with_dilation[stage - 1]) {
      dilation *= stride;
      stride = 1;
    }
    Sequential seq;
    ResNetBlockOptions first{.inplanes = inplanes,
                             .planes = planes,
                             .stride = stride,
                             .downsample = stride != 1 || inplanes != planes * exp,
                             .groups = options_.groups,
                             .base_width = options_.width_per_group,
                             .dilation = previous_dilation};
    seq->push_back(make_block(block, first));
    inplanes = planes * exp;
    for (int64_t i = 1; i < layers_[stage]; ++i)
      seq->push_back(make_block(block, {.inplanes = inplanes,
                                        .planes = planes,
                                        .groups = options_.groups,
                                        .base_width = options_.width_per_group,
                                        .dilation = dilation}));
    register_module("layer" + std::to_string(stage + 1), seq.ptr());
    stages_.push_back(seq);
  }
  register_module("avgpool", AdaptiveAvgPool2d(Size2d(1, 1)).ptr());
  register_module("fc", fc_.ptr());

  init_like_torchvision(*this, options_.zero_init_residual);
}

Tensor ResNetImpl::features(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 3, "ResNet: input ", x.shape().to_string(),
              " (expected [N, 3, H, W])");
  Tensor h = maxpool_(bn1_->forward_relu(conv1_(x)));
  for (Sequential& stage : stages_) h = stage(h);
  return adaptive_avg_pool2d(h, Size2d(1, 1)).flatten(1);
}

Tensor ResNetImpl::forward(const Tensor& x) { return fc_(features(x)); }

Sequential ResNetImpl::layer(int i) const {
  EMBER_CHECK(i >= 1 && i <= 4, "ResNet::layer: ", i, " (expected 1..4: layer1..layer4)");
  return stages_[static_cast<size_t>(i - 1)];
}

json ResNetImpl::options() const {
  return {{"block", block_name(block_)},
          {"layers", layers_},
          {"num_classes", options_.num_classes},
          {"zero_init_residual", options_.zero_init_residual},
          {"groups", options_.groups},
          {"width_per_group", options_.width_per_group},
          {"replace_stride_with_dilation", options_.replace_stride_with_dilation}};
}

std::string ResNetImpl::extra_repr() const {
  std::string layers;
  for (int64_t n : layers_) layers += (layers.empty() ? "" : ", ") + std::to_string(n);
  return detail::concat("block=", block_name(block_), ", layers=[", layers,
                        "], num_classes=", options_.num_classes);
}

// ---- the registry: config JSON -> module (data only) ----

namespace {

template <typename T>
T field(const json& c, const char* key, T fallback) {
  if (!c.contains("options") || !c["options"].contains(key)) return fallback;
  return c["options"][key].get<T>();
}

ResNetBlockOptions block_from(const json& c) {
  const ResNetBlockOptions d;
  return {.inplanes = field(c, "inplanes", d.inplanes),
          .planes = field(c, "planes", d.planes),
          .stride = field(c, "stride", d.stride),
          .downsample = field(c, "downsample", d.downsample),
          .groups = field(c, "groups", d.groups),
          .base_width = field(c, "base_width", d.base_width),
          .dilation = field(c, "dilation", d.dilation)};
}

ModulePtr resnet_from(const json& c) {
  const std::string block = field<std::string>(c, "block", "BasicBlock");
  EMBER_CHECK(block == "BasicBlock" || block == "Bottleneck", "nn::build: ResNet block \"", block,
              "\" (expected BasicBlock or Bottleneck)");
  const ResNetOptions d;
  ResNetOptions o{.num_classes = field(c, "num_classes", d.num_classes),
                  .zero_init_residual = field(c, "zero_init_residual", d.zero_init_residual),
                  .groups = field(c, "groups", d.groups),
                  .width_per_group = field(c, "width_per_group", d.width_per_group),
                  .replace_stride_with_dilation =
                      field(c, "replace_stride_with_dilation", d.replace_stride_with_dilation)};
  return std::make_shared<ResNetImpl>(
      block == "BasicBlock" ? ResNetBlock::basic : ResNetBlock::bottleneck,
      field(c, "layers", std::vector<int64_t>{2, 2, 2, 2}), o);
}

// Registered when the library loads (the registry is a function-local static, so the order
// of static initialisers does not matter).
[[maybe_unused]] const bool kRegistered = [] {
  register_module_type("ResNet", resnet_from);
  register_module_type("BasicBlock", [](const json& c) -> ModulePtr {
    return std::make_shared<BasicBlockImpl>(block_from(c));
  });
  register_module_type("Bottleneck", [](const json& c) -> ModulePtr {
    return std::make_shared<BottleneckImpl>(block_from(c));
  });
  return true;
}();

}  // namespace

}  // namespace ember::nn

namespace ember::models {

using nn::ResNetBlock;

nn::ResNet resnet18(const nn::ResNetOptions& options) {
  return nn::ResNet(ResNetBlock::basic, std::vector<int64_t>{2, 2, 2, 2}, options);
}
nn::ResNet resnet34(const nn::ResNetOptions& options) {
  return nn::ResNet(ResNetBlock::basic, std::vector<int64_t>{3, 4, 6, 3}, options);
}
nn::ResNet resnet50(const nn::ResNetOptions& options) {
  return nn::ResNet(ResNetBlock::bottleneck, std::vector<int64_t>{3, 4, 6, 3}, options);
}
nn::ResNet resnet101(const nn::ResNetOptions& options) {
  return nn::ResNet(ResNetBlock::bottleneck, std::vector<int64_t>{3, 4, 23, 3}, options);
}
nn::ResNet resnet152(const nn::ResNetOptions& options) {
  return nn::ResNet(ResNetBlock::bottleneck, std::vector<int64_t>{3, 8, 36, 3}, options);
}
nn::ResNet resnext50_32x4d(nn::ResNetOptions options) {
  options.groups = 32;
  options.width_per_group = 4;
  return resnet50(options);
}
nn::ResNet wide_resnet50_2(nn::ResNetOptions options) {
  options.width_per_group = 64 * 2;
  return resnet50(options);
}

const std::vector<std::string>& resnet_names() {
  static const std::vector<std::string> names = {"resnet18",       "resnet34",  "resnet50",
                                                 "resnet101",      "resnet152", "resnext50_32x4d",
                                                 "wide_resnet50_2"};
  return names;
}

nn::ResNet resnet(const std::string& name, const nn::ResNetOptions& options) {
  using Builder = nn::ResNet (*)(const nn::ResNetOptions&);
  static const std::pair<const char*, Builder> builders[] = {
      {"resnet18", resnet18},
      {"resnet34", resnet34},
      {"resnet50", resnet50},
      {"resnet101", resnet101},
      {"resnet152", resnet152},
      {"resnext50_32x4d", [](const nn::ResNetOptions& o) { return resnext50_32x4d(o); }},
      {"wide_resnet50_2", [](const nn::ResNetOptions& o) { return wide_resnet50_2(o); }}};
  for (const auto& [n, build] : builders)
    if (name == n) return build(options);
  std::string known;
  for (const std::string& n : resnet_names()) known += (known.empty() ? "" : ", ") + n;
  detail::throw_error(
      detail::concat("models::resnet: unknown model \"", name, "\" (expected one of ", known, ")"));
}

}  // namespace ember::models
