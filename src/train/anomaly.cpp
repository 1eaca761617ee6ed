// src/train/anomaly.cpp — GradAnomalyCallback (ember/train/anomaly.hpp).
#include "ember/train/anomaly.hpp"

#include <utility>

#include "ember/error.hpp"

namespace ember::train {

GradAnomalyCallback::GradAnomalyCallback(AnomalyAction action) : options_{.action = action} {}
GradAnomalyCallback::GradAnomalyCallback(GradAnomalyOptions options)
    : options_(std::move(options)) {}

void GradAnomalyCallback::on_before_optimizer_step(Trainer& trainer) {
  GradAnomalyOptions o = options_;
  o.context = detail::concat("step ", trainer.global_step, " (epoch ", trainer.epoch, ", batch ",
                             trainer.batch, ")");
  const AnomalyAction action = o.action;
  o.action = AnomalyAction::silent;  // counted first, so an error leaves its step here too
  last_ = check_grad_anomaly(trainer.model()->named_parameters(), o);
  if (last_.ok()) return;
  ++anomalous_steps_;
  if (!first_step_) first_step_ = trainer.global_step;
  o.action = action;
  apply_anomaly_action(last_, o);
}

}  // namespace ember::train
