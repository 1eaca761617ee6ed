// src/optim/adam.cpp — Adam and AdamW: options (JSON, validation) and the step over every
// group. Both run the same fused kernel; AdamW sets decoupled_weight_decay.
#include "ember/optim/adam.hpp"

#include <cmath>

#include "optim/fused.hpp"

namespace ember::optim {
namespace {

template <typename O>
json options_json(const O& o) {
  return {{"lr", o.lr},           {"betas", {o.betas[0], o.betas[1]}},
          {"eps", o.eps},         {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad}, {"maximize", o.maximize}};
}

template <typename O>
void read_options(const json& j, O& o) {
  if (j.contains("lr")) o.lr = j["lr"].get<double>();
  if (j.contains("betas")) {
    const json& b = j["betas"];
    EMBER_CHECK(b.is_array() && b.size() == 2,
                "Adam options: betas must be a list of two numbers (got ", b.dump(), ")");
    o.betas = {b[0].get<double>(), b[1].get<double>()};
  }
  if (j.contains("eps")) o.eps = j["eps"].get<double>();
  if (j.contains("weight_decay")) o.weight_decay = j["weight_decay"].get<double>();
  if (j.contains("amsgrad")) o.amsgrad = j["amsgrad"].get<bool>();
  if (j.contains("maximize")) o.maximize = j["maximize"].get<bool>();
}

template <typename O>
void check_options(const O& o, const std::string& who) {
  EMBER_CHECK(o.lr >= 0.0, who, ": invalid learning rate ", o.lr, " (expected lr >= 0)");
  EMBER_CHECK(o.eps >= 0.0, who, ": invalid epsilon ", o.eps, " (expected eps >= 0)");
  EMBER_CHECK(o.betas[0] >= 0.0 && o.betas[0] < 1.0, who, ": invalid beta1 ", o.betas[0],
              " (expected 0 <= beta1 < 1)");
  EMBER_CHECK(o.betas[1] >= 0.0 && o.betas[1] < 1.0, who, ": invalid beta2 ", o.betas[1],
              " (expected 0 <= beta2 < 1)");
  EMBER_CHECK(o.weight_decay >= 0.0, who, ": invalid weight_decay ", o.weight_decay,
              " (expected weight_decay >= 0)");
}

template <typename O>
ops::AdamHyper hyper_of(const O& o, bool decoupled) {
  return {.lr = o.lr,
          .beta1 = o.betas[0],
          .beta2 = o.betas[1],
          .eps = o.eps,
          .weight_decay = o.weight_decay,
          .decoupled_weight_decay = decoupled,
          .amsgrad = o.amsgrad,
          .maximize = o.maximize};
}

// One step over every group of an Adam-family optimizer.
template <typename Group, typename Slot>
void adam_groups(const std::string& who, const std::vector<Group>& groups, bool decoupled,
                 const float* found_inf, const int64_t* skipped_steps, Slot&& slot) {
  for (size_t g = 0; g < groups.size(); ++g) {
    ops::AdamHyper hyper = hyper_of(groups[g].options, decoupled);
    hyper.found_inf = found_inf;  // loss scaling (Note [Skipped steps] in src/kernels/optim.hpp)
    hyper.skipped_steps = skipped_steps;
    const std::vector<Tensor>& params = groups[g].params;
    std::vector<detail::ParamRef> refs;
    refs.reserve(params.size());
    if (!params.empty()) slot(g, params.size() - 1);  // size the state first: refs keep pointers
    for (size_t i = 0; i < params.size(); ++i) refs.push_back({&params[i], &slot(g, i)});
    detail::adam_update_many(who, refs, hyper);
  }
}

Optimizer::StateSpec adam_spec() { return {{"exp_avg", "exp_avg_sq"}, {"max_exp_avg_sq"}}; }

}  // namespace

void to_json(json& j, const AdamOptions& o) { j = options_json(o); }
void from_json(const json& j, AdamOptions& o) { read_options(j, o); }
void to_json(json& j, const AdamWOptions& o) { j = options_json(o); }
void from_json(const json& j, AdamWOptions& o) { read_options(j, o); }
void validate_options(const AdamOptions& o, const std::string& who) { check_options(o, who); }
void validate_options(const AdamWOptions& o, const std::string& who) { check_options(o, who); }

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : TypedOptimizer(options) {
  add_param_group(Group{std::move(params), options});
  check_not_empty();
}

Adam::Adam(std::vector<Group> groups, AdamOptions defaults) : TypedOptimizer(defaults) {
  validate_options(defaults, type_name());
  for (Group& g : groups) add_param_group(std::move(g));
  check_not_empty();
}

Optimizer::StateSpec Adam::state_spec(size_t) const { return adam_spec(); }

void Adam::update() {
  adam_groups(type_name(), groups_, /*decoupled=*/false, amp_found_inf(), amp_skipped_steps(),
              [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : TypedOptimizer(options) {
  add_param_group(Group{std::move(params), options});
  check_not_empty();
}

AdamW::AdamW(std::vector<Group> groups, AdamWOptions defaults) : TypedOptimizer(defaults) {
  validate_options(defaults, type_name());
  for (Group& g : groups) add_param_group(std::move(g));
  check_not_empty();
}

Optimizer::StateSpec AdamW::state_spec(size_t) const { return adam_spec(); }

void AdamW::update() {
  adam_groups(type_name(), groups_, /*decoupled=*/true, amp_found_inf(), amp_skipped_steps(),
              [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

}  // namespace ember::optim
