// src/optim/sgd.cpp — SGD: options (JSON, validation) and the step over every group.
#include "ember/optim/sgd.hpp"

#include <cmath>

#include "optim/fused.hpp"

namespace ember::optim {

void to_json(json& j, const SGDOptions& o) {
  j = {{"lr", o.lr},
       {"momentum", o.momentum},
       {"dampening", o.dampening},
       {"weight_decay", o.weight_decay},
       {"nesterov", o.nesterov},
       {"maximize", o.maximize}};
}

void from_json(const json& j, SGDOptions& o) {
  if (j.contains("lr")) o.lr = j["lr"].get<double>();
  if (j.contains("momentum")) o.momentum = j["momentum"].get<double>();
  if (j.contains("dampening")) o.dampening = j["dampening"].get<double>();
  if (j.contains("weight_decay")) o.weight_decay = j["weight_decay"].get<double>();
  if (j.contains("nesterov")) o.nesterov = j["nesterov"].get<bool>();
  if (j.contains("maximize")) o.maximize = j["maximize"].get<bool>();
}

void validate_options(const SGDOptions& o, const std::string& who) {
  EMBER_CHECK(o.lr >= 0.0, who, ": invalid learning rate ", o.lr, " (expected lr >= 0)");
  EMBER_CHECK(o.momentum >= 0.0, who, ": invalid momentum ", o.momentum,
              " (expected momentum >= 0)");
  EMBER_CHECK(o.weight_decay >= 0.0, who, ": invalid weight_decay ", o.weight_decay,
              " (expected weight_decay >= 0)");
  EMBER_CHECK(!std::isnan(o.dampening), who, ": invalid dampening ", o.dampening,
              " (expected a number)");
  EMBER_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0), who,
              ": nesterov requires momentum > 0 and dampening = 0 (got momentum ", o.momentum,
              ", dampening ", o.dampening, ")");
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : TypedOptimizer(options) {
  add_param_group(Group{std::move(params), options});
  check_not_empty();
}

SGD::SGD(std::vector<Group> groups, SGDOptions defaults) : TypedOptimizer(defaults) {
  validate_options(defaults, type_name());
  for (Group& g : groups) add_param_group(std::move(g));
  check_not_empty();
}

Optimizer::StateSpec SGD::state_spec(size_t) const { return {{}, {"momentum_buffer"}}; }

void SGD::update() {
  const std::string who = type_name();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    const SGDOptions& o = group.options;
    const ops::SgdHyper hyper{.lr = o.lr,
                              .momentum = o.momentum,
                              .dampening = o.dampening,
                              .weight_decay = o.weight_decay,
                              .nesterov = o.nesterov,
                              .maximize = o.maximize,
                              .found_inf = amp_found_inf(),
                              .skipped_steps = amp_skipped_steps()};
    std::vector<detail::ParamRef> refs;
    refs.reserve(group.params.size());
    if (!group.params.empty()) state_slot(g, group.params.size() - 1);  // refs keep pointers
    for (size_t i = 0; i < group.params.size(); ++i)
      refs.push_back({&group.params[i], &state_slot(g, i)});
    detail::sgd_update_many(who, refs, hyper);
  }
}

}  // namespace ember::optim
