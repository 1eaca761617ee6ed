// ember/nn/conv.hpp — Conv2d, MaxPool2d and AvgPool2d (NCHW), with PyTorch's options,
// parameter names ("weight", "bias") and default initialisation.
//
//   nn::Conv2d conv(1, 32, /*kernel=*/3, /*stride=*/1, /*padding=*/1);
//   nn::MaxPool2d pool(2);
//   Tensor y = pool(relu(conv(x)));       // x [N, 1, 28, 28] -> y [N, 32, 14, 14]
#pragma once

#include <optional>

#include "ember/nn/module.hpp"

namespace ember::nn {

struct Conv2dOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  Size2d kernel_size = 1;
  Size2d stride = 1;
  Size2d padding = 0;
  Size2d dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// 2-D convolution (torch.nn.Conv2d, zero padding). weight [out, in/groups, kh, kw] and bias
/// [out] ~ U(±1/√fan_in) with fan_in = in/groups·kh·kw (kaiming_uniform(a=√5), as PyTorch).
class Conv2dImpl : public ModuleImpl {
 public:
  explicit Conv2dImpl(Conv2dOptions options);
  Conv2dImpl(int64_t in_channels, int64_t out_channels, Size2d kernel_size, Size2d stride = 1,
             Size2d padding = 0, Size2d dilation = 1, int64_t groups = 1, bool bias = true)
      : Conv2dImpl(Conv2dOptions{in_channels, out_channels, kernel_size, stride, padding, dilation,
                                 groups, bias}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  json options() const override;
  std::string extra_repr() const override;
  const Conv2dOptions& conv_options() const { return options_; }
  Tensor& weight() { return param("weight"); }
  /// Undefined when built with bias = false.
  Tensor bias() const { return bias_; }

 private:
  Conv2dOptions options_;
  Tensor weight_, bias_;
};
class Conv2d : public ModuleHolder<Conv2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct MaxPool2dOptions {
  Size2d kernel_size = 1;
  std::optional<Size2d> stride = std::nullopt;  // the kernel size when unset
  Size2d padding = 0;
  Size2d dilation = 1;
  bool ceil_mode = false;
};

/// Max pooling (torch.nn.MaxPool2d): padding counts as -inf; stride defaults to the kernel.
class MaxPool2dImpl : public ModuleImpl {
 public:
  explicit MaxPool2dImpl(MaxPool2dOptions options);
  MaxPool2dImpl(Size2d kernel_size, std::optional<Size2d> stride = std::nullopt, Size2d padding = 0,
                Size2d dilation = 1, bool ceil_mode = false)
      : MaxPool2dImpl(MaxPool2dOptions{kernel_size, stride, padding, dilation, ceil_mode}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  json options() const override;
  std::string extra_repr() const override;
  const MaxPool2dOptions& pool_options() const { return options_; }

 private:
  MaxPool2dOptions options_;
};
class MaxPool2d : public ModuleHolder<MaxPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct AvgPool2dOptions {
  Size2d kernel_size = 1;
  std::optional<Size2d> stride = std::nullopt;  // the kernel size when unset
  Size2d padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

/// Average pooling (torch.nn.AvgPool2d); count_include_pad counts zero padding in the divisor.
class AvgPool2dImpl : public ModuleImpl {
 public:
  explicit AvgPool2dImpl(AvgPool2dOptions options);
  AvgPool2dImpl(Size2d kernel_size, std::optional<Size2d> stride = std::nullopt, Size2d padding = 0,
                bool ceil_mode = false, bool count_include_pad = true)
      : AvgPool2dImpl(
            AvgPool2dOptions{kernel_size, stride, padding, ceil_mode, count_include_pad}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  json options() const override;
  std::string extra_repr() const override;
  const AvgPool2dOptions& pool_options() const { return options_; }

 private:
  AvgPool2dOptions options_;
};
class AvgPool2d : public ModuleHolder<AvgPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
