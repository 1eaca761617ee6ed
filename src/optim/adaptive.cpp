// src/optim/adaptive.cpp — RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam: the step over
// every group, each through the generic fused step (detail::elementwise_update_many ->
// ops::optim_step_ -> Backend::optim_step_multi); their options' JSON and checks come from
// each options struct's fields().
#include "ember/optim/adaptive.hpp"

#include <cmath>

#include "ember/autograd.hpp"
#include "optim/fused.hpp"

namespace ember::optim {
namespace {

using backend::OptimAlgo;

// One step over every group: args_of(options) gives the group's OptimArgs.
template <typename Group, typename ArgsOf, typename Slot>
void update_groups(const std::string& who, const std::vector<Group>& groups, ArgsOf&& args_of,
                   const detail::ElementwiseState& names_default, Slot&& slot) {
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].params.empty()) continue;
    detail::ElementwiseState names = names_default;
    const backend::OptimArgs args = args_of(groups[g].options, names);
    detail::elementwise_update_many(who, detail::param_refs(groups[g].params, g, slot), args,
                                    names);
  }
}

}  // namespace

// ---- the optimizers ----

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}
RMSprop::RMSprop(std::vector<Group> groups, RMSpropOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}
Adadelta::Adadelta(std::vector<Tensor> params, AdadeltaOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}
Adadelta::Adadelta(std::vector<Group> groups, AdadeltaOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}
Adamax::Adamax(std::vector<Tensor> params, AdamaxOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}
Adamax::Adamax(std::vector<Group> groups, AdamaxOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}
NAdam::NAdam(std::vector<Tensor> params, NAdamOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}
NAdam::NAdam(std::vector<Group> groups, NAdamOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}
RAdam::RAdam(std::vector<Tensor> params, RAdamOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}
RAdam::RAdam(std::vector<Group> groups, RAdamOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}

Optimizer::StateSpec RMSprop::state_spec(size_t) const {
  return {{"square_avg"}, {"momentum_buffer", "grad_avg"}};
}

void RMSprop::update() {
  update_groups(
      type_name(), groups_,
      [](const RMSpropOptions& o, detail::ElementwiseState& names) {
        names.names = {"square_avg", o.centered ? "grad_avg" : nullptr,
                       o.momentum > 0 ? "momentum_buffer" : nullptr};
        return backend::OptimArgs{.algo = OptimAlgo::rmsprop,
                                  .lr = o.lr,
                                  .alpha = o.alpha,
                                  .eps = o.eps,
                                  .weight_decay = o.weight_decay,
                                  .momentum = o.momentum,
                                  .centered = o.centered,
                                  .maximize = o.maximize};
      },
      {}, [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
  init_state();
}
Adagrad::Adagrad(std::vector<Group> groups, AdagradOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
  init_state();
}

// PyTorch makes Adagrad's state at construction: step 0 and sum = initial_accumulator_value.
void Adagrad::init_state() {
  NoGradGuard no_grad;
  PoolGuard persistent(Pool::Persistent);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      if (!is_floating(p.dtype())) continue;
      ParamState& s = state_slot(g, i);
      s.tensors.emplace_back("sum", full(p.shape(), group.options.initial_accumulator_value,
                                         {.dtype = p.dtype(), .device = p.device()}));
    }
  }
}

Optimizer::StateSpec Adagrad::state_spec(size_t) const { return {{"sum"}, {}}; }

void Adagrad::update() {
  update_groups(
      type_name(), groups_,
      [](const AdagradOptions& o, detail::ElementwiseState& names) {
        names.names = {"sum", nullptr, nullptr};
        names.initial_value = o.initial_accumulator_value;
        return backend::OptimArgs{.algo = OptimAlgo::adagrad,
                                  .lr = o.lr,
                                  .eps = o.eps,
                                  .weight_decay = o.weight_decay,
                                  .lr_decay = o.lr_decay,
                                  .maximize = o.maximize};
      },
      {}, [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

Optimizer::StateSpec Adadelta::state_spec(size_t) const {
  return {{"square_avg", "acc_delta"}, {}};
}

void Adadelta::update() {
  update_groups(
      type_name(), groups_,
      [](const AdadeltaOptions& o, detail::ElementwiseState& names) {
        names.names = {"square_avg", "acc_delta", nullptr};
        return backend::OptimArgs{.algo = OptimAlgo::adadelta,
                                  .lr = o.lr,
                                  .alpha = o.rho,
                                  .eps = o.eps,
                                  .weight_decay = o.weight_decay,
                                  .maximize = o.maximize};
      },
      {}, [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

Optimizer::StateSpec Adamax::state_spec(size_t) const { return {{"exp_avg", "exp_inf"}, {}}; }

void Adamax::update() {
  update_groups(
      type_name(), groups_,
      [](const AdamaxOptions& o, detail::ElementwiseState& names) {
        names.names = {"exp_avg", "exp_inf", nullptr};
        return backend::OptimArgs{.algo = OptimAlgo::adamax,
                                  .lr = o.lr,
                                  .alpha = o.betas[0],
                                  .beta2 = o.betas[1],
                                  .eps = o.eps,
                                  .weight_decay = o.weight_decay,
                                  .maximize = o.maximize};
      },
      {}, [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

Optimizer::StateSpec NAdam::state_spec(size_t) const {
  return {{"exp_avg", "exp_avg_sq"}, {}, {"mu_product"}};
}

void NAdam::update() {
  update_groups(
      type_name(), groups_,
      [](const NAdamOptions& o, detail::ElementwiseState& names) {
        names.names = {"exp_avg", "exp_avg_sq", nullptr};
        return backend::OptimArgs{.algo = OptimAlgo::nadam,
                                  .lr = o.lr,
                                  .alpha = o.betas[0],
                                  .beta2 = o.betas[1],
                                  .eps = o.eps,
                                  .weight_decay = o.weight_decay,
                                  .momentum_decay = o.momentum_decay};
      },
      {}, [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

Optimizer::StateSpec RAdam::state_spec(size_t) const { return {{"exp_avg", "exp_avg_sq"}, {}}; }

void RAdam::update() {
  update_groups(
      type_name(), groups_,
      [](const RAdamOptions& o, detail::ElementwiseState& names) {
        names.names = {"exp_avg", "exp_avg_sq", nullptr};
        return backend::OptimArgs{.algo = OptimAlgo::radam,
                                  .lr = o.lr,
                                  .alpha = o.betas[0],
                                  .beta2 = o.betas[1],
                                  .eps = o.eps,
                                  .weight_decay = o.weight_decay};
      },
      {}, [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

}  // namespace ember::optim
