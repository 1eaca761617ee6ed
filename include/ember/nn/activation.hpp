// ember/nn/activation.hpp — the parametrised activation modules of torch.nn (Softplus,
// LeakyReLU, ELU, SELU, ReLU6, Mish, Hardtanh, Hardswish, Hardsigmoid, LogSigmoid, PReLU,
// GLU) and the shape modules Unflatten and Bilinear. ReLU, GELU, SiLU, Sigmoid, Tanh,
// Softmax, LogSoftmax, Identity and Flatten live in nn/linear.hpp.
//
// Each module has PyTorch's constructor arguments and defaults, prints as PyTorch prints it,
// and is registered for nn::build. Only PReLU (`weight`) and Bilinear (`weight`, `bias`) hold
// parameters.
//
//   nn::Sequential net({nn::Linear(8, 16), nn::LeakyReLU(0.2), nn::Linear(16, 4), nn::PReLU(4)});
//   nn::Bilinear bil(5, 3, 2);   Tensor y = bil(x1, x2);   // [N, 5], [N, 3] -> [N, 2]
#pragma once

#include <string>

#include "ember/nn/module.hpp"
#include "ember/ops.hpp"

namespace ember::nn {

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

/// min(max(x, 0), 6): Hardtanh(0, 6), printed as PyTorch's ReLU6().
class ReLU6Impl : public ModuleImpl {
 public:
  Tensor forward(const Tensor& x) override { return hardtanh(x, 0.0, 6.0); }
  std::string type_name() const override { return "ReLU6"; }
};

#define EMBER_SIMPLE_ACTIVATION(Name, fn)                      \
  class Name##Impl : public ModuleImpl {                       \
   public:                                                     \
    Tensor forward(const Tensor& x) override { return fn(x); } \
    std::string type_name() const override { return #Name; }   \
  };                                                           \
  class Name : public ModuleHolder<Name##Impl> {               \
   public:                                                     \
    using ModuleHolder::ModuleHolder;                          \
  };
EMBER_SIMPLE_ACTIVATION(SELU, selu)
EMBER_SIMPLE_ACTIVATION(Mish, mish)
EMBER_SIMPLE_ACTIVATION(Hardswish, hardswish)
EMBER_SIMPLE_ACTIVATION(Hardsigmoid, hardsigmoid)
EMBER_SIMPLE_ACTIVATION(LogSigmoid, logsigmoid)
#undef EMBER_SIMPLE_ACTIVATION

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

struct UnflattenOptions {
  int64_t dim = 1;
  Shape unflattened_size{};
  static constexpr auto fields() {
    return std::tuple{field("dim", &UnflattenOptions::dim),
                      field("unflattened_size", &UnflattenOptions::unflattened_size)};
  }
};

/// Unflatten: dim `dim` of size Πsizes becomes the dims `sizes` (one may be -1, inferred).
///   nn::Unflatten(1, {2, 5}) maps [N, 10] to [N, 2, 5].
class UnflattenImpl : public ModuleImpl {
 public:
  explicit UnflattenImpl(UnflattenOptions options);
  UnflattenImpl(int64_t dim, Shape unflattened_size)
      : UnflattenImpl(UnflattenOptions{dim, std::move(unflattened_size)}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Unflatten"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  UnflattenOptions options_;
};

struct BilinearOptions {
  int64_t in1_features = 0;
  int64_t in2_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  static constexpr auto fields() {
    using O = BilinearOptions;
    return std::tuple{field("in1_features", &O::in1_features, opts::above(0)),
                      field("in2_features", &O::in2_features, opts::above(0)),
                      field("out_features", &O::out_features, opts::above(0)),
                      field("bias", &O::bias)};
  }
};

/// y = x1ᵀ·A·x2 + b per output feature: x1 [.., in1], x2 [.., in2] (same leading dims) ->
/// [.., out]. weight [out, in1, in2] and bias [out] ~ U(±1/√in1), as PyTorch.
class BilinearImpl : public ModuleImpl {
 public:
  explicit BilinearImpl(BilinearOptions options);
  BilinearImpl(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias = true)
      : BilinearImpl(BilinearOptions{in1_features, in2_features, out_features, bias}) {}
  /// Throws: Bilinear takes two inputs (forward(x1, x2)).
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x1, const Tensor& x2);
  std::string type_name() const override { return "Bilinear"; }
  json options() const override;
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }
  Tensor bias() const { return bias_; }

 private:
  BilinearOptions options_;
  Tensor weight_, bias_;
};

#define EMBER_HOLDER(Name)                       \
  class Name : public ModuleHolder<Name##Impl> { \
   public:                                       \
    using ModuleHolder::ModuleHolder;            \
  };
EMBER_HOLDER(Softplus)
EMBER_HOLDER(LeakyReLU)
EMBER_HOLDER(ELU)
EMBER_HOLDER(Hardtanh)
EMBER_HOLDER(ReLU6)
EMBER_HOLDER(PReLU)
EMBER_HOLDER(GLU)
EMBER_HOLDER(Unflatten)
#undef EMBER_HOLDER

class Bilinear : public ModuleHolder<BilinearImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& x1, const Tensor& x2) const { return (*this)->forward(x1, x2); }
};

}  // namespace ember::nn
