// ember/optim/scheduler.hpp — learning-rate schedules with torch.optim.lr_scheduler's
// semantics (PyTorch 1.13): each scheduler writes the lr of every parameter group of its
// optimizer, counts epochs in last_epoch, and reports get_last_lr().
//
//   optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
//   optim::CosineAnnealingLR sched(opt, /*T_max=*/100);
//   for (int epoch = 0; epoch < 100; ++epoch) { train(opt); sched.step(); }
//
// Construction performs the first step (last_epoch becomes 0), as in PyTorch, and records
// each group's starting lr as its initial_lr (kept in the optimizer's state dict). Chainable
// schedulers use PyTorch's recursive forms (they read the groups' current lrs), so several
// schedulers on one optimizer compose as they do there. The optimizer must outlive its
// schedulers: a scheduler stepped (or asked for its optimizer) after the optimizer was
// destroyed throws ember::Error naming the scheduler, and changes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ember/optim/optimizer.hpp"

namespace ember::optim {

/// Base of the epoch-driven schedulers.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and writes the new lrs into the optimizer's groups.
  virtual void step();
  /// PyTorch's step(epoch): jumps to `epoch`, through the closed form where there is one.
  /// Whole epochs only, except CosineAnnealingWarmRestarts (fractions of an epoch allowed).
  virtual void step_to(double epoch);
  /// The lrs the last step wrote, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  /// The groups' initial lrs when the scheduler was made.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// The optimizer it drives; throws ember::Error when that was destroyed. Every access to the
  /// optimizer goes through here.
  Optimizer& optimizer() const;
  /// "StepLR", "CosineAnnealingLR", ... (stored in the state dict and checked on load).
  virtual std::string type_name() const = 0;
  /// Whether the schedule is defined per optimizer step rather than per epoch (OneCycleLR,
  /// CyclicLR, and containers holding one): train::fit steps it after every batch then.
  virtual bool per_batch() const { return false; }

  /// Counters and settings, with PyTorch's key names ("last_epoch", "_step_count",
  /// "base_lrs", "_last_lr", "gamma", ...) plus "type".
  virtual json state_dict() const;
  /// Restores what state_dict() wrote (the type must match). The optimizer's lrs are not
  /// touched: they come back with the optimizer's own state dict.
  virtual void load_state_dict(const json& state);

  /// The type and its state, e.g. "StepLR(last_epoch=3, gamma=0.5, step_size=7,
  /// last_lr=[0.1, 0.02])" (keys sorted; base_lrs and _step_count left out).
  std::string to_string() const;

 protected:
  /// Attaches to `optimizer`. last_epoch == -1: each group's initial_lr is set to its lr
  /// unless already set; otherwise (resuming) every group must have an initial_lr.
  LRScheduler(Optimizer& optimizer, int64_t last_epoch);
  /// For containers that do not attach (SequentialLR, ChainedScheduler).
  struct NoAttach {};
  LRScheduler(Optimizer& optimizer, NoAttach);

  /// The step every constructor ends with (PyTorch's _initial_step).
  void initial_step();
  /// PyTorch's chainable get_lr(): the lrs for last_epoch_, from the groups' current lrs.
  virtual std::vector<double> get_lr() = 0;
  /// PyTorch's _get_closed_form_lr(); nullopt where there is none (get_lr is used then).
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }
  /// Subclass settings and counters for state_dict / load_state_dict.
  virtual void save_extra(json& state) const { (void)state; }
  virtual void load_extra(const json& state) { (void)state; }
  /// Writes `lrs` into the groups and records them as the last lrs.
  void apply(const std::vector<double>& lrs);
  /// The groups' current lrs.
  std::vector<double> group_lrs() const;

  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  /// Expires with the scheduler: a captured step that replays step() refuses after that.
  std::shared_ptr<const void> alive_ = std::make_shared<int>(0);

  friend class SequentialLR;
  friend class ChainedScheduler;

 private:
  Optimizer* optimizer_;
  std::weak_ptr<const void> optimizer_alive_;  // the optimizer's alive_token()
};

/// lr × gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);
  std::string type_name() const override { return "StepLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = StepLR;
    return std::tuple{field("step_size", &S::step_size_, above(0)),
                      field("gamma", &S::gamma_, at_least(0).finite())};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr × gamma at each milestone epoch (a milestone listed twice applies gamma twice).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1,
              int64_t last_epoch = -1);
  std::string type_name() const override { return "MultiStepLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = MultiStepLR;
    return std::tuple{field("gamma", &S::gamma_, at_least(0).finite())};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

/// lr × gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch = -1);
  std::string type_name() const override { return "ExponentialLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = ExponentialLR;
    return std::tuple{field("gamma", &S::gamma_, at_least(0).finite())};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  double gamma_;
};

/// Cosine from the initial lr down to eta_min over T_max epochs (and back up after, as
/// PyTorch): lr_t = eta_min + (base - eta_min)(1 + cos(π t / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0,
                    int64_t last_epoch = -1);
  std::string type_name() const override { return "CosineAnnealingLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = CosineAnnealingLR;
    return std::tuple{field("T_max", &S::t_max_, above(0)),
                      field("eta_min", &S::eta_min_, at_least(0).finite())};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// CosineAnnealingLR that holds its floor (ggmlR's cosine schedule): the same cosine from
/// the initial lr down to eta_min over T_max epochs, then eta_min for good, where PyTorch's
/// rises again. lr_t = eta_min + (base - eta_min)(1 + cos(π min(t, T_max) / T_max)) / 2.
///   optim::CosineDecayLR sched(opt, /*T_max=*/90, /*eta_min=*/1e-5);  // then flat
class CosineDecayLR : public LRScheduler {
 public:
  CosineDecayLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0, int64_t last_epoch = -1);
  std::string type_name() const override { return "CosineDecayLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = CosineDecayLR;
    return std::tuple{field("T_max", &S::t_max_, above(0)),
                      field("eta_min", &S::eta_min_, at_least(0).finite())};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// SGDR: cosine from the initial lr to eta_min over T_i epochs, then restart with
/// T_i × T_mult (T_0 for the first cycle). step_to(epoch) takes fractional epochs.
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult = 1,
                              double eta_min = 0.0, int64_t last_epoch = -1);
  void step() override;
  void step_to(double epoch) override;
  std::string type_name() const override { return "CosineAnnealingWarmRestarts"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = CosineAnnealingWarmRestarts;
    return std::tuple{field("T_0", &S::t_0_, above(0)), field("T_i", &S::t_i_, above(0)),
                      field("T_mult", &S::t_mult_, at_least(1)),
                      field("eta_min", &S::eta_min_, at_least(0).finite()),
                      field("T_cur", &S::t_cur_)};
  }

 protected:
  std::vector<double> get_lr() override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  void write_lrs();
  int64_t t_0_, t_i_, t_mult_;
  double eta_min_;
  double t_cur_;
};

/// Linear warm-up (or decay): the lr factor goes from start_factor to end_factor over
/// total_iters epochs, then stays. Example: LinearLR(opt, 0.1, 1.0, 500) warms up over 500.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, int64_t last_epoch = -1);
  std::string type_name() const override { return "LinearLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = LinearLR;
    return std::tuple{
        field("start_factor", &S::start_factor_, Check{.lo = 0, .hi = 1, .lo_open = true}),
        field("end_factor", &S::end_factor_, closed(0, 1)),
        field("total_iters", &S::total_iters_, above(0))};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// The lr times `factor` for the first total_iters epochs, then the lr itself.
/// Example: ConstantLR(opt, 0.5, 4): lrs 0.05 for epochs 0-3, then 0.1 (base lr 0.1).
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, int64_t total_iters = 5,
             int64_t last_epoch = -1);
  std::string type_name() const override { return "ConstantLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = ConstantLR;
    return std::tuple{field("factor", &S::factor_, closed(0, 1)),
                      field("total_iters", &S::total_iters_, at_least(0))};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  double factor_;
  int64_t total_iters_;
};

/// Polynomial decay to 0 over total_iters epochs: lr_t = base (1 - min(t, T)/T)^power.
class PolynomialLR : public LRScheduler {
 public:
  PolynomialLR(Optimizer& optimizer, int64_t total_iters = 5, double power = 1.0,
               int64_t last_epoch = -1);
  std::string type_name() const override { return "PolynomialLR"; }

  /// The settings its state dict holds, each with its check (made and loaded alike).
  static constexpr auto settings() {
    using S = PolynomialLR;
    return std::tuple{field("total_iters", &S::total_iters_, above(0)),
                      field("power", &S::power_, at_least(0).finite())};
  }

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  int64_t total_iters_;
  double power_;
};

/// lr_t = initial lr × lambda(t), one function for every group or one per group.
///   optim::LambdaLR sched(opt, [](int64_t epoch) { return std::pow(0.95, epoch); });
/// The state dict holds the counters and "lr_lambdas": [null, ...] (as PyTorch, which saves
/// a function only when it is a callable object): the functions come from the code.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t epoch)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch = -1);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas, int64_t last_epoch = -1);
  std::string type_name() const override { return "LambdaLR"; }

 protected:
  std::vector<double> get_lr() override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  std::vector<Lambda> lambdas_;
};

/// lr_t = lr_{t-1} × lambda(t) for t > 0 (torch.optim.lr_scheduler.MultiplicativeLR): the
/// factors multiply, one function for every group or one per group.
///   optim::MultiplicativeLR sched(opt, [](int64_t) { return 0.95; });   // × 0.95 per epoch
/// The state dict holds "lr_lambdas": [null, ...], as LambdaLR's.
class MultiplicativeLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t epoch)>;
  MultiplicativeLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch = -1);
  MultiplicativeLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas, int64_t last_epoch = -1);
  std::string type_name() const override { return "MultiplicativeLR"; }

 protected:
  std::vector<double> get_lr() override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  std::vector<Lambda> lambdas_;
};

enum class AnnealStrategy : uint8_t { cos, linear };

/// Options of OneCycleLR (PyTorch's defaults). Per-group lists take one value for all
/// groups or one per group.
struct OneCycleLROptions {
  std::vector<double> max_lr = {};  // required: the peak lr
  int64_t total_steps = 0;          // or epochs × steps_per_epoch when 0
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  double pct_start = 0.3;  // fraction of the steps spent rising
  AnnealStrategy anneal_strategy = AnnealStrategy::cos;
  bool cycle_momentum = true;  // momentum (or beta1 for Adam-like optimizers) runs inversely
  std::vector<double> base_momentum = {0.85};
  std::vector<double> max_momentum = {0.95};
  double div_factor = 25.0;       // initial lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min lr = initial lr / final_div_factor
  bool three_phase = false;       // rise, fall back to the initial lr, then anneal to min
};

/// The 1cycle policy (Smith & Topin), stepped once per batch: the lr rises from
/// max_lr/div_factor to max_lr over pct_start of total_steps, then anneals to
/// initial/final_div_factor (cos or linear); with cycle_momentum the momentum (or beta1)
/// moves the other way between max_momentum and base_momentum. Stepping past total_steps
/// throws. Example:
///   optim::OneCycleLR sched(opt, {.max_lr = {0.1}, .total_steps = epochs * batches});
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, OneCycleLROptions options, int64_t last_epoch = -1);
  std::string type_name() const override { return "OneCycleLR"; }
  bool per_batch() const override { return true; }
  int64_t total_steps() const { return total_steps_; }

 protected:
  std::vector<double> get_lr() override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr, start_momentum, end_momentum;  // 0 initial, 1 max, 2 min / base
  };
  OneCycleLROptions options_;
  int64_t total_steps_ = 0;
  std::vector<Phase> phases_;
  bool use_beta1_ = false;
  std::vector<double> max_lrs_, min_lrs_, max_momentums_, base_momentums_;
};

enum class CyclicMode : uint8_t { triangular, triangular2, exp_range };
enum class ScaleMode : uint8_t { cycle, iterations };

/// Options of CyclicLR (PyTorch's defaults).
struct CyclicLROptions {
  std::vector<double> base_lr = {};  // required: the lower bound (one or per group)
  std::vector<double> max_lr = {};   // required: the upper bound
  int64_t step_size_up = 2000;       // steps rising
  std::optional<int64_t> step_size_down = std::nullopt;  // steps falling (default: up)
  CyclicMode mode = CyclicMode::triangular;  // amplitude: constant, halved per cycle, γ^t
  double gamma = 1.0;                        // exp_range's base
  /// A custom amplitude scale (overrides mode), of the cycle number or of the step
  /// (scale_mode).
  std::function<double(double)> scale_fn = nullptr;
  ScaleMode scale_mode = ScaleMode::cycle;
  bool cycle_momentum = true;  // momentum (or beta1) between max and base, inversely
  std::vector<double> base_momentum = {0.8};
  std::vector<double> max_momentum = {0.9};
};

/// Cyclical learning rates (Smith 2017), stepped once per batch: the lr goes from base_lr
/// to max_lr over step_size_up steps and back over step_size_down, the amplitude scaled by
/// the mode. Example:
///   optim::CyclicLR sched(opt, {.base_lr = {1e-3}, .max_lr = {1e-2}, .step_size_up = 500});
class CyclicLR : public LRScheduler {
 public:
  CyclicLR(Optimizer& optimizer, CyclicLROptions options, int64_t last_epoch = -1);
  std::string type_name() const override { return "CyclicLR"; }
  bool per_batch() const override { return true; }

 protected:
  std::vector<double> get_lr() override;
  void save_extra(json& state) const override;
  void load_extra(const json& state) override;

 private:
  double scale(double x) const;
  CyclicLROptions options_;
  double total_size_ = 0.0, step_ratio_ = 0.0;
  ScaleMode scale_mode_ = ScaleMode::cycle;
  bool use_beta1_ = false;
  std::vector<double> max_lrs_, base_momentums_, max_momentums_;
};

/// Runs schedulers one after another: schedulers[i] drives epochs from milestones[i-1] on
/// (it restarts at epoch 0 when its turn comes). milestones.size() == schedulers.size() - 1.
/// Example: warm-up then cosine:
///   auto warm = std::make_shared<optim::LinearLR>(opt, 0.01, 1.0, 5);
///   auto cos = std::make_shared<optim::CosineAnnealingLR>(opt, 95);
///   optim::SequentialLR sched(opt, {warm, cos}, {5});
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, int64_t last_epoch = -1);
  void step() override;
  void step_to(double epoch) override;
  std::string type_name() const override { return "SequentialLR"; }
  bool per_batch() const override {  // when one of its schedulers is
    for (const auto& s : schedulers_)
      if (s->per_batch()) return true;
    return false;
  }
  json state_dict() const override;
  void load_state_dict(const json& state) override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 protected:
  std::vector<double> get_lr() override { return group_lrs(); }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

/// Steps every scheduler each epoch, in order (their factors multiply).
class ChainedScheduler : public LRScheduler {
 public:
  explicit ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers);
  void step() override;
  void step_to(double epoch) override;
  std::string type_name() const override { return "ChainedScheduler"; }
  bool per_batch() const override {  // when one of its schedulers is
    for (const auto& s : schedulers_)
      if (s->per_batch()) return true;
    return false;
  }
  json state_dict() const override;
  void load_state_dict(const json& state) override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 protected:
  std::vector<double> get_lr() override { return group_lrs(); }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
};

enum class PlateauMode : uint8_t { min, max };
enum class ThresholdMode : uint8_t { rel, abs };

/// Options of ReduceLROnPlateau (PyTorch's defaults).
struct ReduceLROnPlateauOptions {
  PlateauMode mode = PlateauMode::min;  // min: lower metric is better
  double factor = 0.1;                  // new lr = lr · factor (must be < 1)
  int64_t patience = 10;                // bad epochs tolerated before reducing
  double threshold = 1e-4;              // improvement needed to count as better
  ThresholdMode threshold_mode = ThresholdMode::rel;
  int64_t cooldown = 0;                // epochs to wait after a reduction
  std::vector<double> min_lr = {0.0};  // one for all groups, or one per group
  double eps = 1e-8;                   // reductions smaller than this are skipped
};

/// Reduces the lr by `factor` when a metric has not improved for `patience` epochs.
/// Example: sched.step(val_loss);
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;

  /// Records this epoch's metric and reduces the lrs when it is due.
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  const ReduceLROnPlateauOptions& options() const { return options_; }
  /// The optimizer it drives; throws ember::Error when that was destroyed.
  Optimizer& optimizer() const;
  std::string type_name() const { return "ReduceLROnPlateau"; }

  json state_dict() const;
  void load_state_dict(const json& state);
  /// "ReduceLROnPlateau(mode=min, factor=0.1, patience=10, ..., best=inf)".
  std::string to_string() const;

 private:
  bool is_better(double a, double best) const;
  Optimizer* optimizer_;
  std::weak_ptr<const void> optimizer_alive_;  // the optimizer's alive_token()
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lr_;
};

/// Print to_string().
std::ostream& operator<<(std::ostream& os, const LRScheduler& scheduler);
std::ostream& operator<<(std::ostream& os, const ReduceLROnPlateau& scheduler);

}  // namespace ember::optim
