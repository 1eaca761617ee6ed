// src/optim/adam.cpp — Adam and AdamW: the step over every group. Both run the same fused
// kernel; AdamW sets decoupled_weight_decay. Their options' JSON and checks come from
// AdamFamilyOptions::fields().
#include "ember/optim/adam.hpp"

#include "optim/fused.hpp"

namespace ember::optim {
namespace {

// One step over every group of an Adam-family optimizer.
template <typename Group, typename Slot>
void adam_groups(const std::string& who, const std::vector<Group>& groups, bool decoupled,
                 const float* found_inf, const int64_t* skipped_steps, Slot&& slot) {
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& o = groups[g].options;
    const backend::AdamArgs args{.lr = o.lr,
                                 .beta1 = o.betas[0],
                                 .beta2 = o.betas[1],
                                 .eps = o.eps,
                                 .weight_decay = o.weight_decay,
                                 .decoupled_weight_decay = decoupled,
                                 .amsgrad = o.amsgrad,
                                 .maximize = o.maximize,
                                 // loss scaling: Note [Skipped steps] in src/kernels/optim.hpp
                                 .found_inf = found_inf,
                                 .skipped_steps = skipped_steps};
    detail::adam_update_many(who, detail::param_refs(groups[g].params, g, slot), args);
  }
}

Optimizer::StateSpec adam_spec() { return {{"exp_avg", "exp_avg_sq"}, {"max_exp_avg_sq"}}; }

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}

Adam::Adam(std::vector<Group> groups, AdamOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}

Optimizer::StateSpec Adam::state_spec(size_t) const { return adam_spec(); }

void Adam::update() {
  adam_groups(type_name(), groups_, /*decoupled=*/false, amp_found_inf(), amp_skipped_steps(),
              [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}

AdamW::AdamW(std::vector<Group> groups, AdamWOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}

Optimizer::StateSpec AdamW::state_spec(size_t) const { return adam_spec(); }

void AdamW::update() {
  adam_groups(type_name(), groups_, /*decoupled=*/true, amp_found_inf(), amp_skipped_steps(),
              [this](size_t g, size_t i) -> ParamState& { return state_slot(g, i); });
}

}  // namespace ember::optim
