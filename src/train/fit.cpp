// src/train/fit.cpp — fit() (its options' checks, and its loop around the training step of
// src/train/train_step.cpp), evaluate(), EarlyStopping and the progress display.
#include "ember/train/fit.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "ember/autograd.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/ops.hpp"
#include "train/train_step.hpp"

namespace ember::train {

LossFn cross_entropy_loss() {
  return [](const Tensor& out, const Tensor& target) { return cross_entropy(out, target); };
}
LossFn mse_loss_fn() {
  return [](const Tensor& out, const Tensor& target) { return mse_loss(out, target); };
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string format_duration(double s) {
  std::ostringstream o;
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t total = static_cast<int64_t>(s + 0.5);
  if (total >= 3600)
    o << total / 3600 << "h" << std::setw(2) << std::setfill('0') << (total / 60) % 60 << "m";
  else if (total >= 60)
    o << total / 60 << "m" << std::setw(2) << std::setfill('0') << total % 60 << "s";
  else
    o << std::fixed << std::setprecision(1) << s << "s";
  return o.str();
}

std::string format_count(double v) {
  std::string s = std::to_string(static_cast<int64_t>(v + 0.5));
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// Note [Metrics on the device]: fit() sums the loss (f64) and the correct count (i64) of an
// epoch into two 0-d tensors on the training device; the host reads them only when the
// progress bar redraws (at most every 100 ms) and at the end of the epoch, so a GPU step
// never waits for the host. A per-batch loss is read only when a hook asks for it.
struct DeviceMetrics {
  Tensor loss_sum, correct;
  explicit DeviceMetrics(Device dev)
      : loss_sum(zeros({}, {.dtype = DType::f64, .device = dev})),
        correct(zeros({}, {.dtype = DType::i64, .device = dev})) {}
  void add(const Tensor& loss, int64_t n, const Tensor* batch_correct) {
    NoGradGuard g;
    const Device dev = loss_sum.device();
    loss_sum.add_(loss.detach().to(DType::f64).to(dev) * static_cast<double>(n));
    if (batch_correct) correct.add_(batch_correct->to(dev));
  }
};

// Note [One device per run]: fit() and evaluate() run where the model lives. The loader
// delivers each batch there (DataLoader::begin_on, on its prefetch thread), so no step moves
// data and no other option chooses a device.
Device run_device(const nn::Module& model, std::optional<Device> requested, const char* op,
                  const char* option) {
  const Device dev = model_device(model);
  EMBER_CHECK(!requested || *requested == dev, op, ": ", option, " is ", requested->str(),
              " but the model is on ", dev.str(),
              "; a run's device is its model's: move the model with model->to(", requested->str(),
              ") and leave ", option, " unset (it is deprecated)");
  return dev;
}

// Note [Accumulation and clipping]
// With accumulate_grad_batches = k the batches of an epoch form groups of k (batch b is in
// group b / k, counted from the epoch's start, so a run resumed from a checkpoint, which is
// written only after a step, groups exactly as an uninterrupted one). A group's first batch
// zeroes the gradients; each batch j backpropagates loss_j * n_j / N, with n_j its samples
// and N the group's, so the summed gradient is that of the mean loss over all N samples: one
// big batch's. The last batch of a group clips (clip_grad_value, then clip_grad_norm), calls
// the before-step hooks and steps (detail::TrainStep, Note [One training step]). An epoch's last
// group may hold fewer than k batches (or start later, when resumed mid-group from another k): it
// is weighted by its own N and steps at the epoch's end, so no gradient leaks into the next epoch.
struct Groups {
  int64_t k = 1, first = 0, batches = 0, batch_size = 1, size = 0;
  bool drop_last = false;
  int64_t begin(int64_t b) const { return std::max(b / k * k, first); }
  int64_t last(int64_t b) const { return std::min(b / k * k + k, batches) - 1; }
  int64_t rows(int64_t b) const {
    return drop_last ? batch_size : std::min(batch_size, size - b * batch_size);
  }
  int64_t samples(int64_t b) const {
    int64_t n = 0;
    for (int64_t i = begin(b); i <= last(b); ++i) n += rows(i);
    return n;
  }
  /// Batch b of n rows as the step sees it.
  detail::MicroBatch micro(int64_t b, int64_t n) const {
    return {.zero_grad = b == begin(b),
            .weight = k == 1 ? 1.0 : static_cast<double>(n) / static_cast<double>(samples(b)),
            .step = b == last(b)};
  }
};

// Live bar on a terminal; one line per epoch otherwise.
class ProgressDisplay {
 public:
  ProgressDisplay(Progress mode, std::ostream& out, int64_t epochs) : out_(out), epochs_(epochs) {
    if (mode == Progress::automatic) {
      const bool tty = (&out == &std::cout && isatty(fileno(stdout))) ||
                       (&out == &std::cerr && isatty(fileno(stderr)));
      mode = tty ? Progress::bar : Progress::lines;
    }
    mode_ = mode;
  }

  void begin_epoch(int64_t epoch, int64_t batches) {
    epoch_ = epoch;
    batches_ = batches;
    last_draw_ = Clock::time_point();
  }

  /// Whether update(done, ...) would draw now: bar mode, at most every 100 ms and at the end.
  bool due(int64_t done) const {
    if (mode_ != Progress::bar) return false;
    return done >= batches_ || Clock::now() - last_draw_ >= std::chrono::milliseconds(100);
  }

  void update(int64_t done, double loss, std::optional<double> acc, double samples_per_s,
              double eta) {
    if (!due(done)) return;
    last_draw_ = Clock::now();
    constexpr int kWidth = 24;
    const int filled = batches_ > 0 ? static_cast<int>(kWidth * done / batches_) : kWidth;
    std::ostringstream line;
    line << "\repoch " << epoch_ + 1 << "/" << epochs_ << " [";
    for (int i = 0; i < kWidth; ++i) line << (i < filled ? '=' : (i == filled ? '>' : ' '));
    line << "] " << done << "/" << batches_ << " loss " << std::fixed << std::setprecision(4)
         << loss;
    if (acc) line << " acc " << std::setprecision(2) << *acc * 100.0 << "%";
    line << " " << format_count(samples_per_s) << " samples/s ETA " << format_duration(eta)
         << "   ";
    out_ << line.str() << std::flush;
  }

  void end_epoch(const EpochLog& log) {
    if (mode_ == Progress::none) return;
    std::ostringstream line;
    if (mode_ == Progress::bar) line << "\r";
    line << "epoch " << log.epoch + 1 << "/" << epochs_ << ": loss " << std::fixed
         << std::setprecision(4) << log.train.loss;
    if (log.train.accuracy)
      line << " acc " << std::setprecision(2) << *log.train.accuracy * 100.0 << "%";
    if (log.val) {
      line << " | val_loss " << std::setprecision(4) << log.val->loss;
      if (log.val->accuracy)
        line << " val_acc " << std::setprecision(2) << *log.val->accuracy * 100.0 << "%";
    }
    line << " | " << format_count(log.samples_per_second) << " samples/s, "
         << format_duration(log.seconds);
    if (!log.lrs.empty())
      line << ", lr " << std::defaultfloat << std::setprecision(4) << log.lrs[0];
    if (mode_ == Progress::bar) line << "          ";
    out_ << line.str() << "\n" << std::flush;
  }

 private:
  std::ostream& out_;
  Progress mode_;
  int64_t epochs_, epoch_ = 0, batches_ = 0;
  Clock::time_point last_draw_;
};

}  // namespace

Device model_device(const nn::Module& model) {
  EMBER_CHECK(model.defined(), "model_device: the model is undefined");
  std::optional<std::pair<std::string, Device>> first;
  auto visit = [&](const nn::NamedTensors& tensors) {
    for (const auto& [name, t] : tensors) {
      if (!t.defined()) continue;
      if (!first) {
        first.emplace(name, t.device());
        continue;
      }
      EMBER_CHECK(t.device() == first->second, "model_device: the model is on two devices: '",
                  first->first, "' is on ", first->second.str(), " and '", name, "' on ",
                  t.device().str(), " (expected one device: move the model with model->to())");
    }
  };
  visit(model->named_parameters());
  visit(model->named_buffers());
  return first ? first->second : Device::cpu();
}

Metrics evaluate(nn::Module model, data::DataLoader& loader, const LossFn& loss,
                 std::optional<Device> device) {
  EMBER_CHECK(model.defined(), "evaluate: the model is undefined");
  run_device(model, device, "evaluate", "the device argument");
  return evaluate(std::move(model), loader, loss);
}

Metrics evaluate(nn::Module model, data::DataLoader& loader, const LossFn& loss) {
  EMBER_CHECK(model.defined(), "evaluate: the model is undefined");
  // A loss of 0 over no samples would read as a perfect model.
  EMBER_CHECK(loader.num_batches() > 0, "evaluate: the loader has no batches (got ", loader.size(),
              " examples with batch_size ", loader.options().batch_size,
              loader.options().drop_last ? " and drop_last" : "", ", expected at least one batch)");
  const bool was_training = model->is_training();
  model->eval();
  NoGradGuard no_grad;
  const Device dev = model_device(model);
  double loss_sum = 0.0;
  int64_t correct = 0, samples = 0;
  bool classification = false;
  DeviceMetrics metrics(dev);
  try {
    for (auto it = loader.begin_on(dev); it != loader.end(); ++it) {
      const Tensor& x = it->input;
      const Tensor& y = it->target;
      Tensor out = detail::run_model(model, *it, dev);
      const int64_t n = x.dim() ? x.size(0) : 1;
      const Tensor l = loss(out, y);
      Tensor hits;
      if (detail::is_classification(out, y)) {
        classification = true;
        hits = detail::count_correct(out, y);
      }
      metrics.add(l, n, hits.defined() ? &hits : nullptr);
      samples += n;
    }
    loss_sum = metrics.loss_sum.item<double>();
    correct = metrics.correct.item<int64_t>();
  } catch (...) {
    model->train(was_training);
    throw;
  }
  model->train(was_training);
  Metrics m;
  m.samples = samples;
  m.loss = samples ? loss_sum / static_cast<double>(samples) : 0.0;
  if (classification && samples)
    m.accuracy = static_cast<double>(correct) / static_cast<double>(samples);
  return m;
}

// ---- fit ----

void FitOptions::validate() const {
  EMBER_CHECK(epochs >= 0 && start_epoch >= 0, "fit: epochs ", epochs, " and start_epoch ",
              start_epoch, " (expected both >= 0)");
  EMBER_CHECK(checkpoint_every >= 0 && (checkpoint_every == 0 || !checkpoint_path.empty()),
              "fit: checkpoint_every ", checkpoint_every, " needs a checkpoint_path (got '",
              checkpoint_path, "')");
  EMBER_CHECK(accumulate_grad_batches >= 1, "fit: accumulate_grad_batches ",
              accumulate_grad_batches, " (expected >= 1)");
  EMBER_CHECK(!clip_grad_value || *clip_grad_value >= 0.0, "fit: clip_grad_value ",
              clip_grad_value.value_or(0.0), " (expected >= 0)");
  EMBER_CHECK(!clip_grad_norm || *clip_grad_norm >= 0.0, "fit: clip_grad_norm ",
              clip_grad_norm.value_or(0.0), " (expected >= 0)");
  EMBER_CHECK(clip_norm_type > 0.0, "fit: clip_norm_type ", clip_norm_type,
              " (expected p > 0, or optim::kInfNorm)");
  EMBER_CHECK(!scheduler || !scheduler->per_batch() || detail::scheduler_per_batch(*this),
              "fit: ", scheduler->type_name(),
              " is defined per batch (one step per optimizer step), but scheduler_per_batch = "
              "false would step it once per epoch (expected scheduler_per_batch unset or true)");
  EMBER_CHECK(!autocast || *autocast == DType::f16 || *autocast == DType::bf16, "fit: autocast ",
              autocast ? dtype_name(*autocast) : "", " (expected f16 or bf16)");
  EMBER_CHECK(!capture_step || !before_step,
              "fit: capture_step cannot call before_step inside the captured "
              "graph; leave before_step unset or capture_step off");
}

void FitOptions::validate(const nn::Module& model, const data::DataLoader& train_loader,
                          const optim::Optimizer& optimizer, const LossFn& loss) const {
  EMBER_CHECK(model.defined(), "fit: the model is undefined");
  validate();
  EMBER_CHECK(loss != nullptr, "fit: no loss function given");
  EMBER_CHECK(train_loader.num_batches() > 0 || start_epoch >= epochs,
              "fit: the training loader has no batches (got ", train_loader.size(),
              " examples with batch_size ", train_loader.options().batch_size,
              train_loader.options().drop_last ? " and drop_last" : "",
              ", expected at least one batch)");
  const Device dev = run_device(model, device, "fit", "FitOptions::device");
  // Two accumulations would compound: the optimizer would update every k-th fit() step.
  EMBER_CHECK(accumulate_grad_batches == 1 || optimizer.accumulate_steps() == 1,
              "fit: accumulate_grad_batches ", accumulate_grad_batches,
              " with an optimizer that accumulates ", optimizer.accumulate_steps(),
              " steps itself (expected one of them: set_accumulate_steps(1), or "
              "accumulate_grad_batches = 1)");
  if (!capture_step) return;
  EMBER_CHECK(dev.is_cuda(), "fit: capture_step needs the model on a CUDA device (got ", dev.str(),
              "); move the model with model->to(Device::cuda(0))");
  EMBER_CHECK(accumulate_grad_batches == 1 && optimizer.accumulate_steps() == 1,
              "fit: capture_step steps the optimizer on every batch (got "
              "accumulate_grad_batches ",
              accumulate_grad_batches, ", optimizer accumulate_steps ",
              optimizer.accumulate_steps(), "; expected 1 for both)");
}

namespace {

// fit()'s loop around the step (detail::TrainStep): an epoch's batches, its metrics on the
// device, the checkpoints, the batch hooks and the progress display.
struct Loop {
  nn::Module model;
  data::DataLoader& loader;
  optim::Optimizer& optimizer;
  const FitOptions& o;
  Trainer& trainer;
  detail::TrainStep& step;
  ProgressDisplay& progress;
  Device dev;
  bool batch_hooks;  // whether anything reads BatchLog::loss (a host read per batch)

  // One epoch of training (validation and the per-epoch schedulers are fit()'s).
  EpochLog train_epoch(int64_t epoch) {
    model->train();
    EpochLog log;
    log.epoch = epoch;
    log.lrs = optimizer.lrs();
    const int64_t batches = loader.num_batches();
    progress.begin_epoch(epoch, batches);
    const auto t0 = Clock::now();
    DeviceMetrics metrics(dev);
    int64_t samples = 0, b = loader.position();
    bool classification = false;
    const Groups groups{
        o.accumulate_grad_batches, b, batches, loader.options().batch_size, loader.size(),
        loader.options().drop_last};
    for (auto it = loader.begin_on(dev); it != loader.end(); ++it) {
      const int64_t n = it->input.dim() ? it->input.size(0) : 1;
      trainer.batch = b;
      const detail::MicroBatch micro = groups.micro(b, n);
      const detail::StepOutputs out = step(*it, micro);
      if (micro.step) ++trainer.global_step;
      if (out.grad_norm.defined()) trainer.grad_norm = out.grad_norm;
      classification = classification || out.correct.defined();
      metrics.add(out.loss, n, out.correct.defined() ? &out.correct : nullptr);
      samples += n;
      if (micro.step && o.checkpoint_every > 0 && trainer.global_step % o.checkpoint_every == 0)
        (o.checkpoint_async ? io::save_checkpoint_async : io::save_checkpoint)(
            o.checkpoint_path, model, optimizer, o.scheduler, trainer.global_step,
            nn::json{{"epoch", epoch}}, &loader, o.grad_scaler);
      if (batch_hooks) {
        const BatchLog bl{epoch, b, trainer.global_step, out.loss.item<double>(), n};
        for (auto& cb : o.callbacks) cb->on_batch_end(trainer, bl);
        if (o.on_batch) o.on_batch(bl);
      }
      ++b;
      if (progress.due(b)) {  // reads the device metrics only when it redraws
        const double elapsed = seconds_since(t0), seen = static_cast<double>(samples);
        const double eta = elapsed / static_cast<double>(b) * static_cast<double>(batches - b);
        progress.update(
            b, metrics.loss_sum.item<double>() / seen,
            classification
                ? std::optional<double>(static_cast<double>(metrics.correct.item<int64_t>()) / seen)
                : std::nullopt,
            elapsed > 0 ? seen / elapsed : 0.0, eta);
      }
    }
    const double loss_sum = samples ? metrics.loss_sum.item<double>() : 0.0;
    const int64_t correct = classification ? metrics.correct.item<int64_t>() : 0;
    log.train.samples = samples;
    log.train.loss = samples ? loss_sum / static_cast<double>(samples) : 0.0;
    if (classification && samples)
      log.train.accuracy = static_cast<double>(correct) / static_cast<double>(samples);
    log.seconds = seconds_since(t0);
    log.samples_per_second = log.seconds > 0 ? static_cast<double>(samples) / log.seconds : 0.0;
    return log;
  }
};

}  // namespace

History fit(nn::Module model, data::DataLoader& train_loader, optim::Optimizer& optimizer,
            const LossFn& loss, FitOptions o) {
  o.validate(model, train_loader, optimizer, loss);
  const Device dev = model_device(model);
  // f16 autocast without a scaler gets a default one (checkpoints carry its state).
  std::optional<optim::GradScaler> own_scaler;
  if (!o.grad_scaler && o.autocast == DType::f16) o.grad_scaler = &own_scaler.emplace();
  Trainer trainer(model, optimizer);
  trainer.global_step = o.start_step;
  detail::TrainStep step(model, optimizer, loss, o, o.grad_scaler, trainer, dev);
  ProgressDisplay progress(o.progress, o.out ? *o.out : std::cout, o.epochs);
  bool batch_hooks = static_cast<bool>(o.on_batch);
  for (auto& cb : o.callbacks) batch_hooks = batch_hooks || cb->needs_batch_loss();
  Loop loop{model, train_loader, optimizer, o, trainer, step, progress, dev, batch_hooks};
  History history;
  for (auto& cb : o.callbacks) cb->on_train_begin(trainer);
  for (int64_t epoch = o.start_epoch; epoch < o.epochs && !trainer.stopping(); ++epoch) {
    trainer.epoch = epoch;
    EpochLog log = loop.train_epoch(epoch);
    if (o.val_loader) log.val = evaluate(model, *o.val_loader, loss);
    if (o.scheduler && !detail::scheduler_per_batch(o)) o.scheduler->step();
    if (o.plateau) o.plateau->step(log.val ? log.val->loss : log.train.loss);
    progress.end_epoch(log);
    history.epochs.push_back(log);
    for (auto& cb : o.callbacks) cb->on_epoch_end(trainer, log);
    if (o.on_epoch) o.on_epoch(log);
  }
  if (o.checkpoint_every > 0 && o.checkpoint_async) io::wait_for_checkpoint();  // the last one
  history.stopped_early = trainer.stopping();
  for (auto& cb : o.callbacks) cb->on_train_end(trainer, history);
  return history;
}
ResumePoint resume(const std::string& path, const nn::Module& model, optim::Optimizer& optimizer,
                   optim::LRScheduler* scheduler, data::DataLoader& loader,
                   optim::GradScaler* grad_scaler) {
  io::CheckpointInfo info =
      io::load_checkpoint(path, model, optimizer, scheduler, &loader, grad_scaler);
  return {loader.epoch(), info.step};
}

// ---- EarlyStopping ----

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)) {
  const std::string& m = options_.monitor;
  EMBER_CHECK(m == "val_loss" || m == "val_accuracy" || m == "loss" || m == "accuracy",
              "EarlyStopping: unknown monitor '", m,
              "' (expected val_loss, val_accuracy, loss or accuracy)");
  EMBER_CHECK(options_.patience >= 0, "EarlyStopping: patience ", options_.patience,
              " (expected >= 0)");
}

void EarlyStopping::on_train_begin(Trainer&) {
  best_.reset();
  best_epoch_.reset();
  bad_epochs_ = 0;
  best_state_.clear();
}

void EarlyStopping::on_epoch_end(Trainer& trainer, const EpochLog& log) {
  const std::string& m = options_.monitor;
  std::optional<double> value;
  if (m == "val_loss" && log.val) value = log.val->loss;
  if (m == "val_accuracy" && log.val) value = log.val->accuracy;
  if (m == "loss") value = log.train.loss;
  if (m == "accuracy") value = log.train.accuracy;
  EMBER_CHECK(value.has_value(), "EarlyStopping: metric '", m,
              "' is not available (pass a val_loader for val_* metrics; accuracy needs class-index "
              "targets)");
  const bool higher_better = m.find("accuracy") != std::string::npos;
  const bool improved = !best_ || (higher_better ? *value > *best_ + options_.min_delta
                                                 : *value < *best_ - options_.min_delta);
  if (improved) {
    best_ = value;
    best_epoch_ = log.epoch;
    bad_epochs_ = 0;
    if (options_.restore_best) {
      NoGradGuard g;
      best_state_.clear();
      for (auto& [name, t] : trainer.model()->state_dict())
        best_state_.emplace_back(name, t.clone());
    }
  } else if (++bad_epochs_ >= options_.patience) {
    trainer.stop();
  }
}

void EarlyStopping::on_train_end(Trainer& trainer, History& history) {
  history.best_epoch = best_epoch_;
  if (options_.restore_best && !best_state_.empty())
    trainer.model()->load_state_dict(best_state_, true);
}

}  // namespace ember::train
