// ember/nn/activation.hpp — the activation modules of torch.nn, grouped as PyTorch's docs
// group them: the rectifiers (ReLU, ReLU6, LeakyReLU, PReLU, ELU, SELU, GELU, SiLU, Mish), the
// sigmoids (Sigmoid, LogSigmoid, Tanh, Hardtanh, Hardswish, Hardsigmoid, Softplus), the
// shrinkage and threshold ones (CELU, Softsign, Tanhshrink, Hardshrink, Softshrink, Threshold,
// RReLU), GLU, and the normalising ones (Softmax, LogSoftmax).
//
// Each module has PyTorch's constructor arguments and defaults, prints as PyTorch prints it,
// and is registered for nn::build; those with arguments keep them in an options struct
// (ember/nn/options.hpp). The ones without are one template, StatelessActivationImpl, over the
// op they apply. Only PReLU holds a parameter (`weight`).
//
//   nn::Sequential net({nn::Linear(8, 16), nn::LeakyReLU(0.2), nn::Linear(16, 4), nn::PReLU(4)});
//   Tensor y = nn::SiLU()(x);
#pragma once

#include <string>
#include <utility>

#include "ember/nn/module.hpp"
#include "ember/ops.hpp"
#include "ember/ops_math.hpp"

namespace ember::nn {

/// A module that applies one elementwise function and holds nothing: Fn::apply(x), named
/// Fn::kName. nn::SiLU, nn::Sigmoid, nn::Tanh, nn::ReLU6, nn::SELU, nn::Mish, ... are this.
template <typename Fn>
class StatelessActivationImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor& x) override { return Fn::apply(x); }
  std::string type_name() const override { return Fn::kName; }
};

// ---- rectifiers

/// max(x, 0).
class ReLUImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string type_name() const override { return "ReLU"; }
  /// A Linear before it in a Sequential applies it in its GEMM's epilogue.
  std::optional<Activation> as_epilogue() const override { return Activation::relu; }
};
class ReLU : public ModuleHolder<ReLUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// min(max(x, 0), 6): Hardtanh(0, 6), printed as PyTorch's ReLU6().
struct ReLU6Fn {
  static constexpr const char* kName = "ReLU6";
  static Tensor apply(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }
};
using ReLU6Impl = StatelessActivationImpl<ReLU6Fn>;
class ReLU6 : public ModuleHolder<ReLU6Impl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct LeakyReLUOptions {
  double negative_slope = 0.01;
  static constexpr auto fields() {
    return std::tuple{field("negative_slope", &LeakyReLUOptions::negative_slope)};
  }
};

/// x where x >= 0, negative_slope·x below.
class LeakyReLUImpl : public ModuleImpl {
 public:
  explicit LeakyReLUImpl(LeakyReLUOptions options) : options_(options) {}
  explicit LeakyReLUImpl(double negative_slope = 0.01) : options_{negative_slope} {}
  Tensor forward(const Tensor& x) override { return leaky_relu(x, options_.negative_slope); }
  std::string type_name() const override { return "LeakyReLU"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  LeakyReLUOptions options_;
};
class LeakyReLU : public ModuleHolder<LeakyReLUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct PReLUOptions {
  int64_t num_parameters = 1;
  double init = 0.25;
  static constexpr auto fields() {
    return std::tuple{field("num_parameters", &PReLUOptions::num_parameters, opts::above(0)),
                      field("init", &PReLUOptions::init)};
  }
};

/// PReLU: x where x >= 0, a·x below, with learnable slopes `weight` [num_parameters] (1, or
/// one per channel = input dim 1), all initialised to `init`.
class PReLUImpl : public ModuleImpl {
 public:
  explicit PReLUImpl(PReLUOptions options);
  explicit PReLUImpl(int64_t num_parameters = 1, double init = 0.25)
      : PReLUImpl(PReLUOptions{num_parameters, init}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "PReLU"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }

 private:
  PReLUOptions options_;
  Tensor weight_;
};
class PReLU : public ModuleHolder<PReLUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct ELUOptions {
  double alpha = 1.0;
  static constexpr auto fields() { return std::tuple{field("alpha", &ELUOptions::alpha)}; }
};

/// x where x > 0, alpha·(eˣ - 1) below.
class ELUImpl : public ModuleImpl {
 public:
  explicit ELUImpl(ELUOptions options) : options_(options) {}
  explicit ELUImpl(double alpha = 1.0) : options_{alpha} {}
  Tensor forward(const Tensor& x) override { return elu(x, options_.alpha); }
  std::string type_name() const override { return "ELU"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  ELUOptions options_;
};
class ELU : public ModuleHolder<ELUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// scale·(max(0, x) + min(0, alpha·(eˣ - 1))) with PyTorch's constants.
struct SELUFn {
  static constexpr const char* kName = "SELU";
  static Tensor apply(const Tensor& x) { return selu(x); }
};
using SELUImpl = StatelessActivationImpl<SELUFn>;
class SELU : public ModuleHolder<SELUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// x·Φ(x); approximate = "tanh" uses the tanh approximation.
struct GELUOptions {
  std::string approximate = "none";  // "none" or "tanh"
  static constexpr auto fields() {
    return std::tuple{field("approximate", &GELUOptions::approximate)};
  }
};

class GELUImpl : public ModuleImpl {
 public:
  explicit GELUImpl(GELUOptions options);
  explicit GELUImpl(std::string approximate = "none")
      : GELUImpl(GELUOptions{std::move(approximate)}) {}
  Tensor forward(const Tensor& x) override { return gelu(x, options_.approximate); }
  std::string type_name() const override { return "GELU"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  GELUOptions options_;
};
class GELU : public ModuleHolder<GELUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// x·σ(x).
struct SiLUFn {
  static constexpr const char* kName = "SiLU";
  static Tensor apply(const Tensor& x) { return silu(x); }
};
using SiLUImpl = StatelessActivationImpl<SiLUFn>;
class SiLU : public ModuleHolder<SiLUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// x·tanh(softplus(x)).
struct MishFn {
  static constexpr const char* kName = "Mish";
  static Tensor apply(const Tensor& x) { return mish(x); }
};
using MishImpl = StatelessActivationImpl<MishFn>;
class Mish : public ModuleHolder<MishImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

// ---- sigmoids and their kin

/// σ(x) = 1 / (1 + e⁻ˣ).
struct SigmoidFn {
  static constexpr const char* kName = "Sigmoid";
  static Tensor apply(const Tensor& x) { return sigmoid(x); }
};
using SigmoidImpl = StatelessActivationImpl<SigmoidFn>;
class Sigmoid : public ModuleHolder<SigmoidImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// log σ(x).
struct LogSigmoidFn {
  static constexpr const char* kName = "LogSigmoid";
  static Tensor apply(const Tensor& x) { return logsigmoid(x); }
};
using LogSigmoidImpl = StatelessActivationImpl<LogSigmoidFn>;
class LogSigmoid : public ModuleHolder<LogSigmoidImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// tanh(x).
struct TanhFn {
  static constexpr const char* kName = "Tanh";
  static Tensor apply(const Tensor& x) { return tanh(x); }
};
using TanhImpl = StatelessActivationImpl<TanhFn>;
class Tanh : public ModuleHolder<TanhImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct HardtanhOptions {
  double min_val = -1.0;
  double max_val = 1.0;
  static constexpr auto fields() {
    return std::tuple{field("min_val", &HardtanhOptions::min_val),
                      field("max_val", &HardtanhOptions::max_val)};
  }
};

/// x clamped to [min_val, max_val] (gradient 1 strictly inside, as PyTorch).
class HardtanhImpl : public ModuleImpl {
 public:
  explicit HardtanhImpl(HardtanhOptions options);
  explicit HardtanhImpl(double min_val = -1.0, double max_val = 1.0)
      : HardtanhImpl(HardtanhOptions{min_val, max_val}) {}
  Tensor forward(const Tensor& x) override {
    return hardtanh(x, options_.min_val, options_.max_val);
  }
  std::string type_name() const override { return "Hardtanh"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  HardtanhOptions options_;
};
class Hardtanh : public ModuleHolder<HardtanhImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// x·relu6(x + 3) / 6.
struct HardswishFn {
  static constexpr const char* kName = "Hardswish";
  static Tensor apply(const Tensor& x) { return hardswish(x); }
};
using HardswishImpl = StatelessActivationImpl<HardswishFn>;
class Hardswish : public ModuleHolder<HardswishImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// relu6(x + 3) / 6.
struct HardsigmoidFn {
  static constexpr const char* kName = "Hardsigmoid";
  static Tensor apply(const Tensor& x) { return hardsigmoid(x); }
};
using HardsigmoidImpl = StatelessActivationImpl<HardsigmoidFn>;
class Hardsigmoid : public ModuleHolder<HardsigmoidImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct SoftplusOptions {
  double beta = 1.0;
  double threshold = 20.0;
  static constexpr auto fields() {
    return std::tuple{field("beta", &SoftplusOptions::beta),
                      field("threshold", &SoftplusOptions::threshold)};
  }
};

/// log(1 + exp(beta·x)) / beta, x itself where beta·x > threshold.
class SoftplusImpl : public ModuleImpl {
 public:
  explicit SoftplusImpl(SoftplusOptions options) : options_(options) {}
  explicit SoftplusImpl(double beta = 1.0, double threshold = 20.0) : options_{beta, threshold} {}
  Tensor forward(const Tensor& x) override {
    return softplus(x, options_.beta, options_.threshold);
  }
  std::string type_name() const override { return "Softplus"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  SoftplusOptions options_;
};
class Softplus : public ModuleHolder<SoftplusImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

// ---- shrinkage and thresholds (issue 32)

struct CELUOptions {
  double alpha = 1.0;
  static constexpr auto fields() { return std::tuple{field("alpha", &CELUOptions::alpha)}; }
};

/// max(0, x) + min(0, alpha·(e^(x/alpha) - 1)) (alpha ≠ 0).
class CELUImpl : public ModuleImpl {
 public:
  explicit CELUImpl(CELUOptions options);
  explicit CELUImpl(double alpha = 1.0) : CELUImpl(CELUOptions{alpha}) {}
  Tensor forward(const Tensor& x) override { return celu(x, options_.alpha); }
  std::string type_name() const override { return "CELU"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  CELUOptions options_;
};
class CELU : public ModuleHolder<CELUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// x / (1 + |x|).
struct SoftsignFn {
  static constexpr const char* kName = "Softsign";
  static Tensor apply(const Tensor& x) { return softsign(x); }
};
using SoftsignImpl = StatelessActivationImpl<SoftsignFn>;
class Softsign : public ModuleHolder<SoftsignImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// x - tanh(x).
struct TanhshrinkFn {
  static constexpr const char* kName = "Tanhshrink";
  static Tensor apply(const Tensor& x) { return tanhshrink(x); }
};
using TanhshrinkImpl = StatelessActivationImpl<TanhshrinkFn>;
class Tanhshrink : public ModuleHolder<TanhshrinkImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// Hardshrink's and Softshrink's one option (PyTorch's `lambd`).
struct ShrinkOptions {
  double lambd = 0.5;
  static constexpr auto fields() { return std::tuple{field("lambd", &ShrinkOptions::lambd)}; }
};

/// x where |x| > lambd, 0 elsewhere; printed as PyTorch prints it, Hardshrink(0.5).
class HardshrinkImpl : public ModuleImpl {
 public:
  explicit HardshrinkImpl(ShrinkOptions options) : options_(options) {}
  explicit HardshrinkImpl(double lambd = 0.5) : options_{lambd} {}
  Tensor forward(const Tensor& x) override { return hardshrink(x, options_.lambd); }
  std::string type_name() const override { return "Hardshrink"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  ShrinkOptions options_;
};
class Hardshrink : public ModuleHolder<HardshrinkImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// x ∓ lambd beyond ±lambd, 0 between (lambd ≥ 0); printed as Softshrink(0.5).
class SoftshrinkImpl : public ModuleImpl {
 public:
  explicit SoftshrinkImpl(ShrinkOptions options);
  explicit SoftshrinkImpl(double lambd = 0.5) : SoftshrinkImpl(ShrinkOptions{lambd}) {}
  Tensor forward(const Tensor& x) override { return softshrink(x, options_.lambd); }
  std::string type_name() const override { return "Softshrink"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  ShrinkOptions options_;
};
class Softshrink : public ModuleHolder<SoftshrinkImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct ThresholdOptions {
  double threshold = 0.0;
  double value = 0.0;
  static constexpr auto fields() {
    return std::tuple{field("threshold", &ThresholdOptions::threshold),
                      field("value", &ThresholdOptions::value)};
  }
};

/// x where x > threshold, value elsewhere (PyTorch's Threshold has no defaults: give both).
class ThresholdImpl : public ModuleImpl {
 public:
  explicit ThresholdImpl(ThresholdOptions options) : options_(options) {}
  ThresholdImpl(double threshold, double value) : options_{threshold, value} {}
  Tensor forward(const Tensor& x) override {
    return ember::threshold(x, options_.threshold, options_.value);
  }
  std::string type_name() const override { return "Threshold"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  ThresholdOptions options_;
};
class Threshold : public ModuleHolder<ThresholdImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct RReLUOptions {
  double lower = 1.0 / 8;
  double upper = 1.0 / 3;
  static constexpr auto fields() {
    return std::tuple{field("lower", &RReLUOptions::lower), field("upper", &RReLUOptions::upper)};
  }
};

/// Randomized leaky ReLU: in training, x·a below 0 with a drawn per element from
/// U(lower, upper) by ember's generator; in evaluation a = (lower + upper)/2.
class RReLUImpl : public ModuleImpl {
 public:
  explicit RReLUImpl(RReLUOptions options);
  explicit RReLUImpl(double lower = 1.0 / 8, double upper = 1.0 / 3)
      : RReLUImpl(RReLUOptions{lower, upper}) {}
  Tensor forward(const Tensor& x) override {
    return rrelu(x, options_.lower, options_.upper, is_training());
  }
  std::string type_name() const override { return "RReLU"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  RReLUOptions options_;
};
class RReLU : public ModuleHolder<RReLUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// GLU: the first half of `dim` times σ of the second half (the size of dim must be even).
class GLUImpl : public ModuleImpl {
 public:
  explicit GLUImpl(DimOptions options) : options_(options) {}
  explicit GLUImpl(int64_t dim = -1) : options_{dim} {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GLU"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override { return "dim=" + std::to_string(options_.dim); }

 private:
  DimOptions options_;
};
class GLU : public ModuleHolder<GLUImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

// ---- softmax over a dim

/// exp(x) / Σ exp(x) along `dim`.
class SoftmaxImpl : public ModuleImpl {
 public:
  explicit SoftmaxImpl(DimOptions options) : options_(options) {}
  explicit SoftmaxImpl(int64_t dim = -1) : options_{dim} {}
  Tensor forward(const Tensor& x) override { return softmax(x, options_.dim); }
  std::string type_name() const override { return "Softmax"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override { return "dim=" + std::to_string(options_.dim); }

 private:
  DimOptions options_;
};
class Softmax : public ModuleHolder<SoftmaxImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// log softmax along `dim`.
class LogSoftmaxImpl : public ModuleImpl {
 public:
  explicit LogSoftmaxImpl(DimOptions options) : options_(options) {}
  explicit LogSoftmaxImpl(int64_t dim = -1) : options_{dim} {}
  Tensor forward(const Tensor& x) override { return log_softmax(x, options_.dim); }
  std::string type_name() const override { return "LogSoftmax"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override { return "dim=" + std::to_string(options_.dim); }

 private:
  DimOptions options_;
};
class LogSoftmax : public ModuleHolder<LogSoftmaxImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn

// Bilinear and Unflatten were declared here before they joined their kin; code that included
// this header for them still compiles.
#include "ember/nn/flatten.hpp"  // IWYU pragma: export
#include "ember/nn/linear.hpp"   // IWYU pragma: export
