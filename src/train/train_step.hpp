// src/train/train_step.hpp — fit()'s training step (internal): the one function that runs a
// batch's forward, loss, backward and, at the end of an accumulation group, unscale, clipping,
// the before-step hooks, the optimizer's and a per-batch scheduler's steps. The eager loop calls
// it per batch; FitOptions::capture_step captures the same function into a CUDA graph
// (Note [One training step]).
#pragma once

#include <optional>
#include <vector>

#include "ember/train/capture.hpp"
#include "ember/train/fit.hpp"

namespace ember::train::detail {

// Note [One training step]: fit() has one step function, TrainStep::run, and two ways to call
// it: directly (eager), or through a CapturedStep that runs it eagerly for its warm-up,
// captures it into a CUDA graph and replays that graph (Note [Captured fit steps]). A step
// reads nothing on the host, so the graph is bitwise the eager step; what the host must see
// afterwards (the loss, the correct count, the gradient norm) comes back as tensors, and the
// caller, not the step, counts optimizer steps (Trainer::global_step), since a replay runs no
// host code of the step. The before-step hooks (callbacks' on_before_optimizer_step and
// FitOptions::before_step) run only when the step is not captured: in a graph they would run
// once, at capture, and never on replay.

/// Where a batch sits in its accumulation group (Note [Accumulation and clipping]).
struct MicroBatch {
  bool zero_grad = true;  // the group's first batch: zero the gradients before the forward
  double weight = 1.0;    // the batch's share of the group's samples, n / N (1: not weighted)
  bool step = true;       // the group's last batch: unscale, clip and step the optimizer
};

/// What one step leaves on the device; none of it is read inside the step.
struct StepOutputs {
  Tensor loss;       // the batch's loss, neither weighted nor scaled
  Tensor correct;    // rows whose argmax is the target (i64, 0-d); undefined unless classifying
  Tensor grad_norm;  // the norm before clipping; undefined unless the batch stepped with
                     // clip_grad_norm
};

/// Whether fit() steps `o.scheduler` after every optimizer step (else once an epoch).
bool scheduler_per_batch(const FitOptions& o);
/// Classification: integer class-index targets next to [N, C] outputs.
bool is_classification(const Tensor& out, const Tensor& target);
/// The number of rows whose argmax is the target, an i64 0-d tensor on their device (not read).
Tensor count_correct(const Tensor& out, const Tensor& target);
/// The model's output for a batch, every input fed to it (several for a multi-input model);
/// extra inputs not on `dev` are moved there.
Tensor run_model(const nn::Module& model, const data::Example& batch, Device dev);

/// fit()'s step for one run: built once (after FitOptions::validate), called once per batch.
/// It holds references to everything it is given; none of them may move while it lives.
class TrainStep {
 public:
  /// `scaler` is options.grad_scaler or fit()'s own; with options.capture_step the step runs
  /// through a CapturedStep on `dev`.
  TrainStep(const nn::Module& model, optim::Optimizer& optimizer, const LossFn& loss,
            const FitOptions& options, optim::GradScaler* scaler, Trainer& trainer, Device dev);
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  /// One batch: eagerly, or through the captured graph (then `micro` is a whole group of one).
  StepOutputs operator()(const data::Example& batch, const MicroBatch& micro);

 private:
  StepOutputs run(const data::Example& batch, const MicroBatch& micro);
  Tensor step_optimizer();

  nn::Module model_;
  optim::Optimizer& optimizer_;
  const LossFn& loss_;
  const FitOptions& o_;
  optim::GradScaler* scaler_;
  Trainer& trainer_;
  Device dev_;
  std::vector<Tensor> params_;
  bool scheduler_per_batch_;
  std::optional<CapturedStep> captured_;
};

}  // namespace ember::train::detail
