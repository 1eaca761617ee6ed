// ember/nn/linear.hpp — the linear layers of torch.nn: Identity, Linear and Bilinear.
//
//   nn::Linear fc(784, 256);                 Tensor y = fc(x);            // [N, 784] -> [N, 256]
//   nn::Bilinear bil(5, 3, 2);               Tensor z = bil(x1, x2);      // [N, 5], [N, 3] -> [N,
//   2]
#pragma once

#include <string>

#include "ember/nn/module.hpp"
#include "ember/ops.hpp"

namespace ember::nn {

/// Returns its input (a placeholder, as torch.nn.Identity).
class IdentityImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Identity"; }
};
class Identity : public ModuleHolder<IdentityImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  static constexpr auto fields() {
    using O = LinearOptions;
    return std::tuple{field("in_features", &O::in_features, opts::above(0)),
                      field("out_features", &O::out_features, opts::above(0)),
                      field("bias", &O::bias)};
  }
};

/// y = x·Wᵀ + b. weight [out, in] ~ U(±1/√in), bias ~ U(±1/√in) (PyTorch's defaults).
class LinearImpl : public ModuleImpl {
 public:
  explicit LinearImpl(LinearOptions options);
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true)
      : LinearImpl(LinearOptions{in_features, out_features, bias}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  json options() const override;
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }
  Tensor bias() const { return bias_; }
  /// forward followed by `activation`, fused into the GEMM's epilogue (cuBLASLt on a GPU);
  /// Sequential uses it for a Linear directly followed by a ReLU.
  Tensor forward(const Tensor& x, Activation activation);
  /// residual + forward(x), the add in the GEMM where nothing needs a gradient (ember::linear
  /// with a residual): a residual connection after the layer. Charged to this module in a
  /// profile; with forward hooks, the hooks run on the layer's own output and the add after.
  Tensor forward(const Tensor& x, const Tensor& residual);
  Tensor forward_with_epilogue(const Tensor& x, Activation activation) override {
    return forward(x, activation);
  }

 protected:
  void rebind_parameter(const std::string& name, const Tensor& param) override;

 private:
  LinearOptions options_;
  Tensor weight_, bias_;
};
class Linear : public ModuleHolder<LinearImpl> {
 public:
  using ModuleHolder::ModuleHolder;
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
  void rebind_parameter(const std::string& name, const Tensor& param) override {
    (name == "weight" ? weight_ : bias_) = param;  // tie() or a parametrization checked it
  }
};

class Bilinear : public ModuleHolder<BilinearImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& x1, const Tensor& x2) const { return (*this)->forward(x1, x2); }
};

}  // namespace ember::nn

// The activations, Flatten, Dropout and Sequential were declared here before they joined their
// kin; code that included this header for them still compiles.
#include "ember/nn/activation.hpp"  // IWYU pragma: export
#include "ember/nn/containers.hpp"  // IWYU pragma: export
#include "ember/nn/dropout.hpp"     // IWYU pragma: export
#include "ember/nn/flatten.hpp"     // IWYU pragma: export
