// ember/optim/adam.hpp — Adam (with amsgrad and L2 weight decay) and AdamW (decoupled
// weight decay): torch.optim's updates, fused into one in-place pass per parameter.
//
//   optim::Adam opt(net->parameters(), {.lr = 1e-3, .betas = {0.9, 0.98}});
//   optim::AdamW opt(net->parameters(), {.lr = 3e-4});          // weight_decay 1e-2
#pragma once

#include <array>
#include <tuple>

#include "ember/optim/optimizer.hpp"

namespace ember::optim {

/// Hyperparameters of torch.optim.Adam (AdamOptions) and torch.optim.AdamW (AdamWOptions):
/// one struct, whose weight_decay defaults to kWeightDecay (0 for Adam, 1e-2 for AdamW).
/// PyTorch keys, as the member names (betas as a two-number list); validate_options throws
/// ember::Error naming the bad value: "Adam: invalid beta1 1.5 (expected 0 <= beta1 < 1)".
template <double kWeightDecay>
struct AdamFamilyOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = kWeightDecay;  // Adam: L2, g += wd·p; AdamW: p *= 1 - lr·wd first
  bool amsgrad = false;
  bool maximize = false;

  static constexpr auto fields() {
    using O = AdamFamilyOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("betas", &O::betas, half_open(0, 1).elements("beta1", "beta2")),
                      field("eps", &O::eps, at_least(0).named("epsilon")),
                      field("weight_decay", &O::weight_decay, at_least(0)),
                      field("amsgrad", &O::amsgrad),
                      field("maximize", &O::maximize)};
  }
};
using AdamOptions = AdamFamilyOptions<0.0>;
using AdamWOptions = AdamFamilyOptions<1e-2>;

/// Per step t (from 1), for each parameter p with gradient g (torch.optim.Adam, foreach=False):
///   g = -g if maximize;  g += weight_decay·p
///   m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;  amsgrad: v_max = max(v_max, v), used below
///   p -= lr / (1-β1^t) · m / (sqrt(v) / sqrt(1-β2^t) + eps)
/// State per parameter: step, "exp_avg", "exp_avg_sq" and, with amsgrad, "max_exp_avg_sq".
class Adam : public TypedOptimizer<AdamOptions> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<Group> groups, AdamOptions defaults = {});
  std::string type_name() const override { return "Adam"; }
  bool skips_on_device() const override { return true; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

/// Adam with decoupled weight decay (torch.optim.AdamW): p *= 1 - lr·weight_decay, then the
/// Adam update without the L2 term. Same state as Adam.
class AdamW : public TypedOptimizer<AdamWOptions> {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<Group> groups, AdamWOptions defaults = {});
  std::string type_name() const override { return "AdamW"; }
  bool skips_on_device() const override { return true; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

}  // namespace ember::optim
