// ember/train/anomaly.hpp — check_grad_anomaly (ember/anomaly.hpp) as a fit() callback: the
// model's gradients checked before every optimizer step.
//
//   auto check = std::make_shared<train::GradAnomalyCallback>(AnomalyAction::error);
//   train::fit(net, loader, opt, loss, {.epochs = 3, .callbacks = {check}});
//   // throws "check_grad_anomaly: step 41 (epoch 0, batch 41): parameter '2.weight' ..."
#pragma once

#include <cstdint>
#include <optional>

#include "ember/anomaly.hpp"
#include "ember/train/fit.hpp"

namespace ember::train {

/// Before each optimizer step (after backward, the scaler's unscale_ and clipping), checks the
/// gradients of trainer.model()->named_parameters() with `options` (its context becomes "step
/// N (epoch E, batch B)", N the optimizer steps taken before this one). With
/// AnomalyAction::error fit() stops with the error before the step poisons the weights.
/// Not called for captured steps (FitOptions::capture_step: the check reads the device). With
/// f16 autocast and a GradScaler, Inf gradients are the scaler's business (it skips that step):
/// expect warnings there.
class GradAnomalyCallback : public Callback {
 public:
  explicit GradAnomalyCallback(AnomalyAction action = AnomalyAction::warn);
  explicit GradAnomalyCallback(GradAnomalyOptions options);
  void on_before_optimizer_step(Trainer& trainer) override;
  bool needs_batch_loss() const override { return false; }
  /// The report of the last step checked.
  const GradAnomalyReport& last_report() const { return last_; }
  /// Steps whose gradients had an anomaly, and the first of them (its global step, 0-based).
  int64_t anomalous_steps() const { return anomalous_steps_; }
  std::optional<int64_t> first_anomalous_step() const { return first_step_; }

 private:
  GradAnomalyOptions options_;
  GradAnomalyReport last_;
  int64_t anomalous_steps_ = 0;
  std::optional<int64_t> first_step_;
};

}  // namespace ember::train
