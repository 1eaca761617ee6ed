// ember/nn/linear.hpp — Linear, Flatten, Dropout and the activation modules.
#pragma once

#include "ember/nn/module.hpp"
#include "ember/ops.hpp"

namespace ember::nn {

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

struct FlattenOptions {
  int64_t start_dim = 1;
  int64_t end_dim = -1;
  static constexpr auto fields() {
    return std::tuple{field("start_dim", &FlattenOptions::start_dim),
                      field("end_dim", &FlattenOptions::end_dim)};
  }
};

/// Flattens dims start_dim..end_dim (default 1..-1, as PyTorch).
class FlattenImpl : public ModuleImpl {
 public:
  explicit FlattenImpl(FlattenOptions options) : options_(options) {}
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : FlattenImpl(FlattenOptions{start_dim, end_dim}) {}
  Tensor forward(const Tensor& x) override {
    return x.flatten(options_.start_dim, options_.end_dim);
  }
  std::string type_name() const override { return "Flatten"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  FlattenOptions options_;
};
class Flatten : public ModuleHolder<FlattenImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct DropoutOptions {
  double p = 0.5;
  static constexpr auto fields() {
    return std::tuple{field("p", &DropoutOptions::p, opts::closed(0, 1))};
  }
};

/// Inverted dropout in training mode, identity in eval mode; seeded by manual_seed.
class DropoutImpl : public ModuleImpl {
 public:
  explicit DropoutImpl(DropoutOptions options);
  explicit DropoutImpl(double p = 0.5) : DropoutImpl(DropoutOptions{p}) {}
  Tensor forward(const Tensor& x) override { return dropout(x, options_.p, is_training()); }
  std::string type_name() const override { return "Dropout"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  DropoutOptions options_;
};
class Dropout : public ModuleHolder<DropoutImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// Stateless activation modules. GELU takes approximate = "none" | "tanh"; Softmax and
/// LogSoftmax take the dim.
#define EMBER_ACTIVATION(Name, expr)                          \
  class Name##Impl : public ModuleImpl {                      \
   public:                                                    \
    Tensor forward(const Tensor& x) override { return expr; } \
    std::string type_name() const override { return #Name; }  \
  };                                                          \
  class Name : public ModuleHolder<Name##Impl> {              \
   public:                                                    \
    using ModuleHolder::ModuleHolder;                         \
  };
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
EMBER_ACTIVATION(SiLU, silu(x))
EMBER_ACTIVATION(Sigmoid, sigmoid(x))
EMBER_ACTIVATION(Tanh, tanh(x))
EMBER_ACTIVATION(Identity, x)
#undef EMBER_ACTIVATION

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

/// Runs children in order; children are named "0", "1", ... as in PyTorch.
/// Example: nn::Sequential net({nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10)});
class SequentialImpl : public ModuleImpl {
 public:
  SequentialImpl() = default;
  explicit SequentialImpl(const std::vector<Module>& modules);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  json config() const override;
  void push_back(const Module& m);
  size_t size() const { return named_children().size(); }
  Module operator[](size_t i) const;
};
class Sequential : public ModuleHolder<SequentialImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  Sequential(std::initializer_list<Module> modules)
      : ModuleHolder(std::make_shared<SequentialImpl>(std::vector<Module>(modules))) {}
};

}  // namespace ember::nn
