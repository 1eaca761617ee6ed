// src/optim/sgd.cpp — SGD: nesterov's check and the step over every group (the options' JSON
// and single-member checks come from SGDOptions::fields()).
#include "ember/optim/sgd.hpp"

#include "optim/fused.hpp"

namespace ember::optim {

void validate_options(const SGDOptions& o, const std::string& who) {
  check_fields(o, who);
  EMBER_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0), who,
              ": nesterov requires momentum > 0 and dampening = 0 (got momentum ", o.momentum,
              ", dampening ", o.dampening, ")");
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
}

SGD::SGD(std::vector<Group> groups, SGDOptions defaults) : TypedOptimizer(defaults) {
  init_groups(std::move(groups));
}

Optimizer::StateSpec SGD::state_spec(size_t) const { return {{}, {"momentum_buffer"}}; }

void SGD::update() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const SGDOptions& o = groups_[g].options;
    const backend::SgdArgs args{.lr = o.lr,
                                .momentum = o.momentum,
                                .dampening = o.dampening,
                                .weight_decay = o.weight_decay,
                                .nesterov = o.nesterov,
                                .maximize = o.maximize,
                                .found_inf = amp_found_inf(),
                                .skipped_steps = amp_skipped_steps()};
    detail::sgd_update_many(type_name(),
                            detail::param_refs(groups_[g].params, g,
                                               [this](size_t gi, size_t i) -> ParamState& {
                                                 return state_slot(gi, i);
                                               }),
                            args);
  }
}

}  // namespace ember::optim
