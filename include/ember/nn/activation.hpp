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

/// log(1 + exp(beta·x)) / beta, x itself where beta·x > threshold.
class SoftplusImpl : public ModuleImpl {
 public:
  explicit SoftplusImpl(double beta = 1.0, double threshold = 20.0)
      : beta_(beta), threshold_(threshold) {}
  Tensor forward(const Tensor& x) override { return softplus(x, beta_, threshold_); }
  std::string type_name() const override { return "Softplus"; }
  json options() const override { return {{"beta", beta_}, {"threshold", threshold_}}; }
  std::string extra_repr() const override;

 private:
  double beta_, threshold_;
};

/// x where x >= 0, negative_slope·x below.
class LeakyReLUImpl : public ModuleImpl {
 public:
  explicit LeakyReLUImpl(double negative_slope = 0.01) : slope_(negative_slope) {}
  Tensor forward(const Tensor& x) override { return leaky_relu(x, slope_); }
  std::string type_name() const override { return "LeakyReLU"; }
  json options() const override { return {{"negative_slope", slope_}}; }
  std::string extra_repr() const override;

 private:
  double slope_;
};

/// x where x > 0, alpha·(eˣ - 1) below.
class ELUImpl : public ModuleImpl {
 public:
  explicit ELUImpl(double alpha = 1.0) : alpha_(alpha) {}
  Tensor forward(const Tensor& x) override { return elu(x, alpha_); }
  std::string type_name() const override { return "ELU"; }
  json options() const override { return {{"alpha", alpha_}}; }
  std::string extra_repr() const override;

 private:
  double alpha_;
};

/// x clamped to [min_val, max_val] (gradient 1 strictly inside, as PyTorch).
class HardtanhImpl : public ModuleImpl {
 public:
  explicit HardtanhImpl(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(const Tensor& x) override { return hardtanh(x, min_val_, max_val_); }
  std::string type_name() const override { return "Hardtanh"; }
  json options() const override { return {{"min_val", min_val_}, {"max_val", max_val_}}; }
  std::string extra_repr() const override;

 private:
  double min_val_, max_val_;
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

/// PReLU: x where x >= 0, a·x below, with learnable slopes `weight` [num_parameters] (1, or
/// one per channel = input dim 1), all initialised to `init`.
class PReLUImpl : public ModuleImpl {
 public:
  explicit PReLUImpl(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "PReLU"; }
  json options() const override { return {{"num_parameters", num_parameters_}, {"init", init_}}; }
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }

 private:
  int64_t num_parameters_;
  double init_;
  Tensor weight_;
};

/// GLU: the first half of `dim` times σ of the second half (the size of dim must be even).
class GLUImpl : public ModuleImpl {
 public:
  explicit GLUImpl(int64_t dim = -1) : dim_(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GLU"; }
  json options() const override { return {{"dim", dim_}}; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim_); }

 private:
  int64_t dim_;
};

/// Unflatten: dim `dim` of size Πsizes becomes the dims `sizes` (one may be -1, inferred).
///   nn::Unflatten(1, {2, 5}) maps [N, 10] to [N, 2, 5].
class UnflattenImpl : public ModuleImpl {
 public:
  UnflattenImpl(int64_t dim, Shape unflattened_size);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Unflatten"; }
  json options() const override { return {{"dim", dim_}, {"unflattened_size", sizes_.vec()}}; }
  std::string extra_repr() const override;

 private:
  int64_t dim_;
  Shape sizes_;
};

struct BilinearOptions {
  int64_t in1_features = 0;
  int64_t in2_features = 0;
  int64_t out_features = 0;
  bool bias = true;
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
