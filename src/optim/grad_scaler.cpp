// src/optim/grad_scaler.cpp — GradScaler (ember/optim/grad_scaler.hpp): torch.cuda.amp's
// bookkeeping (per-optimizer stages, the errors PyTorch raises) on the host; the unscale, the
// skipped step and the scale update on the device (ops::amp_unscale_, the fused optimizers'
// found_inf, ops::amp_update_scale_; Note [Skipped steps] in src/kernels/optim.hpp).
#include "ember/optim/grad_scaler.hpp"

#include <cmath>
#include <limits>

#include "core/capture.hpp"
#include "ember/autograd.hpp"
#include "ember/memory.hpp"
#include "ops/optim.hpp"

namespace ember::optim {
namespace {

void check_growth_factor(double f) {
  EMBER_CHECK(f > 1.0 && std::isfinite(f), "GradScaler: invalid growth_factor ", f,
              " (expected a finite growth_factor > 1)");
}

void check_backoff_factor(double f) {
  EMBER_CHECK(f > 0.0 && f < 1.0, "GradScaler: invalid backoff_factor ", f,
              " (expected 0 < backoff_factor < 1)");
}

void check_growth_interval(int64_t n) {
  EMBER_CHECK(n >= 1 && n <= std::numeric_limits<int32_t>::max(),
              "GradScaler: invalid growth_interval ", n, " (expected growth_interval >= 1)");
}

void check_init_scale(double s) {
  EMBER_CHECK(s > 0.0 && std::isfinite(s) && s <= std::numeric_limits<float>::max(),
              "GradScaler: invalid init_scale ", s, " (expected a finite f32 value > 0)");
}

Tensor persistent_full(double value, DType dtype, Device device) {
  NoGradGuard no_grad;
  PoolGuard persistent(Pool::Persistent);
  return full({1}, value, {.dtype = dtype, .device = device});
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  check_init_scale(options_.init_scale);
  check_growth_factor(options_.growth_factor);
  check_backoff_factor(options_.backoff_factor);
  check_growth_interval(options_.growth_interval);
}

void GradScaler::check_started(const char* who) const {
  EMBER_CHECK(scale_.defined(), "GradScaler.", who,
              ": the scale is not set up yet (call scaler.scale(loss) earlier in the iteration, "
              "then backward on what it returns)");
}

GradScaler::PerOptimizer& GradScaler::per_optimizer(const Optimizer& opt) {
  for (PerOptimizer& p : optimizers_)
    if (p.optimizer == &opt) return p;
  optimizers_.push_back({&opt, Tensor(), Stage::ready, false});
  return optimizers_.back();
}

Tensor GradScaler::scale(const Tensor& loss) {
  EMBER_CHECK(loss.defined(), "GradScaler.scale: the loss is an undefined tensor");
  if (!options_.enabled) return loss;
  EMBER_CHECK(is_floating(loss.dtype()), "GradScaler.scale: the loss has dtype ",
              dtype_name(loss.dtype()), " (expected a floating dtype)");
  if (!scale_.defined()) {
    scale_ = persistent_full(options_.init_scale, DType::f32, loss.device());
    growth_tracker_ =
        persistent_full(static_cast<double>(init_growth_tracker_), DType::i32, loss.device());
    found_combined_ = persistent_full(0.0, DType::f32, loss.device());
  }
  EMBER_CHECK(loss.device() == scale_.device(), "GradScaler.scale: the loss is on ",
              loss.device().str(), " but the scaler's state on ", scale_.device().str(),
              " (expected one device per scaler)");
  return loss * scale_.reshape({});
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!options_.enabled) return;
  check_started("unscale_");
  PerOptimizer& per = per_optimizer(opt);
  EMBER_CHECK(per.stage != Stage::unscaled,
              "GradScaler.unscale_: unscale_() has already been called on this optimizer since "
              "the last update()");
  EMBER_CHECK(per.stage != Stage::stepped,
              "GradScaler.unscale_: unscale_() is being called after step() (expected it "
              "before step(), once per update())");
  EMBER_CHECK(opt.accumulate_steps() == 1, "GradScaler.unscale_: ", opt.type_name(),
              " accumulates gradients (accumulate_steps ", opt.accumulate_steps(),
              "); with a scaler, accumulate by calling scaler.step once per k backward passes");
  std::vector<Tensor> grads;
  for (const Tensor& p : opt.parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    EMBER_CHECK(g.dtype() == DType::f32 || g.dtype() == DType::f64,
                "GradScaler.unscale_: attempting to unscale ", dtype_name(g.dtype()),
                " gradients (expected f32 or f64: keep master weights in f32)");
    EMBER_CHECK(g.device() == scale_.device(), "GradScaler.unscale_: a gradient is on ",
                g.device().str(), " but the scale on ", scale_.device().str(),
                " (expected one device per scaler)");
    grads.push_back(g);
  }
  NoGradGuard no_grad;
  if (!per.found_inf.defined())
    per.found_inf = persistent_full(0.0, DType::f32, scale_.device());
  else
    per.found_inf.zero_();
  if (!grads.empty()) ops::amp_unscale_(grads, scale_, per.found_inf);
  per.stage = Stage::unscaled;
}

void GradScaler::step(Optimizer& opt) {
  if (!options_.enabled) {
    opt.step();
    return;
  }
  check_started("step");
  PerOptimizer& before = per_optimizer(opt);
  EMBER_CHECK(before.stage != Stage::stepped,
              "GradScaler.step: step() has already been called since the last update()");
  if (before.stage == Stage::ready) unscale_(opt);
  PerOptimizer& per = per_optimizer(opt);
  if (opt.skips_on_device()) {
    opt.step_unless_found_inf(per.found_inf);
    per.device_skip = true;
  } else {
    EMBER_CHECK(ember::detail::active_capture() == nullptr, "GradScaler.step: ", opt.type_name(),
                " cannot skip a step on the device, so the scaler reads found_inf on the host, "
                "which a captured step cannot do (capture Adam, AdamW or SGD, or step eagerly)");
    if (per.found_inf.item<float>() == 0.0f) opt.step();
    per.device_skip = false;
  }
  per.stage = Stage::stepped;
}

void GradScaler::run_update(bool rule) {
  std::vector<Tensor> found, skipped;
  for (PerOptimizer& p : optimizers_) {
    if (p.stage == Stage::ready) continue;
    found.push_back(p.found_inf);
    const bool counts = p.stage == Stage::stepped && p.device_skip;
    skipped.push_back(counts ? p.optimizer->skipped_steps() : Tensor());
  }
  EMBER_CHECK(!rule || !found.empty(),
              "GradScaler.update: no inf checks were recorded prior to update() (call "
              "scaler.step(opt) or scaler.unscale_(opt) first)");
  if (!found.empty()) {
    NoGradGuard no_grad;
    ops::amp_update_scale_(rule ? scale_ : Tensor(), rule ? growth_tracker_ : Tensor(),
                           found_combined_, found, skipped, options_.growth_factor,
                           options_.backoff_factor, options_.growth_interval);
  }
  for (PerOptimizer& p : optimizers_) p.stage = Stage::ready;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  check_started("update");
  run_update(/*rule=*/true);
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  check_started("update");
  EMBER_CHECK(new_scale > 0.0 && std::isfinite(new_scale), "GradScaler.update: invalid new_scale ",
              new_scale, " (expected a finite value > 0)");
  run_update(/*rule=*/false);
  NoGradGuard no_grad;
  scale_.fill_(static_cast<double>(static_cast<float>(new_scale)));
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : options_.init_scale;
}

Tensor GradScaler::found_inf(const Optimizer& opt) const {
  for (const PerOptimizer& p : optimizers_)
    if (p.optimizer == &opt) return p.found_inf;
  return Tensor();
}

void GradScaler::set_growth_factor(double factor) {
  check_growth_factor(factor);
  options_.growth_factor = factor;
}

void GradScaler::set_backoff_factor(double factor) {
  check_backoff_factor(factor);
  options_.backoff_factor = factor;
}

void GradScaler::set_growth_interval(int64_t interval) {
  check_growth_interval(interval);
  options_.growth_interval = interval;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!options_.enabled) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : init_growth_tracker_;
}

nlohmann::json GradScaler::state_dict() const {
  if (!options_.enabled) return nlohmann::json::object();
  return {{"scale", get_scale()},
          {"growth_factor", options_.growth_factor},
          {"backoff_factor", options_.backoff_factor},
          {"growth_interval", options_.growth_interval},
          {"_growth_tracker", get_growth_tracker()}};
}

void GradScaler::load_state_dict(const nlohmann::json& state) {
  if (!options_.enabled) return;
  EMBER_CHECK(state.is_object() && !state.empty(),
              "GradScaler.load_state_dict: the source state dict is empty, possibly because it "
              "was saved from a disabled instance of GradScaler");
  for (const char* key :
       {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"})
    EMBER_CHECK(state.contains(key) && state[key].is_number(), "GradScaler.load_state_dict: '", key,
                "' must be a number (got ",
                state.contains(key) ? state[key].dump() : std::string("nothing"), ")");
  for (const char* key : {"growth_interval", "_growth_tracker"})
    EMBER_CHECK(state[key].is_number_integer(), "GradScaler.load_state_dict: '", key,
                "' must be an integer (got ", state[key].dump(), ")");
  const double scale = state["scale"].get<double>();
  const int64_t tracker = state["_growth_tracker"].get<int64_t>();
  check_init_scale(scale);
  check_growth_factor(state["growth_factor"].get<double>());
  check_backoff_factor(state["backoff_factor"].get<double>());
  check_growth_interval(state["growth_interval"].get<int64_t>());
  EMBER_CHECK(tracker >= 0 && tracker <= std::numeric_limits<int32_t>::max(),
              "GradScaler.load_state_dict: invalid _growth_tracker ", tracker,
              " (expected a count >= 0)");
  options_.init_scale = scale;
  options_.growth_factor = state["growth_factor"].get<double>();
  options_.backoff_factor = state["backoff_factor"].get<double>();
  options_.growth_interval = state["growth_interval"].get<int64_t>();
  init_growth_tracker_ = tracker;
  NoGradGuard no_grad;
  if (scale_.defined()) scale_.fill_(scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(static_cast<double>(tracker));
}

}  // namespace ember::optim
