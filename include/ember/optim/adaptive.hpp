// ember/optim/adaptive.hpp — the other elementwise optimizers of torch.optim: RMSprop,
// Adagrad, Adadelta, Adamax, NAdam and RAdam, each with PyTorch's options, defaults, math
// (single-tensor formulas, foreach=False) and state names. All six run one fused
// multi-tensor kernel per group and step (src/kernels/optim.hpp holds their math, shared by
// the CPU and CUDA kernels).
//
//   optim::RMSprop opt(net->parameters(), {.lr = 1e-3, .momentum = 0.9, .centered = true});
//   optim::Adagrad opt(net->parameters(), {.lr = 0.1, .initial_accumulator_value = 0.1});
//   optim::NAdam opt(net->parameters());                       // lr 2e-3, momentum_decay 4e-3
#pragma once

#include <array>
#include <tuple>

#include "ember/optim/optimizer.hpp"

namespace ember::optim {

/// Hyperparameters of torch.optim.RMSprop.
struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;  // smoothing of the squared-gradient average
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2: g += weight_decay · p
  double momentum = 0.0;
  bool centered = false;  // divide by the estimated variance (needs grad_avg)
  bool maximize = false;

  static constexpr auto fields() {
    using O = RMSpropOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("alpha", &O::alpha, at_least(0)),
                      field("eps", &O::eps, at_least(0).named("epsilon")),
                      field("weight_decay", &O::weight_decay, at_least(0)),
                      field("momentum", &O::momentum, at_least(0)),
                      field("centered", &O::centered),
                      field("maximize", &O::maximize)};
  }
};

/// Hyperparameters of torch.optim.Adagrad.
struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0.0;  // step t uses lr / (1 + (t - 1) · lr_decay)
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;  // the starting value of "sum"
  double eps = 1e-10;
  bool maximize = false;

  static constexpr auto fields() {
    using O = AdagradOptions;
    return std::tuple{
        field("lr", &O::lr, at_least(0).named("learning rate")),
        field("lr_decay", &O::lr_decay, at_least(0)),
        field("weight_decay", &O::weight_decay, at_least(0)),
        field("initial_accumulator_value", &O::initial_accumulator_value, at_least(0)),
        field("eps", &O::eps, at_least(0).named("epsilon")),
        field("maximize", &O::maximize)};
  }
};

/// Hyperparameters of torch.optim.Adadelta.
struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;  // smoothing of both running averages
  double eps = 1e-6;
  double weight_decay = 0.0;
  bool maximize = false;

  static constexpr auto fields() {
    using O = AdadeltaOptions;
    return std::tuple{
        field("lr", &O::lr, at_least(0).named("learning rate")),
        field("rho", &O::rho, closed(0, 1)), field("eps", &O::eps, at_least(0).named("epsilon")),
        field("weight_decay", &O::weight_decay, at_least(0)), field("maximize", &O::maximize)};
  }
};

/// Hyperparameters of torch.optim.Adamax.
struct AdamaxOptions {
  double lr = 2e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool maximize = false;

  static constexpr auto fields() {
    using O = AdamaxOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("betas", &O::betas, half_open(0, 1).elements("beta1", "beta2")),
                      field("eps", &O::eps, at_least(0).named("epsilon")),
                      field("weight_decay", &O::weight_decay, at_least(0)),
                      field("maximize", &O::maximize)};
  }
};

/// Hyperparameters of torch.optim.NAdam (PyTorch 1.13: no maximize).
struct NAdamOptions {
  double lr = 2e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum_decay = 4e-3;  // μ_t = β1 (1 - 0.5 · 0.96^(t · momentum_decay))

  static constexpr auto fields() {
    using O = NAdamOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("betas", &O::betas, half_open(0, 1).elements("beta1", "beta2")),
                      field("eps", &O::eps, at_least(0).named("epsilon")),
                      field("weight_decay", &O::weight_decay, at_least(0)),
                      field("momentum_decay", &O::momentum_decay, at_least(0))};
  }
};

/// Hyperparameters of torch.optim.RAdam (PyTorch 1.13: L2 weight decay only).
struct RAdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;

  static constexpr auto fields() {
    using O = RAdamOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("betas", &O::betas, half_open(0, 1).elements("beta1", "beta2")),
                      field("eps", &O::eps, at_least(0).named("epsilon")),
                      field("weight_decay", &O::weight_decay, at_least(0))};
  }
};

/// PyTorch keys, as the member names (betas as a two-number list); JSON and
/// validate_options come from fields() (ember/optim/options_fields.hpp), e.g.
/// "RMSprop: invalid alpha -0.5 (expected alpha >= 0)".

/// RMSprop, per step for p with gradient g (g = -g with maximize; g += weight_decay·p):
///   v = α·v + (1-α)·g²;  centered: ḡ = α·ḡ + (1-α)·g, avg = sqrt(v - ḡ²) + eps, else
///   avg = sqrt(v) + eps;  momentum > 0: buf = μ·buf + g/avg, p -= lr·buf;  else p -= lr·g/avg.
/// State: "square_avg", "grad_avg" (centered), "momentum_buffer" (momentum > 0).
class RMSprop : public TypedOptimizer<RMSpropOptions> {
 public:
  explicit RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  explicit RMSprop(std::vector<Group> groups, RMSpropOptions defaults = {});
  std::string type_name() const override { return "RMSprop"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

/// Adagrad: sum += g²;  p -= lr / (1 + (t-1)·lr_decay) · g / (sqrt(sum) + eps).
/// State: "sum", made at construction for every parameter (initial_accumulator_value, step
/// 0), as PyTorch does, so a state dict before the first step already lists it.
class Adagrad : public TypedOptimizer<AdagradOptions> {
 public:
  explicit Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  explicit Adagrad(std::vector<Group> groups, AdagradOptions defaults = {});
  std::string type_name() const override { return "Adagrad"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;

 private:
  void init_state();
};

/// Adadelta: v = ρ·v + (1-ρ)·g²;  δ = sqrt(u + eps) / sqrt(v + eps) · g;  u = ρ·u + (1-ρ)·δ²;
///   p -= lr·δ.  State: "square_avg", "acc_delta".
class Adadelta : public TypedOptimizer<AdadeltaOptions> {
 public:
  explicit Adadelta(std::vector<Tensor> params, AdadeltaOptions options = {});
  explicit Adadelta(std::vector<Group> groups, AdadeltaOptions defaults = {});
  std::string type_name() const override { return "Adadelta"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

/// Adamax: m = β1·m + (1-β1)·g;  u = max(β2·u, |g| + eps);  p -= lr / (1-β1^t) · m / u.
/// State: "exp_avg", "exp_inf".
class Adamax : public TypedOptimizer<AdamaxOptions> {
 public:
  explicit Adamax(std::vector<Tensor> params, AdamaxOptions options = {});
  explicit Adamax(std::vector<Group> groups, AdamaxOptions defaults = {});
  std::string type_name() const override { return "Adamax"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

/// NAdam (Adam with Nesterov momentum and a momentum schedule μ_t):
///   m, v as Adam;  Πμ *= μ_t;  d = sqrt(v / (1-β2^t)) + eps;
///   p -= lr(1-μ_t)/(1-Πμ) · g/d + lr·μ_{t+1}/(1-Πμ·μ_{t+1}) · m/d.
/// State: "exp_avg", "exp_avg_sq" and the scalar "mu_product" (beside "step" in the state
/// dict's meta; float32 arithmetic, as torch's 0-d tensor).
class NAdam : public TypedOptimizer<NAdamOptions> {
 public:
  explicit NAdam(std::vector<Tensor> params, NAdamOptions options = {});
  explicit NAdam(std::vector<Group> groups, NAdamOptions defaults = {});
  std::string type_name() const override { return "NAdam"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

/// RAdam (rectified Adam): m, v as Adam; ρ_∞ = 2/(1-β2) - 1, ρ_t = ρ_∞ - 2t·β2^t/(1-β2^t);
///   ρ_t > 5: p -= lr · m/(1-β1^t) · sqrt(1-β2^t)/(sqrt(v) + eps) · r_t (the rectification);
///   else p -= lr · m/(1-β1^t).  State: "exp_avg", "exp_avg_sq".
class RAdam : public TypedOptimizer<RAdamOptions> {
 public:
  explicit RAdam(std::vector<Tensor> params, RAdamOptions options = {});
  explicit RAdam(std::vector<Group> groups, RAdamOptions defaults = {});
  std::string type_name() const override { return "RAdam"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

}  // namespace ember::optim
