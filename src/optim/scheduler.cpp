// src/optim/scheduler.cpp — learning-rate schedulers, transcribed from PyTorch 1.13's
// torch/optim/lr_scheduler.py: the same branches and the same floating-point expressions in
// the same order, so the lr sequences agree to the last bit (tests/test_optim.cpp checks
// 30 steps of each against torch).
#include "ember/optim/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>

#include "core/capture.hpp"
#include "optim/scheduler_json.hpp"

namespace ember::optim {

using detail::check_settings;
using detail::check_type;
using detail::kPi;
using detail::load_settings;
using detail::number_json;
using detail::numbers_json;
using detail::read;
using detail::save_settings;

namespace {

// Python's a ** b for a float and an integer (float.__pow__ -> C pow).
double pow_int(double a, int64_t b) { return std::pow(a, static_cast<double>(b)); }

// Python's a // b for integers (floor division).
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

// ---- LRScheduler ----

// Note [A scheduler outliving its optimizer]
// A scheduler refers to its optimizer and, weakly, to the optimizer's alive token
// (Optimizer::alive_token()), and reaches the optimizer only through optimizer(), which
// throws naming the scheduler once the token expired: stepping a scheduler whose optimizer
// was destroyed is a clean ember::Error, not a call into freed memory. Each step checks
// before it changes a counter, so a refused step changes nothing. (The optimizer does not
// know its schedulers: detaching them when it dies would need a registry of both kinds.)

LRScheduler::LRScheduler(Optimizer& optimizer, int64_t last_epoch)
    : optimizer_(&optimizer), optimizer_alive_(optimizer.alive_token()) {
  const size_t groups = optimizer.param_group_count();
  for (size_t g = 0; g < groups; ++g) {
    if (last_epoch == -1) {
      if (!optimizer.initial_lr(g)) optimizer.set_initial_lr(g, optimizer.lr(g));
    } else {
      EMBER_CHECK(optimizer.initial_lr(g).has_value(), "LRScheduler: param_groups[", g,
                  "] has no initial_lr (got last_epoch ", last_epoch,
                  "; resuming needs the optimizer state that a scheduler already ran on, "
                  "or last_epoch = -1)");
    }
    base_lrs_.push_back(*optimizer.initial_lr(g));
  }
  last_epoch_ = last_epoch;
}

LRScheduler::LRScheduler(Optimizer& optimizer, NoAttach)
    : optimizer_(&optimizer), optimizer_alive_(optimizer.alive_token()) {}

Optimizer& LRScheduler::optimizer() const {
  EMBER_CHECK(!optimizer_alive_.expired(), type_name(),
              ": its optimizer was destroyed (expected the optimizer to outlive the scheduler)");
  return *optimizer_;
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  optimizer();  // Note [A scheduler outliving its optimizer]: refuse before counting
  const ember::detail::ReplayedHostStep replayed("LR scheduler", alive_, [this] { step(); });
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step_to(double epoch) {
  optimizer();
  const ember::detail::ReplayedHostStep replayed("LR scheduler", alive_,
                                                 [this, epoch] { step_to(epoch); });
  EMBER_CHECK(epoch == std::floor(epoch), type_name(), ".step_to: epoch must be whole (got ", epoch,
              ")");
  ++step_count_;
  last_epoch_ = static_cast<int64_t>(epoch);
  std::optional<std::vector<double>> closed = closed_form_lr();
  apply(closed ? *closed : get_lr());
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  Optimizer& opt = optimizer();
  for (size_t g = 0; g < lrs.size() && g < opt.param_group_count(); ++g) opt.set_lr(g, lrs[g]);
  last_lr_ = group_lrs();
}

std::vector<double> LRScheduler::group_lrs() const { return optimizer().lrs(); }

json LRScheduler::state_dict() const {
  json s = {{"type", type_name()},
            {"last_epoch", last_epoch_},
            {"_step_count", step_count_},
            {"base_lrs", numbers_json(base_lrs_)},
            {"_last_lr", numbers_json(last_lr_)}};
  save_extra(s);
  return s;
}

void LRScheduler::load_state_dict(const json& state) {
  const std::string who = type_name();
  check_type(state, who);
  // Parse into copies first so a bad state changes nothing.
  int64_t last_epoch = last_epoch_, step_count = step_count_;
  std::vector<double> base_lrs = base_lrs_, last_lr = last_lr_;
  read(state, "last_epoch", &last_epoch, who);
  read(state, "_step_count", &step_count, who);
  read(state, "base_lrs", &base_lrs, who);
  read(state, "_last_lr", &last_lr, who);
  EMBER_CHECK(base_lrs.size() == base_lrs_.size(), who, ".load_state_dict: base_lrs has ",
              base_lrs.size(), " entries (expected one per parameter group: ", base_lrs_.size(),
              ")");
  load_extra(state);
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base_lrs);
  last_lr_ = std::move(last_lr);
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch), step_size_(step_size), gamma_(gamma) {
  check_settings(*this);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * pow_int(gamma_, floor_div(last_epoch_, step_size_)));
  return lrs;
}

void StepLR::save_extra(json& s) const { save_settings(s, *this); }

void StepLR::load_extra(const json& s) { load_settings(s, *this); }

// ---- MultiStepLR ----

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma,
                         int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch), milestones_(std::move(milestones)), gamma_(gamma) {
  check_settings(*this);
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (hits == 0) return lrs;
  for (double& lr : lrs) lr = lr * pow_int(gamma_, hits);
  return lrs;
}

std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  const int64_t passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * pow_int(gamma_, passed));
  return lrs;
}

void MultiStepLR::save_extra(json& s) const {
  s["milestones"] = milestones_;
  save_settings(s, *this);
}

void MultiStepLR::load_extra(const json& s) {
  if (s.contains("milestones")) {
    EMBER_CHECK(s["milestones"].is_array(),
                "MultiStepLR.load_state_dict: 'milestones' is not a list");
    std::vector<int64_t> m = s["milestones"].get<std::vector<int64_t>>();
    std::sort(m.begin(), m.end());
    milestones_ = std::move(m);
  }
  load_settings(s, *this);
}

// ---- ExponentialLR ----

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch), gamma_(gamma) {
  check_settings(*this);
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::optional<std::vector<double>> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * pow_int(gamma_, last_epoch_));
  return lrs;
}

void ExponentialLR::save_extra(json& s) const { save_settings(s, *this); }
void ExponentialLR::load_extra(const json& s) { load_settings(s, *this); }

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min,
                                     int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch), t_max_(T_max), eta_min_(eta_min) {
  check_settings(*this);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const double t_max = static_cast<double>(t_max_);
  const double epoch = static_cast<double>(last_epoch_);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {
    for (size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = eta_min_ + (base_lrs_[g] - eta_min_) * (1 + std::cos(epoch * kPi / t_max)) / 2;
    return lrs;
  }
  if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0) {
    for (size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(kPi / t_max)) / 2;
    return lrs;
  }
  const double ratio =
      (1 + std::cos(kPi * epoch / t_max)) / (1 + std::cos(kPi * (epoch - 1) / t_max));
  for (double& lr : lrs) lr = ratio * (lr - eta_min_) + eta_min_;
  return lrs;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(eta_min_ + (base - eta_min_) *
                                 (1 + std::cos(kPi * static_cast<double>(last_epoch_) /
                                               static_cast<double>(t_max_))) /
                                 2);
  return lrs;
}

void CosineAnnealingLR::save_extra(json& s) const { save_settings(s, *this); }

void CosineAnnealingLR::load_extra(const json& s) { load_settings(s, *this); }

// ---- CosineAnnealingWarmRestarts ----

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0,
                                                         int64_t T_mult, double eta_min,
                                                         int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch),
      t_0_(T_0),
      t_i_(T_0),
      t_mult_(T_mult),
      eta_min_(eta_min),
      t_cur_(static_cast<double>(last_epoch)) {
  check_settings(*this);
  initial_step();
}

std::vector<double> CosineAnnealingWarmRestarts::get_lr() {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(eta_min_ +
                  (base - eta_min_) * (1 + std::cos(kPi * t_cur_ / static_cast<double>(t_i_))) / 2);
  return lrs;
}

void CosineAnnealingWarmRestarts::write_lrs() { apply(get_lr()); }

void CosineAnnealingWarmRestarts::step() {
  optimizer();
  const ember::detail::ReplayedHostStep replayed("LR scheduler", alive_, [this] { step(); });
  if (last_epoch_ < 0) {
    step_to(0.0);
    return;
  }
  t_cur_ = t_cur_ + 1;
  if (t_cur_ >= static_cast<double>(t_i_)) {
    t_cur_ = t_cur_ - static_cast<double>(t_i_);
    t_i_ = t_i_ * t_mult_;
  }
  last_epoch_ = last_epoch_ + 1;
  write_lrs();
}

void CosineAnnealingWarmRestarts::step_to(double epoch) {
  optimizer();
  const ember::detail::ReplayedHostStep replayed("LR scheduler", alive_,
                                                 [this, epoch] { step_to(epoch); });
  EMBER_CHECK(epoch >= 0, "CosineAnnealingWarmRestarts.step_to: invalid epoch ", epoch,
              " (expected epoch >= 0)");
  const double t0 = static_cast<double>(t_0_);
  if (epoch >= t0) {
    if (t_mult_ == 1) {
      t_cur_ = std::fmod(epoch, t0);
    } else {
      const double mult = static_cast<double>(t_mult_);
      const auto n = static_cast<int64_t>(std::log(epoch / t0 * (mult - 1) + 1) / std::log(mult));
      int64_t power = 1;
      for (int64_t k = 0; k < n; ++k) power *= t_mult_;
      t_cur_ = epoch - static_cast<double>(t_0_ * (power - 1)) / static_cast<double>(t_mult_ - 1);
      t_i_ = t_0_ * power;
    }
  } else {
    t_i_ = t_0_;
    t_cur_ = epoch;
  }
  last_epoch_ = static_cast<int64_t>(std::floor(epoch));
  write_lrs();
}

void CosineAnnealingWarmRestarts::save_extra(json& s) const { save_settings(s, *this); }

void CosineAnnealingWarmRestarts::load_extra(const json& s) { load_settings(s, *this); }

// ---- LinearLR ----

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  check_settings(*this);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double factor =
      1. + (end_factor_ - start_factor_) /
               (static_cast<double>(total_iters_) * start_factor_ +
                static_cast<double>(last_epoch_ - 1) * (end_factor_ - start_factor_));
  for (double& lr : lrs) lr = lr * factor;
  return lrs;
}

std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  const double done = static_cast<double>(std::min(total_iters_, last_epoch_));
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * (start_factor_ + (end_factor_ - start_factor_) * done /
                                              static_cast<double>(total_iters_)));
  return lrs;
}

void LinearLR::save_extra(json& s) const { save_settings(s, *this); }

void LinearLR::load_extra(const json& s) { load_settings(s, *this); }

// ---- SequentialLR ----

SequentialLR::SequentialLR(Optimizer& optimizer,
                           std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, int64_t last_epoch)
    : LRScheduler(optimizer, NoAttach{}),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  EMBER_CHECK(!schedulers_.empty(), "SequentialLR: no schedulers given (expected at least one)");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    EMBER_CHECK(schedulers_[i] != nullptr, "SequentialLR: scheduler ", i, " is null");
    EMBER_CHECK(&schedulers_[i]->optimizer() == &optimizer, "SequentialLR: scheduler ", i,
                " belongs to another optimizer (expected all to share the one passed in)");
  }
  EMBER_CHECK(milestones_.size() + 1 == schedulers_.size(), "SequentialLR: got ",
              schedulers_.size(), " schedulers and ", milestones_.size(),
              " milestones (expected one milestone fewer than schedulers)");
  last_epoch_ = last_epoch + 1;
  // Back to the initial lrs, undo the step each scheduler took when made, then make the
  // first scheduler's initial step alone (as PyTorch).
  for (size_t g = 0; g < optimizer.param_group_count(); ++g) {
    EMBER_CHECK(optimizer.initial_lr(g).has_value(), "SequentialLR: param_groups[", g,
                "] has no initial_lr (expected the schedulers to have set it)");
    optimizer.set_lr(g, *optimizer.initial_lr(g));
  }
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  optimizer();
  const ember::detail::ReplayedHostStep replayed("LR scheduler", alive_, [this] { step(); });
  ++last_epoch_;
  const size_t idx = static_cast<size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_)
    s.step_to(0.0);
  else
    s.step();
  last_lr_ = s.get_last_lr();
}

void SequentialLR::step_to(double epoch) {
  const ember::detail::ReplayedHostStep replayed("LR scheduler", alive_,
                                                 [this, epoch] { step_to(epoch); });
  EMBER_CHECK(false, "SequentialLR.step_to: not supported (got epoch ", epoch,
              "; call step() once per epoch)");
}

json SequentialLR::state_dict() const {
  json children = json::array();
  for (const auto& s : schedulers_) children.push_back(s->state_dict());
  return {{"type", type_name()},
          {"last_epoch", last_epoch_},
          {"_milestones", milestones_},
          {"_last_lr", numbers_json(last_lr_)},
          {"_schedulers", children}};
}

void SequentialLR::load_state_dict(const json& state) {
  check_type(state, type_name());
  if (state.contains("_schedulers")) {
    const json& children = state["_schedulers"];
    EMBER_CHECK(children.is_array() && children.size() == schedulers_.size(),
                "SequentialLR.load_state_dict: '_schedulers' must list ", schedulers_.size(),
                " states (got ", children.is_array() ? children.size() : 0, ")");
    for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(children[i]);
  }
  read(state, "last_epoch", &last_epoch_, type_name());
  read(state, "_last_lr", &last_lr_, type_name());
  if (state.contains("_milestones")) milestones_ = state["_milestones"].get<std::vector<int64_t>>();
}

// ---- ChainedScheduler ----

namespace {
Optimizer& first_optimizer(const std::vector<std::shared_ptr<LRScheduler>>& schedulers) {
  EMBER_CHECK(!schedulers.empty() && schedulers[0] != nullptr,
              "ChainedScheduler: no schedulers given (expected at least one)");
  return schedulers[0]->optimizer();
}
}  // namespace

ChainedScheduler::ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers)
    : LRScheduler(first_optimizer(schedulers), NoAttach{}), schedulers_(std::move(schedulers)) {
  for (size_t i = 1; i < schedulers_.size(); ++i) {
    EMBER_CHECK(schedulers_[i] != nullptr, "ChainedScheduler: scheduler ", i, " is null");
    EMBER_CHECK(&schedulers_[i]->optimizer() == &optimizer(), "ChainedScheduler: schedulers 0 and ",
                i, " belong to different optimizers (expected one optimizer)");
  }
  last_lr_ = group_lrs();
}

void ChainedScheduler::step() {
  optimizer();
  const ember::detail::ReplayedHostStep replayed("LR scheduler", alive_, [this] { step(); });
  for (auto& s : schedulers_) s->step();
  last_lr_ = group_lrs();
}

void ChainedScheduler::step_to(double epoch) {
  EMBER_CHECK(false, "ChainedScheduler.step_to: not supported (got epoch ", epoch,
              "; call step() once per epoch)");
}

json ChainedScheduler::state_dict() const {
  json children = json::array();
  for (const auto& s : schedulers_) children.push_back(s->state_dict());
  return {{"type", type_name()}, {"_last_lr", numbers_json(last_lr_)}, {"_schedulers", children}};
}

void ChainedScheduler::load_state_dict(const json& state) {
  check_type(state, type_name());
  if (state.contains("_schedulers")) {
    const json& children = state["_schedulers"];
    EMBER_CHECK(children.is_array() && children.size() == schedulers_.size(),
                "ChainedScheduler.load_state_dict: '_schedulers' must list ", schedulers_.size(),
                " states (got ", children.is_array() ? children.size() : 0, ")");
    for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(children[i]);
  }
  read(state, "_last_lr", &last_lr_, type_name());
}

// ---- ReduceLROnPlateau ----

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(&optimizer),
      optimizer_alive_(optimizer.alive_token()),
      options_(std::move(options)) {
  const ReduceLROnPlateauOptions& o = options_;
  EMBER_CHECK(o.factor < 1.0 && o.factor >= 0.0, "ReduceLROnPlateau: invalid factor ", o.factor,
              " (expected 0 <= factor < 1)");
  EMBER_CHECK(o.patience >= 0, "ReduceLROnPlateau: invalid patience ", o.patience,
              " (expected patience >= 0)");
  EMBER_CHECK(o.cooldown >= 0, "ReduceLROnPlateau: invalid cooldown ", o.cooldown,
              " (expected cooldown >= 0)");
  EMBER_CHECK(o.threshold >= 0.0, "ReduceLROnPlateau: invalid threshold ", o.threshold,
              " (expected threshold >= 0)");
  const size_t groups = optimizer.param_group_count();
  if (o.min_lr.size() == 1) {
    min_lrs_.assign(groups, o.min_lr[0]);
  } else {
    EMBER_CHECK(o.min_lr.size() == groups, "ReduceLROnPlateau: expected ", groups, " min_lrs (got ",
                o.min_lr.size(), ")");
    min_lrs_ = o.min_lr;
  }
  best_ = o.mode == PlateauMode::min ? std::numeric_limits<double>::infinity()
                                     : -std::numeric_limits<double>::infinity();
  last_lr_ = optimizer.lrs();
}

Optimizer& ReduceLROnPlateau::optimizer() const {  // Note [A scheduler outliving its optimizer]
  EMBER_CHECK(!optimizer_alive_.expired(), type_name(),
              ": its optimizer was destroyed (expected the optimizer to outlive the scheduler)");
  return *optimizer_;
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  const ReduceLROnPlateauOptions& o = options_;
  if (o.mode == PlateauMode::min && o.threshold_mode == ThresholdMode::rel)
    return a < best * (1. - o.threshold);
  if (o.mode == PlateauMode::min) return a < best - o.threshold;
  if (o.threshold_mode == ThresholdMode::rel) return a > best * (o.threshold + 1.);
  return a > best + o.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  Optimizer& opt = optimizer();  // refuse before counting
  last_epoch_ += 1;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (in_cooldown()) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  if (num_bad_epochs_ > options_.patience) {
    for (size_t g = 0; g < opt.param_group_count(); ++g) {
      const double old_lr = opt.lr(g);
      const double new_lr = std::max(old_lr * options_.factor, min_lrs_[g]);
      if (old_lr - new_lr > options_.eps) opt.set_lr(g, new_lr);
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_ = opt.lrs();
}

json ReduceLROnPlateau::state_dict() const {
  const ReduceLROnPlateauOptions& o = options_;
  return {{"type", type_name()},
          {"mode", o.mode == PlateauMode::min ? "min" : "max"},
          {"factor", o.factor},
          {"patience", o.patience},
          {"threshold", o.threshold},
          {"threshold_mode", o.threshold_mode == ThresholdMode::rel ? "rel" : "abs"},
          {"cooldown", o.cooldown},
          {"cooldown_counter", cooldown_counter_},
          {"min_lrs", numbers_json(min_lrs_)},
          {"eps", o.eps},
          {"best", number_json(best_)},
          {"mode_worse",
           number_json(o.mode == PlateauMode::min ? std::numeric_limits<double>::infinity()
                                                  : -std::numeric_limits<double>::infinity())},
          {"num_bad_epochs", num_bad_epochs_},
          {"last_epoch", last_epoch_},
          {"_last_lr", numbers_json(last_lr_)}};
}

void ReduceLROnPlateau::load_state_dict(const json& state) {
  const std::string who = type_name();
  check_type(state, who);
  ReduceLROnPlateauOptions o = options_;
  if (state.contains("mode")) {
    const json& m = state["mode"];
    EMBER_CHECK(m == "min" || m == "max", who, ".load_state_dict: unknown mode ", m.dump(),
                " (expected \"min\" or \"max\")");
    o.mode = m == "min" ? PlateauMode::min : PlateauMode::max;
  }
  if (state.contains("threshold_mode")) {
    const json& m = state["threshold_mode"];
    EMBER_CHECK(m == "rel" || m == "abs", who, ".load_state_dict: unknown threshold_mode ",
                m.dump(), " (expected \"rel\" or \"abs\")");
    o.threshold_mode = m == "rel" ? ThresholdMode::rel : ThresholdMode::abs;
  }
  read(state, "factor", &o.factor, who);
  read(state, "patience", &o.patience, who);
  read(state, "threshold", &o.threshold, who);
  read(state, "cooldown", &o.cooldown, who);
  read(state, "eps", &o.eps, who);
  std::vector<double> min_lrs = min_lrs_;
  read(state, "min_lrs", &min_lrs, who);
  EMBER_CHECK(min_lrs.size() == min_lrs_.size(), who, ".load_state_dict: min_lrs has ",
              min_lrs.size(), " entries (expected one per parameter group: ", min_lrs_.size(), ")");
  double best = best_;
  int64_t cooldown_counter = cooldown_counter_, bad = num_bad_epochs_, last_epoch = last_epoch_;
  std::vector<double> last_lr = last_lr_;
  read(state, "best", &best, who);
  read(state, "cooldown_counter", &cooldown_counter, who);
  read(state, "num_bad_epochs", &bad, who);
  read(state, "last_epoch", &last_epoch, who);
  read(state, "_last_lr", &last_lr, who);
  options_ = o;
  options_.min_lr = min_lrs;
  min_lrs_ = std::move(min_lrs);
  best_ = best;
  cooldown_counter_ = cooldown_counter;
  num_bad_epochs_ = bad;
  last_epoch_ = last_epoch;
  last_lr_ = std::move(last_lr);
}

// ---- printing ----

namespace {

// "key=value, ..." of a state dict, keys sorted, minus `skip`.
std::string state_text(const json& state, const std::vector<std::string>& skip) {
  std::map<std::string, json> sorted;
  for (const auto& [key, value] : state.items())
    if (std::find(skip.begin(), skip.end(), key) == skip.end())
      sorted[key == "_last_lr" ? "last_lr" : key] = value;
  std::string out;
  for (const auto& [key, value] : sorted)
    out += (out.empty() ? "" : ", ") + key + "=" +
           (value.is_string() ? value.get<std::string>() : value.dump());
  return out;
}

}  // namespace

std::string LRScheduler::to_string() const {
  json s = state_dict();
  if (s.contains("_schedulers")) {  // containers print their children
    std::string children;
    for (const json& c : s["_schedulers"])
      children += (children.empty() ? "" : ", ") + c.value("type", std::string("?"));
    s["_schedulers"] = "[" + children + "]";
  }
  return type_name() + "(" + state_text(s, {"type", "base_lrs", "_step_count"}) + ")";
}

std::string ReduceLROnPlateau::to_string() const {
  return type_name() + "(" + state_text(state_dict(), {"type"}) + ")";
}

std::ostream& operator<<(std::ostream& os, const LRScheduler& s) { return os << s.to_string(); }
std::ostream& operator<<(std::ostream& os, const ReduceLROnPlateau& s) {
  return os << s.to_string();
}

// ---- CosineDecayLR ----

CosineDecayLR::CosineDecayLR(Optimizer& optimizer, int64_t T_max, double eta_min,
                             int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch), t_max_(T_max), eta_min_(eta_min) {
  check_settings(*this);
  initial_step();
}

// Closed form only: the floor must hold exactly, whatever the groups' lrs drifted to.
std::vector<double> CosineDecayLR::get_lr() { return *closed_form_lr(); }

std::optional<std::vector<double>> CosineDecayLR::closed_form_lr() const {
  const double t = static_cast<double>(std::min(std::max<int64_t>(last_epoch_, 0), t_max_));
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(eta_min_ +
                  (base - eta_min_) * (1 + std::cos(kPi * t / static_cast<double>(t_max_))) / 2);
  return lrs;
}

void CosineDecayLR::save_extra(json& s) const { save_settings(s, *this); }

void CosineDecayLR::load_extra(const json& s) { load_settings(s, *this); }

// ---- ConstantLR ----

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, int64_t total_iters, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch), factor_(factor), total_iters_(total_iters) {
  check_settings(*this);
  initial_step();
}

std::vector<double> ConstantLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * factor_;
    return lrs;
  }
  if (last_epoch_ != total_iters_) return lrs;
  for (double& lr : lrs) lr = lr * (1.0 / factor_);
  return lrs;
}

std::optional<std::vector<double>> ConstantLR::closed_form_lr() const {
  std::vector<double> lrs;
  const double past = last_epoch_ >= total_iters_ ? 1.0 : 0.0;
  for (double base : base_lrs_) lrs.push_back(base * (factor_ + past * (1 - factor_)));
  return lrs;
}

void ConstantLR::save_extra(json& s) const { save_settings(s, *this); }

void ConstantLR::load_extra(const json& s) { load_settings(s, *this); }

// ---- PolynomialLR ----

PolynomialLR::PolynomialLR(Optimizer& optimizer, int64_t total_iters, double power,
                           int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch), total_iters_(total_iters), power_(power) {
  check_settings(*this);
  initial_step();
}

std::vector<double> PolynomialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ > total_iters_) return lrs;
  const double t = static_cast<double>(last_epoch_), total = static_cast<double>(total_iters_);
  const double factor = std::pow((1.0 - t / total) / (1.0 - (t - 1) / total), power_);
  for (double& lr : lrs) lr = lr * factor;
  return lrs;
}

std::optional<std::vector<double>> PolynomialLR::closed_form_lr() const {
  const double done = static_cast<double>(std::min(total_iters_, last_epoch_));
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * std::pow(1.0 - done / static_cast<double>(total_iters_), power_));
  return lrs;
}

void PolynomialLR::save_extra(json& s) const { save_settings(s, *this); }

void PolynomialLR::load_extra(const json& s) { load_settings(s, *this); }

// ---- LambdaLR, MultiplicativeLR ----

namespace {

// One function per group: `one` for every group, or `many` (one per group), each non-empty.
std::vector<LambdaLR::Lambda> per_group_lambdas(const char* who, const Optimizer& optimizer,
                                                LambdaLR::Lambda one,
                                                std::vector<LambdaLR::Lambda> many) {
  const size_t groups = optimizer.param_group_count();
  if (one) many.assign(groups, one);
  EMBER_CHECK(many.size() == groups, who, ": expected ", groups,
              " lr_lambdas, one per parameter group (got ", many.size(), ")");
  for (size_t i = 0; i < many.size(); ++i)
    EMBER_CHECK(static_cast<bool>(many[i]), who, ": lr_lambdas[", i,
                "] is empty (expected a function)");
  return many;
}

// "lr_lambdas": [null, ...]: the functions come from the code (PyTorch saves plain functions
// as None too).
void load_lambdas(const json& s, size_t count, const char* who) {
  if (!s.contains("lr_lambdas")) return;
  EMBER_CHECK(s["lr_lambdas"].is_array() && s["lr_lambdas"].size() == count, who,
              ".load_state_dict: 'lr_lambdas' must list ", count, " entries, one per group (got ",
              s["lr_lambdas"].dump(), ")");
}

}  // namespace

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch) {
  EMBER_CHECK(static_cast<bool>(lr_lambda), "LambdaLR: lr_lambda is empty (expected a function)");
  lambdas_ = per_group_lambdas("LambdaLR", optimizer, std::move(lr_lambda), {});
  initial_step();
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch),
      lambdas_(per_group_lambdas("LambdaLR", optimizer, nullptr, std::move(lr_lambdas))) {
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    lrs.push_back(base_lrs_[g] * lambdas_[g](last_epoch_));
  return lrs;
}

void LambdaLR::save_extra(json& s) const { s["lr_lambdas"] = json(lambdas_.size(), nullptr); }
void LambdaLR::load_extra(const json& s) { load_lambdas(s, lambdas_.size(), "LambdaLR"); }

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch) {
  EMBER_CHECK(static_cast<bool>(lr_lambda),
              "MultiplicativeLR: lr_lambda is empty (expected a function)");
  lambdas_ = per_group_lambdas("MultiplicativeLR", optimizer, std::move(lr_lambda), {});
  initial_step();
}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas,
                                   int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch),
      lambdas_(per_group_lambdas("MultiplicativeLR", optimizer, nullptr, std::move(lr_lambdas))) {
  initial_step();
}

std::vector<double> MultiplicativeLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ <= 0) return lrs;
  for (size_t g = 0; g < lrs.size(); ++g) lrs[g] = lrs[g] * lambdas_[g](last_epoch_);
  return lrs;
}

void MultiplicativeLR::save_extra(json& s) const {
  s["lr_lambdas"] = json(lambdas_.size(), nullptr);
}
void MultiplicativeLR::load_extra(const json& s) {
  load_lambdas(s, lambdas_.size(), "MultiplicativeLR");
}

}  // namespace ember::optim
