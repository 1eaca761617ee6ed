// ember/train/fit.hpp — the training loop: fit() with validation, metrics, callbacks
// (early stopping, LR schedules, user hooks) and a progress display; evaluate().
//
//   nn::Sequential net({nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10)});
//   optim::Adam opt(net->parameters(), {.lr = 1e-3});
//   train::History h = train::fit(net, train_loader, opt, train::cross_entropy_loss(),
//                                 {.epochs = 5, .val_loader = &test_loader});
//
// Gradient clipping, accumulation over micro-batches and a hook before each optimizer step:
//   train::fit(net, loader, opt, loss, {.epochs = 3, .clip_grad_norm = 1.0,
//                                       .accumulate_grad_batches = 4,
//                                       .before_step = [](train::Trainer& t) { ... }});
// A model whose forward takes several tensors (train::MultiInputImpl) is fed every input of
// the batch (data::Example::inputs()); see ember/train/multi_input.hpp.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/nn/module.hpp"
#include "ember/optim/grad_scaler.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/optim/scheduler.hpp"

namespace ember::train {

/// loss(output, target) -> scalar tensor.
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
/// Softmax cross-entropy on logits with class-index targets (the usual classifier loss).
LossFn cross_entropy_loss();
LossFn mse_loss_fn();

/// Averages over the samples seen. accuracy is set when targets are class indices.
struct Metrics {
  double loss = 0.0;
  std::optional<double> accuracy = std::nullopt;
  int64_t samples = 0;
};

struct BatchLog {
  int64_t epoch = 0;        // 0-based
  int64_t batch = 0;        // 0-based within the epoch
  int64_t global_step = 0;  // optimizer steps taken so far (this batch's included, if it stepped)
  double loss = 0.0;        // this batch's loss (unscaled by accumulation)
  int64_t batch_size = 0;
};

struct EpochLog {
  int64_t epoch = 0;
  Metrics train{};
  std::optional<Metrics> val = std::nullopt;
  double seconds = 0.0;
  double samples_per_second = 0.0;
  std::vector<double> lrs{};  // learning rates in force during the epoch
};

struct History {
  std::vector<EpochLog> epochs{};
  bool stopped_early = false;
  std::optional<int64_t> best_epoch = std::nullopt;  // set by EarlyStopping
};

class Trainer;

/// Hooks into fit(). Set `trainer.stop()` to end training after the current epoch.
class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(Trainer&) {}
  virtual void on_batch_end(Trainer&, const BatchLog&) {}
  /// Whether on_batch_end reads BatchLog::loss. That value is read from the device after the
  /// step (a host sync on a GPU); fit() reads it only when a callback or `on_batch` wants it.
  virtual bool needs_batch_loss() const { return true; }
  /// After backward (of the last micro-batch when accumulating) and clipping, before
  /// optimizer.step(): the gradients are final (trainer.model()->parameters()[i].grad()).
  virtual void on_before_optimizer_step(Trainer&) {}
  virtual void on_epoch_end(Trainer&, const EpochLog&) {}
  virtual void on_train_end(Trainer&, History&) {}
};

enum class Progress { automatic, bar, lines, none };

struct FitOptions {
  int64_t epochs = 1;
  data::DataLoader* val_loader = nullptr;
  /// Stepped after every optimizer step (per batch) or every epoch.
  optim::LRScheduler* scheduler = nullptr;
  /// Unset: per batch when the scheduler is defined per batch (scheduler->per_batch():
  /// OneCycleLR, CyclicLR), else per epoch. true steps any scheduler per batch; false with a
  /// per-batch scheduler is refused (its schedule would stop near its start).
  std::optional<bool> scheduler_per_batch = std::nullopt;
  /// Stepped with the validation loss (training loss without validation) after every epoch.
  optim::ReduceLROnPlateau* plateau = nullptr;
  std::vector<std::shared_ptr<Callback>> callbacks{};
  std::function<void(const BatchLog&)> on_batch = nullptr;
  std::function<void(const EpochLog&)> on_epoch = nullptr;
  /// automatic: a live bar on a terminal, one line per epoch otherwise.
  Progress progress = Progress::automatic;
  std::ostream* out = nullptr;  // std::cout when null
  /// Deprecated: a run's device is its model's (move the model with `model->to(device)`);
  /// the loader delivers every batch there. When set it must name the model's device (no
  /// [[deprecated]] attribute: on a field it would warn wherever FitOptions is built).
  std::optional<Device> device = std::nullopt;
  /// Epoch to start from (set by resuming from a checkpoint); epochs run from here to `epochs`.
  int64_t start_epoch = 0;
  /// Optimizer steps already taken (set by resuming), so checkpoints keep counting.
  int64_t start_step = 0;
  /// Save a checkpoint (model, optimizer, scheduler, RNG, loader position) to
  /// `checkpoint_path` every N optimizer steps (0 = never), atomically replacing the last.
  int64_t checkpoint_every = 0;
  std::string checkpoint_path{};
  /// Write those checkpoints in the background (io::save_checkpoint_async): the step that
  /// takes one pays only for the device-side snapshot; fit() waits for the last write before
  /// it returns.
  bool checkpoint_async = true;

  // ---- the optimizer step (Note [Accumulation and clipping] in src/train/fit.cpp, and
  // Note [One training step] in src/train/train_step.hpp) ----
  /// Clamp every gradient to [-v, v] before each step (torch.nn.utils.clip_grad_value_).
  std::optional<double> clip_grad_value = std::nullopt;
  /// Scale the gradients so their global norm of order clip_norm_type is at most this, before
  /// each step (torch.nn.utils.clip_grad_norm_; applied after clip_grad_value when both are
  /// set). The norm before clipping is Trainer::grad_norm.
  std::optional<double> clip_grad_norm = std::nullopt;
  double clip_norm_type = 2.0;  // p > 0, or optim::kInfNorm
  /// Step the optimizer once every k batches, the gradients of the k micro-batches summed
  /// with each loss weighted by its share of the group's samples, so the update equals one
  /// batch of all k (for a loss that is a mean over its batch, as the built-in ones are). The
  /// last group of an epoch may be shorter: it steps on what it has. Checkpoints, schedulers
  /// stepped per batch and global_step count optimizer steps.
  int64_t accumulate_grad_batches = 1;
  /// Called after backward and clipping, right before each optimizer.step() (after the
  /// callbacks' on_before_optimizer_step): read or change the gradients, log their norm.
  std::function<void(Trainer&)> before_step = nullptr;
  /// Run each training step as a captured CUDA graph (train::CapturedStep, docs/capture.md):
  /// zero_grad, forward, loss, backward, clipping, the optimizer and a per-batch scheduler in
  /// one launch, bitwise the eager step. The first batch runs eagerly, the next is captured; a
  /// last batch of another size gets its own graph. Needs the model on a CUDA device and
  /// accumulate_grad_batches = 1; before_step is refused and the callbacks'
  /// on_before_optimizer_step is not called (both would run inside the graph).
  bool capture_step = false;

  // ---- mixed precision (docs/mixed_precision.md) ----
  /// Run each step's forward and loss under AutocastGuard(*autocast) (DType::f16 or bf16);
  /// backward and the optimizer stay outside it (master weights in f32).
  std::optional<DType> autocast = std::nullopt;
  /// Loss scaling: each step becomes scale(loss).backward(), unscale_ (before clipping),
  /// step, update (optim::GradScaler, owned by the caller; checkpoints carry its state and
  /// resume() restores it). Unset with autocast f16: fit() makes its own GradScaler with the
  /// default options (pass your own to restore its state on resume). bf16 needs none.
  optim::GradScaler* grad_scaler = nullptr;

  /// Checks the options on their own and throws ember::Error naming the first bad one and
  /// its value: epochs and start_epoch >= 0, checkpoint_every >= 0 with a checkpoint_path,
  /// accumulate_grad_batches >= 1, clip values >= 0 and clip_norm_type > 0, no per-batch
  /// scheduler with scheduler_per_batch = false, autocast f16 or bf16, no before_step with
  /// capture_step. Call it to check options before building a run; fit() calls the overload
  /// below first, so it never starts training on bad options.
  ///   train::FitOptions o{.clip_grad_norm = -1.0};
  ///   o.validate();  // throws "fit: clip_grad_norm -1 (expected >= 0)"
  void validate() const;
  /// validate(), then the checks against what fit() is given: a defined model on one device
  /// (FitOptions::device, when set, naming it), a loss function, a training loader with
  /// batches when there is an epoch to run, an optimizer that does not accumulate steps
  /// itself when accumulate_grad_batches > 1, and for capture_step a model on a CUDA device
  /// and no accumulation of either kind. The model is checked first, then validate().
  void validate(const nn::Module& model, const data::DataLoader& train_loader,
                const optim::Optimizer& optimizer, const LossFn& loss) const;
};

/// Restores a checkpoint written by fit() into the objects and returns FitOptions fields to
/// continue with (start_epoch, start_step). Example:
///   auto [epoch, step] = train::resume("ckpt.safetensors", net, opt, sched, loader);
struct ResumePoint {
  int64_t epoch = 0;
  int64_t step = 0;
};
ResumePoint resume(const std::string& path, const nn::Module& model, optim::Optimizer& optimizer,
                   optim::LRScheduler* scheduler, data::DataLoader& loader,
                   optim::GradScaler* grad_scaler = nullptr);

/// The running state fit() hands to callbacks.
class Trainer {
 public:
  Trainer(nn::Module model, optim::Optimizer& optimizer)
      : model_(std::move(model)), optimizer_(&optimizer) {}
  nn::Module& model() { return model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  void stop() { stop_ = true; }
  bool stopping() const { return stop_; }
  int64_t global_step = 0;
  int64_t epoch = 0;
  /// The batch of the epoch being trained (0-based; the group's last one in before-step hooks).
  int64_t batch = 0;
  /// The gradients' global norm before clipping, a 0-d tensor on the model's device (not read,
  /// so no host sync): set before each step when FitOptions::clip_grad_norm is, else undefined.
  Tensor grad_norm{};

 private:
  nn::Module model_;
  optim::Optimizer* optimizer_;
  bool stop_ = false;
};

/// Trains `model` for options.epochs epochs and returns the per-epoch history. First calls
/// options.validate(model, train_loader, optimizer, loss), so bad options (or a training
/// loader with no batches when there is an epoch to run) throw before anything trains.
History fit(nn::Module model, data::DataLoader& train_loader, optim::Optimizer& optimizer,
            const LossFn& loss, FitOptions options = {});

/// Loss and accuracy over `loader` in eval mode under NoGradGuard (the mode is restored), on
/// the model's device (the loader delivers the batches there). Throws when the loader has
/// no batches (an empty dataset, or drop_last with fewer examples than batch_size): a loss
/// over no samples means nothing.
Metrics evaluate(nn::Module model, data::DataLoader& loader, const LossFn& loss);
/// Deprecated: `device`, when set, must be the model's device.
[[deprecated("evaluate() runs on the model's device; drop the device argument")]] Metrics evaluate(
    nn::Module model, data::DataLoader& loader, const LossFn& loss, std::optional<Device> device);

/// The device fit() and evaluate() run on: the one every parameter and buffer of `model`
/// lives on (the CPU for a model without any). Throws, naming two tensors, when they are on
/// different devices.
Device model_device(const nn::Module& model);

/// Stops when the monitored metric has not improved for `patience` epochs, and (when
/// restore_best) puts back the weights of the best epoch.
struct EarlyStoppingOptions {
  std::string monitor = "val_loss";  // val_loss, val_accuracy, loss, accuracy
  int64_t patience = 3;
  double min_delta = 0.0;
  bool restore_best = true;
};
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(Trainer&) override;
  void on_epoch_end(Trainer& trainer, const EpochLog& log) override;
  void on_train_end(Trainer& trainer, History& history) override;
  bool needs_batch_loss() const override { return false; }
  std::optional<int64_t> best_epoch() const { return best_epoch_; }

 private:
  EarlyStoppingOptions options_;
  std::optional<double> best_;
  std::optional<int64_t> best_epoch_;
  int64_t bad_epochs_ = 0;
  nn::StateDict best_state_;
};

}  // namespace ember::train
