// ember/nn/conv.hpp — the convolution, pooling and resampling modules (Conv1d/2d/3d,
// ConvTranspose1d/2d, Max/AvgPool1d/2d, adaptive pools, Upsample, PixelShuffle/Unshuffle,
// Unfold/Fold), with PyTorch's options, parameter names ("weight", "bias"), default
// initialisation and printed form.
//
//   nn::Conv2d conv(1, 32, /*kernel=*/3, /*stride=*/1, /*padding=*/1);
//   nn::MaxPool2d pool(2);
//   Tensor y = pool(relu(conv(x)));       // x [N, 1, 28, 28] -> y [N, 32, 14, 14]
#pragma once

#include <optional>
#include <string>
#include <vector>

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
  std::string padding_mode = "zeros";  // zeros, reflect, replicate or circular
  /// PyTorch's padding="same" / "valid" (stride 1 for same); `padding` is unused when set.
  std::optional<ConvPadding> padding_preset = std::nullopt;
};

/// 2-D convolution (torch.nn.Conv2d; padding_mode other than zeros pads with ember::pad first).
/// weight [out, in/groups, kh, kw] and bias [out] ~ U(±1/√fan_in) with fan_in = in/groups·kh·kw
/// (kaiming_uniform(a=√5), as PyTorch).
class Conv2dImpl : public ModuleImpl {
 public:
  explicit Conv2dImpl(Conv2dOptions options);
  Conv2dImpl(int64_t in_channels, int64_t out_channels, Size2d kernel_size, Size2d stride = 1,
             Size2d padding = 0, Size2d dilation = 1, int64_t groups = 1, bool bias = true,
             std::string padding_mode = "zeros")
      : Conv2dImpl(Conv2dOptions{in_channels, out_channels, kernel_size, stride, padding, dilation,
                                 groups, bias, std::move(padding_mode)}) {}
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

// ---- issue 16: more convolutions (src/nn/conv_more.cpp) ----

struct Conv1dOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel_size = 1;
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  std::string padding_mode = "zeros";  // zeros, reflect, replicate or circular
  /// PyTorch's padding="same" / "valid" (stride 1 for same); `padding` is unused when set.
  std::optional<ConvPadding> padding_preset = std::nullopt;
};

/// 1-D convolution (torch.nn.Conv1d): weight [out, in/groups, k], bias [out], PyTorch's init.
///   nn::Conv1d conv(Conv1dOptions{.in_channels = 2, .out_channels = 8, .kernel_size = 3});
class Conv1dImpl : public ModuleImpl {
 public:
  explicit Conv1dImpl(Conv1dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv1d"; }
  json options() const override;
  std::string extra_repr() const override;
  const Conv1dOptions& conv_options() const { return options_; }

 private:
  Conv1dOptions options_;
  Tensor weight_, bias_;
};
class Conv1d : public ModuleHolder<Conv1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct Conv3dOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  Size3d kernel_size = 1;
  Size3d stride = 1;
  Size3d padding = 0;
  Size3d dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  std::string padding_mode = "zeros";
  std::optional<ConvPadding> padding_preset = std::nullopt;  // padding="same" / "valid"
};

/// 3-D convolution (torch.nn.Conv3d): weight [out, in/groups, kd, kh, kw], bias [out].
class Conv3dImpl : public ModuleImpl {
 public:
  explicit Conv3dImpl(Conv3dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv3d"; }
  json options() const override;
  std::string extra_repr() const override;
  const Conv3dOptions& conv_options() const { return options_; }

 private:
  Conv3dOptions options_;
  Tensor weight_, bias_;
};
class Conv3d : public ModuleHolder<Conv3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct ConvTranspose2dOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  Size2d kernel_size = 1;
  Size2d stride = 1;
  Size2d padding = 0;
  Size2d output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  Size2d dilation = 1;
};

/// Transposed 2-D convolution (torch.nn.ConvTranspose2d): weight [in, out/groups, kh, kw] (the
/// transposed layout, as PyTorch), bias [out]; zero padding only, as PyTorch.
///   nn::ConvTranspose2d up(ConvTranspose2dOptions{.in_channels = 16, .out_channels = 8,
///                                                .kernel_size = 2, .stride = 2});
class ConvTranspose2dImpl : public ModuleImpl {
 public:
  explicit ConvTranspose2dImpl(ConvTranspose2dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ConvTranspose2d"; }
  json options() const override;
  std::string extra_repr() const override;
  const ConvTranspose2dOptions& conv_options() const { return options_; }

 private:
  ConvTranspose2dOptions options_;
  Tensor weight_, bias_;
};
class ConvTranspose2d : public ModuleHolder<ConvTranspose2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct ConvTranspose1dOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel_size = 1;
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  int64_t dilation = 1;
};

/// Transposed 1-D convolution (torch.nn.ConvTranspose1d): weight [in, out/groups, k].
class ConvTranspose1dImpl : public ModuleImpl {
 public:
  explicit ConvTranspose1dImpl(ConvTranspose1dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ConvTranspose1d"; }
  json options() const override;
  std::string extra_repr() const override;
  const ConvTranspose1dOptions& conv_options() const { return options_; }

 private:
  ConvTranspose1dOptions options_;
  Tensor weight_, bias_;
};
class ConvTranspose1d : public ModuleHolder<ConvTranspose1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct MaxPool1dOptions {
  int64_t kernel_size = 1;
  std::optional<int64_t> stride = std::nullopt;  // the kernel size when unset
  int64_t padding = 0;
  int64_t dilation = 1;
  bool ceil_mode = false;
};

/// torch.nn.MaxPool1d over [N, C, L] (or [C, L]).
class MaxPool1dImpl : public ModuleImpl {
 public:
  explicit MaxPool1dImpl(MaxPool1dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool1d"; }
  json options() const override;
  std::string extra_repr() const override;

 private:
  MaxPool1dOptions options_;
};
class MaxPool1d : public ModuleHolder<MaxPool1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct AvgPool1dOptions {
  int64_t kernel_size = 1;
  std::optional<int64_t> stride = std::nullopt;  // the kernel size when unset
  int64_t padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

/// torch.nn.AvgPool1d over [N, C, L] (or [C, L]).
class AvgPool1dImpl : public ModuleImpl {
 public:
  explicit AvgPool1dImpl(AvgPool1dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool1d"; }
  json options() const override;
  std::string extra_repr() const override;

 private:
  AvgPool1dOptions options_;
};
class AvgPool1d : public ModuleHolder<AvgPool1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// The adaptive pools (torch.nn.AdaptiveAvgPool1d/2d, AdaptiveMaxPool1d/2d): a fixed output
/// size whatever the input's. `dims` is 1 or 2; output_size.h is unused for 1 (1-D sizes
/// are output_size.w). `max` chooses max pooling.
struct AdaptivePoolOptions {
  Size2d output_size = 1;
};
class AdaptivePoolImpl : public ModuleImpl {
 public:
  AdaptivePoolImpl(int dims, bool max, AdaptivePoolOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;
  json options() const override;
  std::string extra_repr() const override;

 private:
  int dims_;
  bool max_;
  AdaptivePoolOptions options_;
};
class AdaptiveAvgPool1dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveAvgPool1dImpl(int64_t output_size)
      : AdaptivePoolImpl(1, false, {Size2d(1, output_size)}) {}
};
class AdaptiveAvgPool2dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveAvgPool2dImpl(Size2d output_size) : AdaptivePoolImpl(2, false, {output_size}) {}
};
class AdaptiveMaxPool1dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveMaxPool1dImpl(int64_t output_size)
      : AdaptivePoolImpl(1, true, {Size2d(1, output_size)}) {}
};
class AdaptiveMaxPool2dImpl : public AdaptivePoolImpl {
 public:
  explicit AdaptiveMaxPool2dImpl(Size2d output_size) : AdaptivePoolImpl(2, true, {output_size}) {}
};
class AdaptiveAvgPool1d : public ModuleHolder<AdaptiveAvgPool1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class AdaptiveAvgPool2d : public ModuleHolder<AdaptiveAvgPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class AdaptiveMaxPool1d : public ModuleHolder<AdaptiveMaxPool1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class AdaptiveMaxPool2d : public ModuleHolder<AdaptiveMaxPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// torch.nn.Upsample: interpolate with fixed options (size or scale_factor, mode,
/// align_corners).  nn::Upsample up(InterpolateOptions{.scale_factor = {2.0}});
class UpsampleImpl : public ModuleImpl {
 public:
  explicit UpsampleImpl(InterpolateOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Upsample"; }
  json options() const override;
  std::string extra_repr() const override;

 private:
  InterpolateOptions options_;
};
class Upsample : public ModuleHolder<UpsampleImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// torch.nn.PixelShuffle / PixelUnshuffle: [N, C·r², H, W] <-> [N, C, H·r, W·r].
class PixelShuffleImpl : public ModuleImpl {
 public:
  explicit PixelShuffleImpl(int64_t upscale_factor);
  Tensor forward(const Tensor& x) override { return pixel_shuffle(x, factor_); }
  std::string type_name() const override { return "PixelShuffle"; }
  json options() const override { return {{"upscale_factor", factor_}}; }
  std::string extra_repr() const override { return "upscale_factor=" + std::to_string(factor_); }

 private:
  int64_t factor_;
};
class PixelShuffle : public ModuleHolder<PixelShuffleImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class PixelUnshuffleImpl : public ModuleImpl {
 public:
  explicit PixelUnshuffleImpl(int64_t downscale_factor);
  Tensor forward(const Tensor& x) override { return pixel_unshuffle(x, factor_); }
  std::string type_name() const override { return "PixelUnshuffle"; }
  json options() const override { return {{"downscale_factor", factor_}}; }
  std::string extra_repr() const override { return "downscale_factor=" + std::to_string(factor_); }

 private:
  int64_t factor_;
};
class PixelUnshuffle : public ModuleHolder<PixelUnshuffleImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// torch.nn.Unfold (im2col: [N, C, H, W] -> [N, C·kh·kw, L]) and torch.nn.Fold (col2im).
struct FoldOptions {
  Size2d output_size = 1;  // Fold only
  Size2d kernel_size = 1;
  Size2d dilation = 1;
  Size2d padding = 0;
  Size2d stride = 1;
};
class UnfoldImpl : public ModuleImpl {
 public:
  explicit UnfoldImpl(FoldOptions options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Unfold"; }
  json options() const override;
  std::string extra_repr() const override;

 private:
  FoldOptions options_;
};
class Unfold : public ModuleHolder<UnfoldImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class FoldImpl : public ModuleImpl {
 public:
  explicit FoldImpl(FoldOptions options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Fold"; }
  json options() const override;
  std::string extra_repr() const override;

 private:
  FoldOptions options_;
};
class Fold : public ModuleHolder<FoldImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
