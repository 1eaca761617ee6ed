// src/optim/asgd_rprop.cpp — ASGD and Rprop: Rprop's checks across members and the step,
// composed from tensor ops in torch.optim's order (PyTorch 1.13, _single_tensor_asgd and
// _single_tensor_rprop), so each runs on whatever device its parameters live on.
#include "ember/optim/asgd_rprop.hpp"

#include <algorithm>
#include <cmath>

#include "ember/autograd.hpp"
#include "ember/memory.hpp"
#include "ember/ops.hpp"

namespace ember::optim {
namespace {

// The state tensor `name` of `s` (a handle sharing its storage), made on first use as `value`
// in the parameter's shape, dtype and device (Persistent pool); a parameter moved since
// (Module::to) takes its state along.
Tensor state_tensor(ParamState& s, const char* name, const Tensor& p, double value) {
  Tensor* t = s.find(name);
  PoolGuard persistent(Pool::Persistent);
  if (t == nullptr) {
    s.tensors.emplace_back(name,
                           full(p.shape(), value, {.dtype = p.dtype(), .device = p.device()}));
    return s.tensors.back().second;
  }
  if (t->device() != p.device() || t->dtype() != p.dtype()) *t = t->to(p.device()).to(p.dtype());
  return *t;
}

// The scalar `name` of `s`, made on first use as `value` (a later one may move it: look it up
// again after making another).
void init_scalar(ParamState& s, const char* name, double value) {
  if (s.find_scalar(name) == nullptr) s.scalars.emplace_back(name, value);
}

// PyTorch keeps ASGD's eta and mu in float32 0-d tensors (the default dtype).
double as_f32(double v) { return static_cast<double>(static_cast<float>(v)); }

}  // namespace

// ---- options ----

void validate_options(const RpropOptions& o, const std::string& who) {
  check_fields(o, who);
  EMBER_CHECK(o.etas[0] > 0.0 && o.etas[0] < 1.0 && o.etas[1] > 1.0 && std::isfinite(o.etas[1]),
              who, ": invalid etas (", o.etas[0], ", ", o.etas[1],
              ") (expected 0 < etaminus < 1 < etaplus)");
  EMBER_CHECK(o.step_sizes[0] >= 0.0 && o.step_sizes[0] <= o.step_sizes[1], who,
              ": invalid step_sizes (", o.step_sizes[0], ", ", o.step_sizes[1],
              ") (expected 0 <= min <= max)");
}

// ---- ASGD ----

ASGD::ASGD(std::vector<Tensor> params, ASGDOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}
ASGD::ASGD(std::vector<Group> groups, ASGDOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}

Optimizer::StateSpec ASGD::state_spec(size_t) const { return {{"ax"}, {}, {"eta", "mu"}}; }

void ASGD::update() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ASGDOptions& o = groups_[g].options;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      Tensor p = groups_[g].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& s = state_slot(g, i);
      Tensor ax = state_tensor(s, "ax", p, 0.0);
      init_scalar(s, "eta", as_f32(o.lr));
      init_scalar(s, "mu", 1.0);
      double& eta = *s.find_scalar("eta");
      double& mu = *s.find_scalar("mu");
      if (o.maximize) grad = neg(grad);
      s.step += 1;
      const auto step = static_cast<double>(s.step);
      if (o.weight_decay != 0.0) grad = add(grad, mul(p, o.weight_decay));
      p.mul_(1.0 - o.lambd * eta);
      p.add_(grad, -eta);
      if (mu != 1.0)
        ax.add_(mul(sub(p, ax), mu));
      else
        ax.copy_(p);
      eta = as_f32(o.lr / std::pow(1.0 + o.lambd * o.lr * step, o.alpha));
      mu = as_f32(1.0 / std::max(1.0, step - o.t0));
    }
  }
}

// ---- Rprop ----

Rprop::Rprop(std::vector<Tensor> params, RpropOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}
Rprop::Rprop(std::vector<Group> groups, RpropOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}

Optimizer::StateSpec Rprop::state_spec(size_t) const { return {{"prev", "step_size"}, {}}; }

void Rprop::update() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const RpropOptions& o = groups_[g].options;
    const auto [etaminus, etaplus] = o.etas;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      Tensor p = groups_[g].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& s = state_slot(g, i);
      Tensor prev = state_tensor(s, "prev", p, 0.0);
      Tensor step_size = state_tensor(s, "step_size", p, o.lr);
      s.step += 1;
      if (o.maximize) grad = neg(grad);
      const Tensor agreement = sign(mul(grad, prev));
      const Tensor flipped = lt(agreement, 0.0);
      Tensor factor = full(p.shape(), 1.0, {.dtype = p.dtype(), .device = p.device()});
      factor = masked_fill(masked_fill(factor, gt(agreement, 0.0), etaplus), flipped, etaminus);
      step_size.mul_(factor).clamp_(o.step_sizes[0], o.step_sizes[1]);
      grad = masked_fill(grad, flipped, 0.0);  // a sign change: no step, and no flip next time
      p.sub_(mul(sign(grad), step_size));
      prev.copy_(grad);
    }
  }
}

}  // namespace ember::optim
