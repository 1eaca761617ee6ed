// ember/optim/swa.hpp — stochastic weight averaging and EMA (torch.optim.swa_utils, PyTorch
// 1.13): AveragedModel keeps a running average (or an exponential moving average) of a model's
// parameters in a copy of the model, SWALR anneals each group's lr to a fixed SWA lr, and
// update_bn recomputes BatchNorm running statistics for the averaged weights.
//
//   optim::AveragedModel swa(net);                       // a copy of net, averaged below
//   optim::SWALR swa_sched(opt, /*swa_lr=*/0.05);
//   for (int epoch = 0; epoch < 100; ++epoch) {
//     train_one_epoch(net, opt);
//     if (epoch >= 75) { swa->update_parameters(net); swa_sched.step(); }
//   }
//   optim::update_bn(loader, swa->module());             // then evaluate swa->module()
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ember/nn/module.hpp"
#include "ember/optim/scheduler.hpp"

namespace ember::data {
class DataLoader;
}

namespace ember::optim {

/// PyTorch's avg_fn: the new averaged value from the averaged one, the model's current one and
/// how many models were averaged so far (>= 1 when it is called).
using AvgFn =
    std::function<Tensor(const Tensor& averaged, const Tensor& current, int64_t num_averaged)>;

struct AveragedModelOptions {
  /// EMA: averaged = decay · averaged + (1 - decay) · current (PyTorch 2.x's get_ema_avg_fn);
  /// unset: the running average averaged + (current - averaged) / (n + 1).
  std::optional<double> decay = std::nullopt;
  /// A custom average (instead of decay; set one or neither).
  AvgFn avg_fn = nullptr;
  /// Average the buffers too (BatchNorm's running stats); otherwise they keep the copy's values
  /// (run update_bn before evaluating).
  bool use_buffers = false;
  /// Where the averaged copy lives (default: where the model's tensors are).
  std::optional<Device> device = std::nullopt;
};

/// torch.optim.swa_utils.AveragedModel: a copy of `model` (rebuilt from its config() and
/// loaded with its tensors: the model's type must be buildable, see nn::register_module_type)
/// whose parameters (and buffers, with use_buffers) update_parameters averages. forward runs
/// the copy; state_dict() holds "n_averaged" and the copy's tensors under "module.", as
/// PyTorch's. The first update copies the model's values.
class AveragedModelImpl : public nn::ModuleImpl {
 public:
  explicit AveragedModelImpl(const nn::Module& model, AveragedModelOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AveragedModel"; }
  nn::json options() const override;

  /// Folds `model`'s current parameters (and buffers with use_buffers) into the average. The
  /// model must have the copy's structure (the same names and shapes); no gradient is recorded.
  void update_parameters(const nn::Module& model);
  /// The averaged copy, for evaluation (and update_bn).
  nn::Module module() const { return module_; }
  /// How many times update_parameters ran (PyTorch's n_averaged buffer, read to the host).
  int64_t n_averaged() const;
  const AveragedModelOptions& averaging_options() const { return options_; }

 private:
  AveragedModelOptions options_;
  nn::Module module_;
  Tensor n_averaged_;
};

class AveragedModel : public nn::ModuleHolder<AveragedModelImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

/// torch.optim.swa_utils.SWALR: over anneal_epochs steps each group's lr moves from its value
/// to swa_lr (one for every group, or one per group) along a cosine or a line, then stays at
/// swa_lr. anneal_epochs = 0 switches at once. The state dict keeps "swa_lrs" (PyTorch keeps
/// them in the optimizer's param groups), "anneal_epochs" and "anneal_strategy".
///   optim::SWALR sched(opt, 0.05, /*anneal_epochs=*/5, optim::AnnealStrategy::linear);
class SWALR : public LRScheduler {
 public:
  SWALR(Optimizer& optimizer, std::vector<double> swa_lr, int64_t anneal_epochs = 10,
        AnnealStrategy anneal_strategy = AnnealStrategy::cos, int64_t last_epoch = -1);
  SWALR(Optimizer& optimizer, double swa_lr, int64_t anneal_epochs = 10,
        AnnealStrategy anneal_strategy = AnnealStrategy::cos, int64_t last_epoch = -1);
  std::string type_name() const override { return "SWALR"; }
  const std::vector<double>& swa_lrs() const { return swa_lrs_; }

 protected:
  std::vector<double> get_lr() override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  double anneal(double t) const;
  std::vector<double> swa_lrs_;
  int64_t anneal_epochs_;
  AnnealStrategy strategy_;
};

/// torch.optim.swa_utils.update_bn: one pass of `model` in training mode over the batches'
/// inputs with every BatchNorm's running stats reset and its momentum unset, so the running
/// stats become the cumulative average over the pass (the momentum is put back, and the
/// model's train/eval mode restored, even when a batch throws). No gradient is recorded.
/// With `device` the inputs are delivered there. A model with no BatchNorm is left alone.
///   optim::update_bn(loader, swa->module());
void update_bn(data::DataLoader& loader, const nn::Module& model,
               std::optional<Device> device = std::nullopt);
/// The same over a list of input batches.
void update_bn(const std::vector<Tensor>& inputs, const nn::Module& model,
               std::optional<Device> device = std::nullopt);

}  // namespace ember::optim
