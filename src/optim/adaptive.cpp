// src/optim/adaptive.cpp — RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam: options
// (JSON, validation) and the step over every group, each through the generic fused step
// (detail::elementwise_update_many -> ops::optim_step_ -> Backend::optim_step_multi).
#include "ember/optim/adaptive.hpp"

#include <cmath>

#include "ember/autograd.hpp"
#include "optim/fused.hpp"
#include "optim/options_json.hpp"

namespace ember::optim {
namespace {

using backend::OptimAlgo;
using detail::read;

void check_lr_eps_wd(double lr, double eps, double weight_decay, const std::string& who) {
  EMBER_CHECK(lr >= 0.0, who, ": invalid learning rate ", lr, " (expected lr >= 0)");
  EMBER_CHECK(eps >= 0.0, who, ": invalid epsilon ", eps, " (expected eps >= 0)");
  EMBER_CHECK(weight_decay >= 0.0, who, ": invalid weight_decay ", weight_decay,
              " (expected weight_decay >= 0)");
}

void check_betas(const std::array<double, 2>& b, const std::string& who) {
  EMBER_CHECK(b[0] >= 0.0 && b[0] < 1.0, who, ": invalid beta1 ", b[0],
              " (expected 0 <= beta1 < 1)");
  EMBER_CHECK(b[1] >= 0.0 && b[1] < 1.0, who, ": invalid beta2 ", b[1],
              " (expected 0 <= beta2 < 1)");
}

// One step over every group: args_of(options) gives the group's OptimArgs.
template <typename Group, typename ArgsOf, typename Slot>
void update_groups(const std::string& who, const std::vector<Group>& groups, ArgsOf&& args_of,
                   const detail::ElementwiseState& names_default, Slot&& slot) {
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<Tensor>& params = groups[g].params;
    if (params.empty()) continue;
    std::vector<detail::ParamRef> refs;
    refs.reserve(params.size());
    slot(g, params.size() - 1);  // size the state first: refs keep pointers
    for (size_t i = 0; i < params.size(); ++i) refs.push_back({&params[i], &slot(g, i)});
    detail::ElementwiseState names = names_default;
    const backend::OptimArgs args = args_of(groups[g].options, names);
    detail::elementwise_update_many(who, refs, args, names);
  }
}

}  // namespace

// ---- options ----

void to_json(json& j, const RMSpropOptions& o) {
  j = {{"lr", o.lr},
       {"alpha", o.alpha},
       {"eps", o.eps},
       {"weight_decay", o.weight_decay},
       {"momentum", o.momentum},
       {"centered", o.centered},
       {"maximize", o.maximize}};
}
void from_json(const json& j, RMSpropOptions& o) {
  read(j, "lr", o.lr);
  read(j, "alpha", o.alpha);
  read(j, "eps", o.eps);
  read(j, "weight_decay", o.weight_decay);
  read(j, "momentum", o.momentum);
  read(j, "centered", o.centered);
  read(j, "maximize", o.maximize);
}
void validate_options(const RMSpropOptions& o, const std::string& who) {
  check_lr_eps_wd(o.lr, o.eps, o.weight_decay, who);
  EMBER_CHECK(o.momentum >= 0.0, who, ": invalid momentum ", o.momentum,
              " (expected momentum >= 0)");
  EMBER_CHECK(o.alpha >= 0.0, who, ": invalid alpha ", o.alpha, " (expected alpha >= 0)");
}

void to_json(json& j, const AdagradOptions& o) {
  j = {{"lr", o.lr},
       {"lr_decay", o.lr_decay},
       {"weight_decay", o.weight_decay},
       {"initial_accumulator_value", o.initial_accumulator_value},
       {"eps", o.eps},
       {"maximize", o.maximize}};
}
void from_json(const json& j, AdagradOptions& o) {
  read(j, "lr", o.lr);
  read(j, "lr_decay", o.lr_decay);
  read(j, "weight_decay", o.weight_decay);
  read(j, "initial_accumulator_value", o.initial_accumulator_value);
  read(j, "eps", o.eps);
  read(j, "maximize", o.maximize);
}
void validate_options(const AdagradOptions& o, const std::string& who) {
  check_lr_eps_wd(o.lr, o.eps, o.weight_decay, who);
  EMBER_CHECK(o.lr_decay >= 0.0, who, ": invalid lr_decay ", o.lr_decay,
              " (expected lr_decay >= 0)");
  EMBER_CHECK(o.initial_accumulator_value >= 0.0, who, ": invalid initial_accumulator_value ",
              o.initial_accumulator_value, " (expected initial_accumulator_value >= 0)");
}

void to_json(json& j, const AdadeltaOptions& o) {
  j = {{"lr", o.lr},
       {"rho", o.rho},
       {"eps", o.eps},
       {"weight_decay", o.weight_decay},
       {"maximize", o.maximize}};
}
void from_json(const json& j, AdadeltaOptions& o) {
  read(j, "lr", o.lr);
  read(j, "rho", o.rho);
  read(j, "eps", o.eps);
  read(j, "weight_decay", o.weight_decay);
  read(j, "maximize", o.maximize);
}
void validate_options(const AdadeltaOptions& o, const std::string& who) {
  check_lr_eps_wd(o.lr, o.eps, o.weight_decay, who);
  EMBER_CHECK(o.rho >= 0.0 && o.rho <= 1.0, who, ": invalid rho ", o.rho,
              " (expected 0 <= rho <= 1)");
}

void to_json(json& j, const AdamaxOptions& o) {
  j = {{"lr", o.lr},
       {"betas", {o.betas[0], o.betas[1]}},
       {"eps", o.eps},
       {"weight_decay", o.weight_decay},
       {"maximize", o.maximize}};
}
void from_json(const json& j, AdamaxOptions& o) {
  read(j, "lr", o.lr);
  detail::read_pair(j, "betas", o.betas, "Adamax");
  read(j, "eps", o.eps);
  read(j, "weight_decay", o.weight_decay);
  read(j, "maximize", o.maximize);
}
void validate_options(const AdamaxOptions& o, const std::string& who) {
  check_lr_eps_wd(o.lr, o.eps, o.weight_decay, who);
  check_betas(o.betas, who);
}

void to_json(json& j, const NAdamOptions& o) {
  j = {{"lr", o.lr},
       {"betas", {o.betas[0], o.betas[1]}},
       {"eps", o.eps},
       {"weight_decay", o.weight_decay},
       {"momentum_decay", o.momentum_decay}};
}
void from_json(const json& j, NAdamOptions& o) {
  read(j, "lr", o.lr);
  detail::read_pair(j, "betas", o.betas, "NAdam");
  read(j, "eps", o.eps);
  read(j, "weight_decay", o.weight_decay);
  read(j, "momentum_decay", o.momentum_decay);
}
void validate_options(const NAdamOptions& o, const std::string& who) {
  check_lr_eps_wd(o.lr, o.eps, o.weight_decay, who);
  check_betas(o.betas, who);
  EMBER_CHECK(o.momentum_decay >= 0.0, who, ": invalid momentum_decay ", o.momentum_decay,
              " (expected momentum_decay >= 0)");
}

void to_json(json& j, const RAdamOptions& o) {
  j = {{"lr", o.lr},
       {"betas", {o.betas[0], o.betas[1]}},
       {"eps", o.eps},
       {"weight_decay", o.weight_decay}};
}
void from_json(const json& j, RAdamOptions& o) {
  read(j, "lr", o.lr);
  detail::read_pair(j, "betas", o.betas, "RAdam");
  read(j, "eps", o.eps);
  read(j, "weight_decay", o.weight_decay);
}
void validate_options(const RAdamOptions& o, const std::string& who) {
  check_lr_eps_wd(o.lr, o.eps, o.weight_decay, who);
  check_betas(o.betas, who);
}

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
