// ember/optim/asgd_rprop.hpp — torch.optim.ASGD (averaged SGD) and torch.optim.Rprop
// (resilient backpropagation) with PyTorch 1.13's options, defaults, math (single-tensor
// formulas, foreach=False) and state names. Both are composed from tensor ops, so they run
// wherever their parameters live (CPU or CUDA) with no kernel of their own.
//
//   optim::ASGD asgd(net->parameters(), {.lr = 0.05, .t0 = 100});   // average from step 100
//   optim::Rprop rprop(net->parameters(), {.lr = 0.01, .etas = {0.5, 1.2}});
#pragma once

#include <array>
#include <tuple>

#include "ember/optim/optimizer.hpp"

namespace ember::optim {

/// Hyperparameters of torch.optim.ASGD.
struct ASGDOptions {
  double lr = 1e-2;
  double lambd = 1e-4;        // decay term: eta_t = lr / (1 + lambd · lr · t)^alpha
  double alpha = 0.75;        // power of the eta decay
  double t0 = 1e6;            // the step at which averaging starts
  double weight_decay = 0.0;  // L2: g += weight_decay · p
  bool maximize = false;

  static constexpr auto fields() {
    using O = ASGDOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("lambd", &O::lambd, at_least(0).finite()),
                      field("alpha", &O::alpha, at_least(0).finite()),
                      field("t0", &O::t0, not_nan()),
                      field("weight_decay", &O::weight_decay, at_least(0)),
                      field("maximize", &O::maximize)};
  }
};

/// Hyperparameters of torch.optim.Rprop.
struct RpropOptions {
  double lr = 1e-2;                         // the initial step size
  std::array<double, 2> etas = {0.5, 1.2};  // (etaminus, etaplus): 0 < etaminus < 1 < etaplus
  std::array<double, 2> step_sizes = {1e-6, 50.0};  // (min, max) of each element's step size
  bool maximize = false;

  static constexpr auto fields() {
    using O = RpropOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("etas", &O::etas), field("step_sizes", &O::step_sizes),
                      field("maximize", &O::maximize)};
  }
};

/// PyTorch keys, as the member names (etas and step_sizes as two-number lists); JSON and the
/// checks of single members come from fields() (ember/optim/options_fields.hpp). Rprop's
/// validate_options adds the pairs' orders: "Rprop: invalid etas (0.5, 0.9) (expected 0 <
/// etaminus < 1 < etaplus)".
void validate_options(const RpropOptions& o, const std::string& who);

/// ASGD, per step t for p with gradient g (g = -g with maximize; g += weight_decay·p):
///   p *= 1 - lambd·eta;  p -= eta·g;  ax = p while mu = 1, else ax += mu·(p - ax);
///   then eta = lr / (1 + lambd·lr·t)^alpha and mu = 1 / max(1, t - t0).
/// State: the tensor "ax" (the average of the iterates from step t0 on: evaluate with it)
/// and the scalars "eta" (starts at lr) and "mu" (starts at 1), beside "step" in the state
/// dict's meta, each rounded to float32 as PyTorch's 0-d tensors are.
class ASGD : public TypedOptimizer<ASGDOptions> {
 public:
  explicit ASGD(std::vector<Tensor> params, ASGDOptions options = {});
  explicit ASGD(std::vector<Group> groups, ASGDOptions defaults = {});
  std::string type_name() const override { return "ASGD"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

/// Rprop, per element of p with gradient g (g = -g with maximize), from the sign of g·prev:
///   > 0: step_size *= etaplus;  < 0: step_size *= etaminus and g = 0;  = 0: unchanged;
///   step_size is clamped to step_sizes;  p -= sign(g)·step_size;  prev = g.
/// State: "prev" (starts at 0) and "step_size" (starts at lr).
class Rprop : public TypedOptimizer<RpropOptions> {
 public:
  explicit Rprop(std::vector<Tensor> params, RpropOptions options = {});
  explicit Rprop(std::vector<Group> groups, RpropOptions defaults = {});
  std::string type_name() const override { return "Rprop"; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

}  // namespace ember::optim
