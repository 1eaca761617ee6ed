// ember/nn/pool3d.hpp — issue 32's pooling modules (torch.nn.MaxPool3d, AvgPool3d,
// AdaptiveAvgPool3d, AdaptiveMaxPool3d, MaxUnpool1d/2d/3d, LPPool1d/2d/3d,
// FractionalMaxPool2d/3d) over the functional
// pools of ember/ops_nn.hpp, with PyTorch's options, config() and printed form.
//
//   nn::MaxPool3d pool(nn::MaxPool3dOptions{.kernel_size = 2});
//   Tensor y = pool(x);                                   // x [N, C, D, H, W]
//   nn::MaxUnpool2d unpool(nn::MaxUnpool2dOptions{.kernel_size = 2});
//   Tensor back = unpool->forward(y2, indices2);          // indices from max_pool2d_with_indices
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/module.hpp"
#include "ember/ops_nn.hpp"

namespace ember::nn {

struct MaxPool3dOptions {
  Size3d kernel_size = 1;
  std::optional<Size3d> stride = std::nullopt;  // the kernel size when unset
  Size3d padding = 0;
  Size3d dilation = 1;
  bool ceil_mode = false;
  static constexpr auto fields() {
    using O = MaxPool3dOptions;
    return std::tuple{field("kernel_size", &O::kernel_size), field("stride", &O::stride),
                      field("padding", &O::padding), field("dilation", &O::dilation),
                      field("ceil_mode", &O::ceil_mode)};
  }
};

/// torch.nn.MaxPool3d over [N, C, D, H, W] (or [C, D, H, W]); padding counts as -inf.
class MaxPool3dImpl : public ModuleImpl {
 public:
  explicit MaxPool3dImpl(MaxPool3dOptions options);
  Tensor forward(const Tensor& x) override;
  /// The pooled values and their indices (for MaxUnpool3d).
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string type_name() const override { return "MaxPool3d"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  MaxPool3dOptions options_;
};
class MaxPool3d : public ModuleHolder<MaxPool3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct AvgPool3dOptions {
  Size3d kernel_size = 1;
  std::optional<Size3d> stride = std::nullopt;  // the kernel size when unset
  Size3d padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override = std::nullopt;
  static constexpr auto fields() {
    using O = AvgPool3dOptions;
    return std::tuple{field("kernel_size", &O::kernel_size),
                      field("stride", &O::stride),
                      field("padding", &O::padding),
                      field("ceil_mode", &O::ceil_mode),
                      field("count_include_pad", &O::count_include_pad),
                      field("divisor_override", &O::divisor_override)};
  }
};

/// torch.nn.AvgPool3d over [N, C, D, H, W] (or [C, D, H, W]).
class AvgPool3dImpl : public ModuleImpl {
 public:
  explicit AvgPool3dImpl(AvgPool3dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool3d"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  AvgPool3dOptions options_;
};
class AvgPool3d : public ModuleHolder<AvgPool3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct AdaptivePool3dOptions {
  Size3d output_size = 1;
  static constexpr auto fields() {
    return std::tuple{field("output_size", &AdaptivePool3dOptions::output_size)};
  }
};

/// torch.nn.AdaptiveAvgPool3d / AdaptiveMaxPool3d: a fixed [D, H, W] output size.
class AdaptivePool3dImpl : public ModuleImpl {
 public:
  AdaptivePool3dImpl(bool max, AdaptivePool3dOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override {
    return max_ ? "AdaptiveMaxPool3d" : "AdaptiveAvgPool3d";
  }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;
  const AdaptivePool3dOptions& pool_options() const { return options_; }

 private:
  bool max_;
  AdaptivePool3dOptions options_;
};
class AdaptiveAvgPool3dImpl : public AdaptivePool3dImpl {
 public:
  explicit AdaptiveAvgPool3dImpl(AdaptivePool3dOptions options)
      : AdaptivePool3dImpl(false, options) {}
  explicit AdaptiveAvgPool3dImpl(Size3d output_size) : AdaptivePool3dImpl(false, {output_size}) {}
};
class AdaptiveMaxPool3dImpl : public AdaptivePool3dImpl {
 public:
  explicit AdaptiveMaxPool3dImpl(AdaptivePool3dOptions options)
      : AdaptivePool3dImpl(true, options) {}
  explicit AdaptiveMaxPool3dImpl(Size3d output_size) : AdaptivePool3dImpl(true, {output_size}) {}
  /// The pooled values and their indices.
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
};
class AdaptiveAvgPool3d : public ModuleHolder<AdaptiveAvgPool3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class AdaptiveMaxPool3d : public ModuleHolder<AdaptiveMaxPool3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// The options of MaxUnpool1d/2d/3d: Size is int64_t, Size2d or Size3d.
template <typename Size>
struct MaxUnpoolOptions {
  Size kernel_size = 1;
  std::optional<Size> stride = std::nullopt;  // the kernel size when unset
  Size padding = 0;
  static constexpr auto fields() {
    using O = MaxUnpoolOptions;
    return std::tuple{field("kernel_size", &O::kernel_size), field("stride", &O::stride),
                      field("padding", &O::padding)};
  }
};
using MaxUnpool1dOptions = MaxUnpoolOptions<int64_t>;
using MaxUnpool2dOptions = MaxUnpoolOptions<Size2d>;
using MaxUnpool3dOptions = MaxUnpoolOptions<Size3d>;

/// torch.nn.MaxUnpool1d/2d/3d: forward(x, indices[, output_size]) scatters the pooled values
/// back (max_unpool1d/2d/3d); forward(x) alone is refused (the indices are needed).
template <typename Size>
class MaxUnpoolImpl : public ModuleImpl {
 public:
  explicit MaxUnpoolImpl(MaxUnpoolOptions<Size> options);
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, const Tensor& indices,
                 std::optional<Size> output_size = std::nullopt);
  std::string type_name() const override;
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  MaxUnpoolOptions<Size> options_;
};
using MaxUnpool1dImpl = MaxUnpoolImpl<int64_t>;
using MaxUnpool2dImpl = MaxUnpoolImpl<Size2d>;
using MaxUnpool3dImpl = MaxUnpoolImpl<Size3d>;
class MaxUnpool1d : public ModuleHolder<MaxUnpool1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class MaxUnpool2d : public ModuleHolder<MaxUnpool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class MaxUnpool3d : public ModuleHolder<MaxUnpool3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// The options of LPPool1d/2d/3d: Size is int64_t, Size2d or Size3d.
template <typename Size>
struct LPPoolOptions {
  double norm_type = 2.0;
  Size kernel_size = 1;
  std::optional<Size> stride = std::nullopt;  // the kernel size when unset
  bool ceil_mode = false;
  static constexpr auto fields() {
    using O = LPPoolOptions;
    return std::tuple{field("norm_type", &O::norm_type), field("kernel_size", &O::kernel_size),
                      field("stride", &O::stride), field("ceil_mode", &O::ceil_mode)};
  }
};
using LPPool1dOptions = LPPoolOptions<int64_t>;
using LPPool2dOptions = LPPoolOptions<Size2d>;
using LPPool3dOptions = LPPoolOptions<Size3d>;

/// torch.nn.LPPool1d/2d/3d: (Σ_window x^p)^(1/p) (lp_pool1d/2d/3d).
template <typename Size>
class LPPoolImpl : public ModuleImpl {
 public:
  explicit LPPoolImpl(LPPoolOptions<Size> options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  LPPoolOptions<Size> options_;
};
using LPPool1dImpl = LPPoolImpl<int64_t>;
using LPPool2dImpl = LPPoolImpl<Size2d>;
using LPPool3dImpl = LPPoolImpl<Size3d>;
class LPPool1d : public ModuleHolder<LPPool1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class LPPool2d : public ModuleHolder<LPPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class LPPool3d : public ModuleHolder<LPPool3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// The options of FractionalMaxPool2d/3d: Size is Size2d or Size3d; exactly one of
/// output_size and output_ratio (one ratio for every dim, or one per dim).
template <typename Size>
struct FractionalMaxPoolModuleOptions {
  Size kernel_size = 1;
  std::optional<Size> output_size = std::nullopt;
  std::vector<double> output_ratio = {};
  static constexpr auto fields() {
    using O = FractionalMaxPoolModuleOptions;
    return std::tuple{field("kernel_size", &O::kernel_size), field("output_size", &O::output_size),
                      field("output_ratio", &O::output_ratio)};
  }
};
using FractionalMaxPool2dOptions = FractionalMaxPoolModuleOptions<Size2d>;
using FractionalMaxPool3dOptions = FractionalMaxPoolModuleOptions<Size3d>;

/// torch.nn.FractionalMaxPool2d/3d (fractional_max_pool2d/3d): each forward draws its window
/// offsets from ember's generator; forward_with_indices also returns the indices.
template <typename Size>
class FractionalMaxPoolImpl : public ModuleImpl {
 public:
  explicit FractionalMaxPoolImpl(FractionalMaxPoolModuleOptions<Size> options);
  Tensor forward(const Tensor& x) override { return forward_with_indices(x).first; }
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string type_name() const override;
  json options() const override { return options_json(options_); }

 private:
  FractionalMaxPoolModuleOptions<Size> options_;
};
using FractionalMaxPool2dImpl = FractionalMaxPoolImpl<Size2d>;
using FractionalMaxPool3dImpl = FractionalMaxPoolImpl<Size3d>;
class FractionalMaxPool2d : public ModuleHolder<FractionalMaxPool2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};
class FractionalMaxPool3d : public ModuleHolder<FractionalMaxPool3dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
