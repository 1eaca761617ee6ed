// src/optim/cyclic.cpp — the per-batch cyclical schedules OneCycleLR and CyclicLR,
// transcribed from torch/optim/lr_scheduler.py (PyTorch 1.13; cycling Adam's beta1 in
// CyclicLR is PyTorch 2.x's): the same branches and float expressions in the same order.
// Both can move momentum the other way (cycle_momentum): SGD-like optimizers' "momentum",
// or beta1 of optimizers with "betas", written through Optimizer::update_group_options.
#include <cmath>

#include "ember/optim/scheduler.hpp"
#include "optim/scheduler_json.hpp"

namespace ember::optim {
namespace {

using detail::kPi;
using detail::numbers_json;
using detail::read;

// PyTorch's _format_param: one value for every group, or one per group.
std::vector<double> per_group(const char* who, const char* name, const Optimizer& opt,
                              const std::vector<double>& values) {
  const size_t groups = opt.param_group_count();
  if (values.size() == 1) return std::vector<double>(groups, values[0]);
  EMBER_CHECK(values.size() == groups, who, ": expected ", groups, " values for ", name,
              " (one per parameter group, or one for all; got ", values.size(), ")");
  return values;
}

// Whether the groups have "betas" (cycle beta1) or "momentum"; throws when neither.
bool uses_beta1(const char* who, const Optimizer& opt) {
  const json o = opt.group_options(0);
  EMBER_CHECK(o.contains("momentum") || o.contains("betas"), who, ": ", opt.type_name(),
              " has neither momentum nor betas (cycle_momentum needs one; pass "
              ".cycle_momentum = false)");
  return !o.contains("momentum") && o.contains("betas");
}

double momentum_of(const Optimizer& opt, size_t g, bool beta1) {
  const json o = opt.group_options(g);
  return beta1 ? o["betas"][0].get<double>() : o["momentum"].get<double>();
}

void set_momentum(Optimizer& opt, size_t g, double m, bool beta1) {
  if (beta1) {
    json betas = opt.group_options(g)["betas"];
    betas[0] = m;
    opt.update_group_options(g, {{"betas", betas}});
  } else {
    opt.update_group_options(g, {{"momentum", m}});
  }
}

std::vector<double> doubles(const json& s, const char* key, const std::string& who,
                            const std::vector<double>& fallback) {
  std::vector<double> out = fallback;
  read(s, key, &out, who);
  EMBER_CHECK(out.size() == fallback.size(), who, ".load_state_dict: '", key, "' has ", out.size(),
              " entries (expected one per parameter group: ", fallback.size(), ")");
  return out;
}

int64_t one_cycle_total(const OneCycleLROptions& o) {
  if (o.total_steps != 0) {
    EMBER_CHECK(o.total_steps > 0, "OneCycleLR: invalid total_steps ", o.total_steps,
                " (expected a positive integer)");
    return o.total_steps;
  }
  EMBER_CHECK(o.epochs > 0 && o.steps_per_epoch > 0,
              "OneCycleLR: set total_steps, or epochs and steps_per_epoch (got epochs ", o.epochs,
              ", steps_per_epoch ", o.steps_per_epoch, "; expected positive integers)");
  return o.epochs * o.steps_per_epoch;
}

// Validates, then (a fresh start) sets each group's initial_lr to max_lr / div_factor and
// its momentum to max_momentum, before LRScheduler reads them (as PyTorch's __init__).
Optimizer& one_cycle_attach(Optimizer& opt, const OneCycleLROptions& o, int64_t last_epoch) {
  one_cycle_total(o);
  EMBER_CHECK(o.pct_start >= 0.0 && o.pct_start <= 1.0, "OneCycleLR: invalid pct_start ",
              o.pct_start, " (expected 0 <= pct_start <= 1)");
  EMBER_CHECK(o.div_factor > 0.0 && o.final_div_factor > 0.0, "OneCycleLR: invalid div_factor ",
              o.div_factor, " or final_div_factor ", o.final_div_factor, " (expected both > 0)");
  const std::vector<double> max_lrs = per_group("OneCycleLR", "max_lr", opt, o.max_lr);
  for (double lr : max_lrs)
    EMBER_CHECK(lr >= 0.0, "OneCycleLR: invalid max_lr ", lr, " (expected max_lr >= 0)");
  bool beta1 = false;
  std::vector<double> max_momentums;
  if (o.cycle_momentum) {
    beta1 = uses_beta1("OneCycleLR", opt);
    max_momentums = per_group("OneCycleLR", "max_momentum", opt, o.max_momentum);
    per_group("OneCycleLR", "base_momentum", opt, o.base_momentum);
  }
  if (last_epoch == -1) {
    for (size_t g = 0; g < opt.param_group_count(); ++g) {
      opt.set_initial_lr(g, max_lrs[g] / o.div_factor);
      if (o.cycle_momentum) set_momentum(opt, g, max_momentums[g], beta1);
    }
  }
  return opt;
}

// Validates and (a fresh start) sets each group's lr to base_lr and momentum to
// base_momentum (as PyTorch's __init__).
Optimizer& cyclic_attach(Optimizer& opt, const CyclicLROptions& o, int64_t last_epoch) {
  const std::vector<double> base_lrs = per_group("CyclicLR", "base_lr", opt, o.base_lr);
  per_group("CyclicLR", "max_lr", opt, o.max_lr);
  EMBER_CHECK(o.step_size_up > 0 && o.step_size_down.value_or(1) > 0,
              "CyclicLR: invalid step sizes (got step_size_up ", o.step_size_up,
              ", step_size_down ", o.step_size_down.value_or(o.step_size_up),
              "; expected both > 0)");
  if (last_epoch == -1)
    for (size_t g = 0; g < opt.param_group_count(); ++g) opt.set_lr(g, base_lrs[g]);
  if (o.cycle_momentum) {
    const bool beta1 = uses_beta1("CyclicLR", opt);
    const std::vector<double> base = per_group("CyclicLR", "base_momentum", opt, o.base_momentum);
    per_group("CyclicLR", "max_momentum", opt, o.max_momentum);
    if (last_epoch == -1)
      for (size_t g = 0; g < opt.param_group_count(); ++g) set_momentum(opt, g, base[g], beta1);
  }
  return opt;
}

const char* mode_name(CyclicMode m) {
  return m == CyclicMode::triangular    ? "triangular"
         : m == CyclicMode::triangular2 ? "triangular2"
                                        : "exp_range";
}

}  // namespace

// ---- OneCycleLR ----

OneCycleLR::OneCycleLR(Optimizer& optimizer, OneCycleLROptions options, int64_t last_epoch)
    : LRScheduler(one_cycle_attach(optimizer, options, last_epoch), last_epoch),
      options_(std::move(options)) {
  const OneCycleLROptions& o = options_;
  total_steps_ = one_cycle_total(o);
  const double total = static_cast<double>(total_steps_);
  // Values: 0 the initial lr / max momentum, 1 the max lr / base momentum, 2 the min lr.
  if (o.three_phase) {
    phases_ = {{o.pct_start * total - 1, 0, 1, 0, 1},
               {2 * o.pct_start * total - 2, 1, 0, 1, 0},
               {total - 1, 0, 2, 0, 0}};
  } else {
    phases_ = {{o.pct_start * total - 1, 0, 1, 0, 1}, {total - 1, 1, 2, 1, 0}};
  }
  max_lrs_ = per_group("OneCycleLR", "max_lr", optimizer, o.max_lr);
  for (size_t g = 0; g < max_lrs_.size(); ++g)
    min_lrs_.push_back(*optimizer.initial_lr(g) / o.final_div_factor);
  if (o.cycle_momentum) {
    use_beta1_ = uses_beta1("OneCycleLR", optimizer);
    max_momentums_ = per_group("OneCycleLR", "max_momentum", optimizer, o.max_momentum);
    base_momentums_ = per_group("OneCycleLR", "base_momentum", optimizer, o.base_momentum);
  }
  initial_step();
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  EMBER_CHECK(step_num <= total_steps_, "OneCycleLR: tried to step ", step_num + 1,
              " times (expected at most total_steps = ", total_steps_, ")");
  const auto anneal = [&](double start, double end, double pct) {
    if (options_.anneal_strategy == AnnealStrategy::linear) return (end - start) * pct + start;
    const double cos_out = std::cos(kPi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  };
  Optimizer& opt = optimizer();
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double lr_values[3] = {*opt.initial_lr(g), max_lrs_[g], min_lrs_[g]};
    double start_step = 0.0, lr = 0.0, momentum = 0.0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& phase = phases_[i];
      if (static_cast<double>(step_num) <= phase.end_step || i == phases_.size() - 1) {
        const double pct =
            (static_cast<double>(step_num) - start_step) / (phase.end_step - start_step);
        lr = anneal(lr_values[phase.start_lr], lr_values[phase.end_lr], pct);
        if (options_.cycle_momentum) {
          const double m_values[2] = {max_momentums_[g], base_momentums_[g]};
          momentum = anneal(m_values[phase.start_momentum], m_values[phase.end_momentum], pct);
        }
        break;
      }
      start_step = phase.end_step;
    }
    lrs.push_back(lr);
    if (options_.cycle_momentum) set_momentum(opt, g, momentum, use_beta1_);
  }
  return lrs;
}

void OneCycleLR::save_extra(json& s) const {
  const char* names[3] = {"initial_lr", "max_lr", "min_lr"};
  const char* momenta[2] = {"max_momentum", "base_momentum"};
  json phases = json::array();
  for (const Phase& p : phases_)
    phases.push_back({{"end_step", p.end_step},
                      {"start_lr", names[p.start_lr]},
                      {"end_lr", names[p.end_lr]},
                      {"start_momentum", momenta[p.start_momentum]},
                      {"end_momentum", momenta[p.end_momentum]}});
  s["total_steps"] = total_steps_;
  s["_schedule_phases"] = phases;
  s["anneal_strategy"] = options_.anneal_strategy == AnnealStrategy::cos ? "cos" : "linear";
  s["cycle_momentum"] = options_.cycle_momentum;
  s["use_beta1"] = use_beta1_;
  // PyTorch keeps these in the optimizer's param_groups; ember keeps them here.
  s["max_lrs"] = numbers_json(max_lrs_);
  s["min_lrs"] = numbers_json(min_lrs_);
  s["max_momentums"] = numbers_json(max_momentums_);
  s["base_momentums"] = numbers_json(base_momentums_);
}

void OneCycleLR::load_extra(const json& s) {
  const std::string who = type_name();
  int64_t total = total_steps_;
  read(s, "total_steps", &total, who);
  EMBER_CHECK(total > 0, who, ".load_state_dict: invalid total_steps ", total, " (expected > 0)");
  std::vector<double> max_lrs = doubles(s, "max_lrs", who, max_lrs_);
  std::vector<double> min_lrs = doubles(s, "min_lrs", who, min_lrs_);
  std::vector<double> max_m = doubles(s, "max_momentums", who, max_momentums_);
  std::vector<double> base_m = doubles(s, "base_momentums", who, base_momentums_);
  total_steps_ = total;
  max_lrs_ = std::move(max_lrs);
  min_lrs_ = std::move(min_lrs);
  max_momentums_ = std::move(max_m);
  base_momentums_ = std::move(base_m);
}

// ---- CyclicLR ----

CyclicLR::CyclicLR(Optimizer& optimizer, CyclicLROptions options, int64_t last_epoch)
    : LRScheduler(cyclic_attach(optimizer, options, last_epoch), last_epoch),
      options_(std::move(options)) {
  const CyclicLROptions& o = options_;
  max_lrs_ = per_group("CyclicLR", "max_lr", optimizer, o.max_lr);
  const double up = static_cast<double>(o.step_size_up);
  const double down = static_cast<double>(o.step_size_down.value_or(o.step_size_up));
  total_size_ = up + down;
  step_ratio_ = up / total_size_;
  scale_mode_ = o.scale_fn                        ? o.scale_mode
                : o.mode == CyclicMode::exp_range ? ScaleMode::iterations
                                                  : ScaleMode::cycle;
  if (o.cycle_momentum) {
    use_beta1_ = uses_beta1("CyclicLR", optimizer);
    for (size_t g = 0; g < optimizer.param_group_count(); ++g)
      base_momentums_.push_back(momentum_of(optimizer, g, use_beta1_));
    max_momentums_ = per_group("CyclicLR", "max_momentum", optimizer, o.max_momentum);
  }
  base_lrs_ = per_group("CyclicLR", "base_lr", optimizer, o.base_lr);
  initial_step();
}

double CyclicLR::scale(double x) const {
  if (options_.scale_fn) return options_.scale_fn(x);
  switch (options_.mode) {
    case CyclicMode::triangular: return 1.;
    case CyclicMode::triangular2: return 1 / std::pow(2., x - 1);
    case CyclicMode::exp_range: return std::pow(options_.gamma, x);
  }
  return 1.;
}

std::vector<double> CyclicLR::get_lr() {
  const double epoch = static_cast<double>(last_epoch_);
  const double cycle = std::floor(1 + epoch / total_size_);
  const double x = 1. + epoch / total_size_ - cycle;
  const double scale_factor = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  const double s = scale(scale_mode_ == ScaleMode::cycle ? cycle : epoch);
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double base_height = (max_lrs_[g] - base_lrs_[g]) * scale_factor;
    lrs.push_back(base_lrs_[g] + base_height * s);
  }
  if (options_.cycle_momentum) {
    for (size_t g = 0; g < base_momentums_.size(); ++g) {
      const double base_height = (max_momentums_[g] - base_momentums_[g]) * scale_factor;
      set_momentum(optimizer(), g, max_momentums_[g] - base_height * s, use_beta1_);
    }
  }
  return lrs;
}

void CyclicLR::save_extra(json& s) const {
  s["max_lrs"] = numbers_json(max_lrs_);
  s["total_size"] = total_size_;
  s["step_ratio"] = step_ratio_;
  s["mode"] = mode_name(options_.mode);
  s["gamma"] = options_.gamma;
  s["scale_mode"] = scale_mode_ == ScaleMode::cycle ? "cycle" : "iterations";
  s["cycle_momentum"] = options_.cycle_momentum;
  s["use_beta1"] = use_beta1_;
  s["base_momentums"] = numbers_json(base_momentums_);
  s["max_momentums"] = numbers_json(max_momentums_);
}

void CyclicLR::load_extra(const json& s) {
  const std::string who = type_name();
  std::vector<double> max_lrs = doubles(s, "max_lrs", who, max_lrs_);
  std::vector<double> base_m = doubles(s, "base_momentums", who, base_momentums_);
  std::vector<double> max_m = doubles(s, "max_momentums", who, max_momentums_);
  double total = total_size_, ratio = step_ratio_;
  read(s, "total_size", &total, who);
  read(s, "step_ratio", &ratio, who);
  EMBER_CHECK(total > 0 && ratio > 0 && ratio <= 1, who, ".load_state_dict: invalid total_size ",
              total, " or step_ratio ", ratio, " (expected total_size > 0, 0 < step_ratio <= 1)");
  read(s, "gamma", &options_.gamma, who);
  max_lrs_ = std::move(max_lrs);
  base_momentums_ = std::move(base_m);
  max_momentums_ = std::move(max_m);
  total_size_ = total;
  step_ratio_ = ratio;
}

}  // namespace ember::optim
