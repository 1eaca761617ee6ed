// src/train/train_step.cpp — fit()'s training step, eager and captured (train_step.hpp,
// Note [One training step]).
#include "train/train_step.hpp"

#include "ember/autocast.hpp"
#include "ember/autograd.hpp"
#include "ember/ops.hpp"
#include "ember/optim/clip.hpp"
#include "ember/train/multi_input.hpp"

namespace ember::train::detail {

bool scheduler_per_batch(const FitOptions& o) {
  // A schedule defined per batch (OneCycleLR, CyclicLR) steps after every optimizer step
  // unless told otherwise; stepped once per epoch it would never get past its start.
  return o.scheduler && o.scheduler_per_batch.value_or(o.scheduler->per_batch());
}

bool is_classification(const Tensor& out, const Tensor& target) {
  return target.defined() && (target.dtype() == DType::i64 || target.dtype() == DType::i32) &&
         out.dim() == 2 && target.dim() == 1;
}

Tensor count_correct(const Tensor& out, const Tensor& target) {
  NoGradGuard g;
  Tensor pred = argmax(out, 1);
  Tensor t = target.dtype() == DType::i64 ? target : target.to(DType::i64);
  return sum(eq(pred, t));
}

Tensor run_model(const nn::Module& model, const data::Example& batch, Device dev) {
  if (batch.extra_inputs.empty()) return model(batch.input);
  std::vector<Tensor> inputs = batch.inputs();
  for (Tensor& t : inputs)
    if (t.defined() && t.device() != dev) t = t.to(dev);
  return forward(model, inputs);
}

TrainStep::TrainStep(const nn::Module& model, optim::Optimizer& optimizer, const LossFn& loss,
                     const FitOptions& options, optim::GradScaler* scaler, Trainer& trainer,
                     Device dev)
    : model_(model),
      optimizer_(optimizer),
      loss_(loss),
      o_(options),
      scaler_(scaler),
      trainer_(trainer),
      dev_(dev),
      params_(model->parameters()),
      scheduler_per_batch_(scheduler_per_batch(options)) {
  // Note [Captured fit steps]: run() as one CUDA graph (train::CapturedStep): the first batch
  // eagerly, the next captured, later ones replayed; a batch of another size (the epoch's
  // last) gets its own graph. Its inputs are the batch's tensors {input, target, extras...};
  // its outputs the loss, the correct count (classification) and the gradient norm.
  if (options.capture_step)
    captured_.emplace(
        [this](const std::vector<Tensor>& in) {
          const StepOutputs out = run({in[0], in[1], {in.begin() + 2, in.end()}}, MicroBatch{});
          return std::vector<Tensor>{out.loss, out.correct, out.grad_norm};
        },
        CaptureOptions{.device = dev});
}

StepOutputs TrainStep::operator()(const data::Example& batch, const MicroBatch& micro) {
  if (!captured_) return run(batch, micro);
  std::vector<Tensor> in = {batch.input, batch.target};  // Note [Captured fit steps]
  in.insert(in.end(), batch.extra_inputs.begin(), batch.extra_inputs.end());
  const std::vector<Tensor> out = (*captured_)(in);
  return {out[0], out[1], out[2]};
}

// Note [One training step]: the whole step, for eager and captured runs alike.
StepOutputs TrainStep::run(const data::Example& batch, const MicroBatch& micro) {
  if (micro.zero_grad) optimizer_.zero_grad();
  Tensor output, loss;
  {  // mixed precision: the forward and the loss under autocast, backward outside it
    std::optional<AutocastGuard> autocast;
    if (o_.autocast) autocast.emplace(*o_.autocast);
    output = run_model(model_, batch, dev_);
    loss = loss_(output, batch.target);
  }
  // Note [Accumulation and clipping]: a micro-batch's gradient is weighted by its share.
  const Tensor weighted = micro.weight == 1.0 ? loss : loss * micro.weight;
  (scaler_ ? scaler_->scale(weighted) : weighted).backward();
  StepOutputs out{.loss = loss};
  if (micro.step) out.grad_norm = step_optimizer();
  if (is_classification(output, batch.target)) out.correct = count_correct(output, batch.target);
  return out;
}

// Unscale, clip, the before-step hooks, the optimizer's step (through the scaler, which skips
// it when a gradient is inf or NaN) and a per-batch scheduler's. Returns the norm before
// clipping (undefined without clip_grad_norm).
Tensor TrainStep::step_optimizer() {
  if (scaler_) scaler_->unscale_(optimizer_);  // the clipping below sees true gradients
  if (o_.clip_grad_value) optim::clip_grad_value(params_, *o_.clip_grad_value);
  Tensor norm;
  if (o_.clip_grad_norm)
    norm = optim::clip_grad_norm_tensor(params_, *o_.clip_grad_norm, o_.clip_norm_type);
  if (!captured_) {  // Note [One training step]: hooks run eagerly only
    if (norm.defined()) trainer_.grad_norm = norm;
    for (const auto& cb : o_.callbacks) cb->on_before_optimizer_step(trainer_);
    if (o_.before_step) o_.before_step(trainer_);
  }
  if (scaler_) {
    scaler_->step(optimizer_);
    scaler_->update();
  } else {
    optimizer_.step();
  }
  if (scheduler_per_batch_) o_.scheduler->step();
  return norm;
}

}  // namespace ember::train::detail
