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

namespace conv_fields {

// A convolution's "padding" key: its padding (a number or a list) or, when padding_preset is
// set, "same" / "valid"; one key for the two members.
template <typename O>
json conv_padding_json(const O& o) {
  if (o.padding_preset) return *o.padding_preset == ConvPadding::same ? "same" : "valid";
  return opts::detail::member_json(o.padding);
}
template <typename O>
void read_conv_padding(const json& v, O& o, const std::string& who) {
  o.padding_preset = std::nullopt;
  if (!v.is_string()) {
    opts::detail::read_member(v, "padding", o.padding, who, opts::UnknownKeys::refuse);
    return;
  }
  const std::string p = v.get<std::string>();
  EMBER_CHECK(p == "same" || p == "valid", who, " options: padding is '", p,
              "' (expected a number, a list, \"same\" or \"valid\")");
  o.padding_preset = p == "same" ? ConvPadding::same : ConvPadding::valid;
  o.padding = 0;
}
template <typename O>
constexpr auto conv_padding_field() {
  return opts::custom_field<O>("padding", &conv_padding_json<O>, &read_conv_padding<O>, 2);
}

// The fields of Conv1d/2d/3dOptions, which differ only in their sizes' type.
template <typename O>
constexpr auto conv_fields_of() {
  return std::tuple{field("in_channels", &O::in_channels),
                    field("out_channels", &O::out_channels),
                    field("kernel_size", &O::kernel_size),
                    field("stride", &O::stride),
                    conv_padding_field<O>(),
                    field("dilation", &O::dilation),
                    field("groups", &O::groups),
                    field("bias", &O::bias),
                    field("padding_mode", &O::padding_mode)};
}

// The fields of ConvTranspose1d/2dOptions.
template <typename O>
constexpr auto conv_transpose_fields_of() {
  return std::tuple{
      field("in_channels", &O::in_channels), field("out_channels", &O::out_channels),
      field("kernel_size", &O::kernel_size), field("stride", &O::stride),
      field("padding", &O::padding),         field("output_padding", &O::output_padding),
      field("groups", &O::groups),           field("bias", &O::bias),
      field("dilation", &O::dilation)};
}

}  // namespace conv_fields

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
  static constexpr auto fields() { return conv_fields::conv_fields_of<Conv2dOptions>(); }
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
  void rebind_parameter(const std::string& name, const Tensor& param) override {
    (name == "weight" ? weight_ : bias_) = param;  // tie() or a parametrization checked it
  }
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
  static constexpr auto fields() {
    using O = MaxPool2dOptions;
    return std::tuple{field("kernel_size", &O::kernel_size), field("stride", &O::stride),
                      field("padding", &O::padding), field("dilation", &O::dilation),
                      field("ceil_mode", &O::ceil_mode)};
  }
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
  static constexpr auto fields() {
    using O = AvgPool2dOptions;
    return std::tuple{field("kernel_size", &O::kernel_size), field("stride", &O::stride),
                      field("padding", &O::padding), field("ceil_mode", &O::ceil_mode),
                      field("count_include_pad", &O::count_include_pad)};
  }
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

// ---- the other convolutions (src/nn/conv_nd.cpp) and pools (src/nn/pool.cpp) ----

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
  static constexpr auto fields() { return conv_fields::conv_fields_of<Conv1dOptions>(); }
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
  void rebind_parameter(const std::string& name, const Tensor& param) override {
    (name == "weight" ? weight_ : bias_) = param;  // tie() or a parametrization checked it
  }
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
  static constexpr auto fields() { return conv_fields::conv_fields_of<Conv3dOptions>(); }
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
  void rebind_parameter(const std::string& name, const Tensor& param) override {
    (name == "weight" ? weight_ : bias_) = param;  // tie() or a parametrization checked it
  }
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
  static constexpr auto fields() {
    return conv_fields::conv_transpose_fields_of<ConvTranspose2dOptions>();
  }
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
  void rebind_parameter(const std::string& name, const Tensor& param) override {
    (name == "weight" ? weight_ : bias_) = param;  // tie() or a parametrization checked it
  }
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
  static constexpr auto fields() {
    return conv_fields::conv_transpose_fields_of<ConvTranspose1dOptions>();
  }
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
  void rebind_parameter(const std::string& name, const Tensor& param) override {
    (name == "weight" ? weight_ : bias_) = param;  // tie() or a parametrization checked it
  }
};
class ConvTranspose1d : public ModuleHolder<ConvTranspose1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct ConvTranspose3dOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  Size3d kernel_size = 1;
  Size3d stride = 1;
  Size3d padding = 0;
  Size3d output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  Size3d dilation = 1;
  static constexpr auto fields() {
    return conv_fields::conv_transpose_fields_of<ConvTranspose3dOptions>();
  }
};

/// Transposed 3-D convolution (torch.nn.ConvTranspose3d, conv_transpose3d of
/// ember/ops_nn.hpp): weight [in, out/groups, kd, kh, kw], bias [out].
class ConvTranspose3dImpl : public ModuleImpl {
 public:
  explicit ConvTranspose3dImpl(ConvTranspose3dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ConvTranspose3d"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;
  const ConvTranspose3dOptions& conv_options() const { return options_; }

 private:
  ConvTranspose3dOptions options_;
  Tensor weight_, bias_;
  void rebind_parameter(const std::string& name, const Tensor& param) override {
    (name == "weight" ? weight_ : bias_) = param;  // tie() or a parametrization checked it
  }
};
class ConvTranspose3d : public ModuleHolder<ConvTranspose3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct MaxPool1dOptions {
  int64_t kernel_size = 1;
  std::optional<int64_t> stride = std::nullopt;  // the kernel size when unset
  int64_t padding = 0;
  int64_t dilation = 1;
  bool ceil_mode = false;
  static constexpr auto fields() {
    using O = MaxPool1dOptions;
    return std::tuple{field("kernel_size", &O::kernel_size, opts::at_least(1)),
                      field("stride", &O::stride, opts::at_least(1)),
                      field("padding", &O::padding, opts::at_least(0)),
                      field("dilation", &O::dilation, opts::at_least(1)),
                      field("ceil_mode", &O::ceil_mode)};
  }
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
  static constexpr auto fields() {
    using O = AvgPool1dOptions;
    return std::tuple{field("kernel_size", &O::kernel_size, opts::at_least(1)),
                      field("stride", &O::stride, opts::at_least(1)),
                      field("padding", &O::padding, opts::at_least(0)),
                      field("ceil_mode", &O::ceil_mode),
                      field("count_include_pad", &O::count_include_pad)};
  }
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
  static constexpr auto fields() {
    return std::tuple{field("output_size", &AdaptivePoolOptions::output_size)};
  }
};
/// The 1-D adaptive pools' options as config() writes them: the output length.
struct AdaptivePool1dOptions {
  int64_t output_size = 1;
  static constexpr auto fields() {
    return std::tuple{field("output_size", &AdaptivePool1dOptions::output_size)};
  }
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

struct PixelShuffleOptions {
  int64_t upscale_factor = 1;
  static constexpr auto fields() {
    return std::tuple{
        field("upscale_factor", &PixelShuffleOptions::upscale_factor, opts::at_least(1))};
  }
};
struct PixelUnshuffleOptions {
  int64_t downscale_factor = 1;
  static constexpr auto fields() {
    return std::tuple{
        field("downscale_factor", &PixelUnshuffleOptions::downscale_factor, opts::at_least(1))};
  }
};

/// torch.nn.PixelShuffle / PixelUnshuffle: [N, C·r², H, W] <-> [N, C, H·r, W·r].
class PixelShuffleImpl : public ModuleImpl {
 public:
  explicit PixelShuffleImpl(PixelShuffleOptions options);
  explicit PixelShuffleImpl(int64_t upscale_factor)
      : PixelShuffleImpl(PixelShuffleOptions{upscale_factor}) {}
  Tensor forward(const Tensor& x) override { return pixel_shuffle(x, options_.upscale_factor); }
  std::string type_name() const override { return "PixelShuffle"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  PixelShuffleOptions options_;
};
class PixelShuffle : public ModuleHolder<PixelShuffleImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class PixelUnshuffleImpl : public ModuleImpl {
 public:
  explicit PixelUnshuffleImpl(PixelUnshuffleOptions options);
  explicit PixelUnshuffleImpl(int64_t downscale_factor)
      : PixelUnshuffleImpl(PixelUnshuffleOptions{downscale_factor}) {}
  Tensor forward(const Tensor& x) override { return pixel_unshuffle(x, options_.downscale_factor); }
  std::string type_name() const override { return "PixelUnshuffle"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  PixelUnshuffleOptions options_;
};
class PixelUnshuffle : public ModuleHolder<PixelUnshuffleImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct ChannelShuffleOptions {
  int64_t groups = 1;
  static constexpr auto fields() {
    return std::tuple{field("groups", &ChannelShuffleOptions::groups, opts::at_least(1))};
  }
};

/// torch.nn.ChannelShuffle (channel_shuffle of ember/ops_nn.hpp): [N, g·k, *] regrouped so
/// the channels of the g groups interleave.  nn::ChannelShuffle shuffle(2);
class ChannelShuffleImpl : public ModuleImpl {
 public:
  explicit ChannelShuffleImpl(ChannelShuffleOptions options);
  explicit ChannelShuffleImpl(int64_t groups) : ChannelShuffleImpl(ChannelShuffleOptions{groups}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ChannelShuffle"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  ChannelShuffleOptions options_;
};
class ChannelShuffle : public ModuleHolder<ChannelShuffleImpl> {
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
  static constexpr auto fields() {
    using O = FoldOptions;
    return std::tuple{field("output_size", &O::output_size), field("kernel_size", &O::kernel_size),
                      field("dilation", &O::dilation), field("padding", &O::padding),
                      field("stride", &O::stride)};
  }
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
