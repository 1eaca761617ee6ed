// ember/nn/norm.hpp — BatchNorm1d/2d, LayerNorm, GroupNorm, InstanceNorm1d/2d and RMSNorm with
// PyTorch's parameter and buffer names: weight, bias, running_mean, running_var,
// num_batches_tracked (i64, 0-d).
//
//   nn::BatchNorm2d bn(32);
//   Tensor y = bn(x);       // training: batch statistics; running stats updated in place
//   bn->eval();             // eval: running statistics
#pragma once

#include <optional>

#include "ember/nn/module.hpp"

namespace ember::nn {

/// The fields of BatchNormOptions and InstanceNormOptions (momentum optional in the first).
template <typename O>
constexpr auto running_stats_fields_of() {
  return std::tuple{
      field("num_features", &O::num_features, opts::above(0)),
      field("eps", &O::eps, opts::at_least(0)), field("momentum", &O::momentum, opts::closed(0, 1)),
      field("affine", &O::affine), field("track_running_stats", &O::track_running_stats)};
}

struct BatchNormOptions {
  int64_t num_features = 0;
  double eps = 1e-5;
  /// Weight of the new batch in the running stats; unset: cumulative moving average
  /// (running = mean over every batch so far), as momentum=None in PyTorch.
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
  static constexpr auto fields() { return running_stats_fields_of<BatchNormOptions>(); }
};

/// Batch normalisation over dim 1 (torch.nn.BatchNorm*d). Training normalises with the batch
/// statistics and updates running_mean / running_var (unbiased) and num_batches_tracked;
/// eval uses the running statistics (the batch's when track_running_stats is false).
class BatchNormImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor& x) override;
  /// relu(forward(x) + residual) (residual undefined: relu(forward(x))) in one pass over the
  /// activations (ember::batch_norm_relu): a ResNet's BatchNorm-ReLU and its residual join.
  /// Charged to this module in a profile; with forward hooks, the hooks run on the layer's own
  /// output and the add and ReLU after. Sequential uses it for a BatchNorm followed by a ReLU.
  Tensor forward_relu(const Tensor& x, const Tensor& residual = Tensor());
  /// Sequential's fusion: a following ReLU in the same pass (forward_relu); other activations
  /// do not fuse (an undefined tensor).
  Tensor forward_with_epilogue(const Tensor& x, Activation activation) override;
  json options() const override;
  std::string extra_repr() const override;
  const BatchNormOptions& norm_options() const { return options_; }
  /// Zeroes the running mean and num_batches_tracked and sets the running variance to one.
  void reset_running_stats();
  /// Sets momentum (unset: cumulative average), as assigning bn.momentum in PyTorch
  /// (optim::update_bn does). Throws unless 0 <= momentum <= 1.
  void set_momentum(std::optional<double> momentum);

 protected:
  BatchNormImpl(BatchNormOptions options, const char* name);
  /// Throws unless `x` has a rank this variant accepts.
  virtual void check_input(const Tensor& x) const = 0;

 private:
  Tensor norm_forward(const Tensor& x, const Tensor& residual, bool relu_after);
  BatchNormOptions options_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

/// Accepts [N, C] or [N, C, L].
class BatchNorm1dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm1dImpl(BatchNormOptions options) : BatchNormImpl(options, "BatchNorm1d") {}
  explicit BatchNorm1dImpl(int64_t num_features, double eps = 1e-5,
                           std::optional<double> momentum = 0.1, bool affine = true,
                           bool track_running_stats = true)
      : BatchNorm1dImpl(
            BatchNormOptions{num_features, eps, momentum, affine, track_running_stats}) {}
  std::string type_name() const override { return "BatchNorm1d"; }

 protected:
  void check_input(const Tensor& x) const override;
};
class BatchNorm1d : public ModuleHolder<BatchNorm1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// Accepts [N, C, H, W].
class BatchNorm2dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm2dImpl(BatchNormOptions options) : BatchNormImpl(options, "BatchNorm2d") {}
  explicit BatchNorm2dImpl(int64_t num_features, double eps = 1e-5,
                           std::optional<double> momentum = 0.1, bool affine = true,
                           bool track_running_stats = true)
      : BatchNorm2dImpl(
            BatchNormOptions{num_features, eps, momentum, affine, track_running_stats}) {}
  std::string type_name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Tensor& x) const override;
};
class BatchNorm2d : public ModuleHolder<BatchNorm2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct LayerNormOptions {
  Shape normalized_shape{};
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;  // only with elementwise_affine
  static constexpr auto fields() {
    using O = LayerNormOptions;
    return std::tuple{field("normalized_shape", &O::normalized_shape), field("eps", &O::eps),
                      field("elementwise_affine", &O::elementwise_affine), field("bias", &O::bias)};
  }
};

/// Normalises over the trailing `normalized_shape` dims (torch.nn.LayerNorm); weight = 1 and
/// bias = 0 of that shape when elementwise_affine.
class LayerNormImpl : public ModuleImpl {
 public:
  explicit LayerNormImpl(LayerNormOptions options);
  explicit LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                         bool bias = true)
      : LayerNormImpl(LayerNormOptions{normalized_shape, eps, elementwise_affine, bias}) {}
  explicit LayerNormImpl(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true,
                         bool bias = true)
      : LayerNormImpl(Shape{normalized_size}, eps, elementwise_affine, bias) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  json options() const override;
  std::string extra_repr() const override;
  const LayerNormOptions& norm_options() const { return options_; }
  /// The affine weight and bias (undefined without elementwise_affine, or bias = false).
  Tensor weight() const { return weight_; }
  Tensor bias() const { return bias_; }

 private:
  LayerNormOptions options_;
  Tensor weight_, bias_;
};
class LayerNorm : public ModuleHolder<LayerNormImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct GroupNormOptions {
  int64_t num_groups = 0;
  int64_t num_channels = 0;
  double eps = 1e-5;
  bool affine = true;
  static constexpr auto fields() {
    using O = GroupNormOptions;
    return std::tuple{field("num_groups", &O::num_groups, opts::above(0)),
                      field("num_channels", &O::num_channels, opts::above(0)),
                      field("eps", &O::eps, opts::at_least(0)), field("affine", &O::affine)};
  }
};

/// torch.nn.GroupNorm: the channels of [N, C, *] are split into num_groups groups, each
/// (sample, group) normalised over its channels and positions (biased variance); then the
/// per-channel affine weight (1) and bias (0) when affine.
class GroupNormImpl : public ModuleImpl {
 public:
  explicit GroupNormImpl(GroupNormOptions options);
  GroupNormImpl(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true)
      : GroupNormImpl(GroupNormOptions{num_groups, num_channels, eps, affine}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GroupNorm"; }
  json options() const override;
  std::string extra_repr() const override;

 private:
  GroupNormOptions options_;
  Tensor weight_, bias_;
};
class GroupNorm : public ModuleHolder<GroupNormImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct InstanceNormOptions {
  int64_t num_features = 0;
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = false;
  bool track_running_stats = false;
  static constexpr auto fields() { return running_stats_fields_of<InstanceNormOptions>(); }
};

/// torch.nn.InstanceNorm1d/2d: each (sample, channel) normalised over its positions. With
/// track_running_stats, training also updates running_mean / running_var (the batch average
/// of the instance means and unbiased variances, weighted by momentum) and eval normalises
/// with them; num_batches_tracked is kept (and, as in PyTorch, not advanced).
class InstanceNormImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor& x) override;
  json options() const override;
  std::string extra_repr() const override;

 protected:
  InstanceNormImpl(InstanceNormOptions options, int spatial_dims, const char* name);

 private:
  InstanceNormOptions options_;
  int spatial_dims_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

/// [N, C, L] or unbatched [C, L].
class InstanceNorm1dImpl : public InstanceNormImpl {
 public:
  explicit InstanceNorm1dImpl(InstanceNormOptions options)
      : InstanceNormImpl(options, 1, "InstanceNorm1d") {}
  explicit InstanceNorm1dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                              bool affine = false, bool track_running_stats = false)
      : InstanceNorm1dImpl(
            InstanceNormOptions{num_features, eps, momentum, affine, track_running_stats}) {}
  std::string type_name() const override { return "InstanceNorm1d"; }
};
class InstanceNorm1d : public ModuleHolder<InstanceNorm1dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// [N, C, H, W] or unbatched [C, H, W].
class InstanceNorm2dImpl : public InstanceNormImpl {
 public:
  explicit InstanceNorm2dImpl(InstanceNormOptions options)
      : InstanceNormImpl(options, 2, "InstanceNorm2d") {}
  explicit InstanceNorm2dImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                              bool affine = false, bool track_running_stats = false)
      : InstanceNorm2dImpl(
            InstanceNormOptions{num_features, eps, momentum, affine, track_running_stats}) {}
  std::string type_name() const override { return "InstanceNorm2d"; }
};
class InstanceNorm2d : public ModuleHolder<InstanceNorm2dImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct RMSNormOptions {
  Shape normalized_shape{};
  /// Unset: the machine epsilon of the input's dtype (torch.finfo(x.dtype).eps), as PyTorch.
  std::optional<double> eps = std::nullopt;
  bool elementwise_affine = true;
  static constexpr auto fields() {
    using O = RMSNormOptions;
    return std::tuple{field("normalized_shape", &O::normalized_shape), field("eps", &O::eps),
                      field("elementwise_affine", &O::elementwise_affine)};
  }
};

/// torch.nn.RMSNorm: x / √(mean(x²) + eps) over the trailing normalized_shape dims, times
/// weight (1, of that shape) when elementwise_affine.
class RMSNormImpl : public ModuleImpl {
 public:
  explicit RMSNormImpl(RMSNormOptions options);
  explicit RMSNormImpl(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                       bool elementwise_affine = true)
      : RMSNormImpl(RMSNormOptions{normalized_shape, eps, elementwise_affine}) {}
  explicit RMSNormImpl(int64_t normalized_size, std::optional<double> eps = std::nullopt,
                       bool elementwise_affine = true)
      : RMSNormImpl(Shape{normalized_size}, eps, elementwise_affine) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "RMSNorm"; }
  json options() const override;
  std::string extra_repr() const override;
  const RMSNormOptions& norm_options() const { return options_; }
  /// The scale (undefined without elementwise_affine).
  Tensor weight() const { return weight_; }

 private:
  RMSNormOptions options_;
  Tensor weight_;
};
class RMSNorm : public ModuleHolder<RMSNormImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct LocalResponseNormOptions {
  int64_t size = 1;
  double alpha = 1e-4;
  double beta = 0.75;
  double k = 1.0;
  static constexpr auto fields() {
    using O = LocalResponseNormOptions;
    return std::tuple{field("size", &O::size, opts::at_least(1)), field("alpha", &O::alpha),
                      field("beta", &O::beta), field("k", &O::k)};
  }
};

/// torch.nn.LocalResponseNorm (local_response_norm of ember/ops_nn.hpp): x over
/// (k + alpha/size · Σ x² of `size` neighbouring channels)^beta.  nn::LocalResponseNorm lrn(5);
class LocalResponseNormImpl : public ModuleImpl {
 public:
  explicit LocalResponseNormImpl(LocalResponseNormOptions options);
  explicit LocalResponseNormImpl(int64_t size, double alpha = 1e-4, double beta = 0.75,
                                 double k = 1.0)
      : LocalResponseNormImpl(LocalResponseNormOptions{size, alpha, beta, k}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LocalResponseNorm"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  LocalResponseNormOptions options_;
};
class LocalResponseNorm : public ModuleHolder<LocalResponseNormImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
