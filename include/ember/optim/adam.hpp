// ember/optim/adam.hpp — Adam (with amsgrad and L2 weight decay) and AdamW (decoupled
// weight decay): torch.optim's updates, fused into one in-place pass per parameter.
//
//   optim::Adam opt(net->parameters(), {.lr = 1e-3, .betas = {0.9, 0.98}});
//   optim::AdamW opt(net->parameters(), {.lr = 3e-4});          // weight_decay 1e-2
#pragma once

#include <array>

#include "ember/optim/optimizer.hpp"

namespace ember::optim {

/// Hyperparameters of torch.optim.Adam.
struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2: g += weight_decay · p
  bool amsgrad = false;
  bool maximize = false;
};

/// Hyperparameters of torch.optim.AdamW (weight decay is decoupled and defaults to 1e-2).
struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // p *= 1 - lr · weight_decay before the Adam update
  bool amsgrad = false;
  bool maximize = false;
};

/// PyTorch keys: lr, betas, eps, weight_decay, amsgrad, maximize.
void to_json(json& j, const AdamOptions& o);
void from_json(const json& j, AdamOptions& o);
void to_json(json& j, const AdamWOptions& o);
void from_json(const json& j, AdamWOptions& o);
/// Throws ember::Error naming the bad value:
/// "Adam: invalid beta1 1.5 (expected 0 <= beta1 < 1)".
void validate_options(const AdamOptions& o, const std::string& who);
void validate_options(const AdamWOptions& o, const std::string& who);

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
