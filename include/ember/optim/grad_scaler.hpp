// ember/optim/grad_scaler.hpp — dynamic loss scaling for f16 training, with PyTorch's
// torch.cuda.amp.GradScaler semantics, its state kept on the device (ARCHITECTURE §5).
//
//   optim::GradScaler scaler;                       // init_scale 65536, growth every 2000 steps
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     { AutocastGuard autocast(DType::f16); loss = cross_entropy(net(x), y); }
//     scaler.scale(loss).backward();                // gradients of loss × scale
//     scaler.unscale_(opt);                         // optional: before clipping
//     optim::clip_grad_norm_tensor(net->parameters(), 1.0);
//     scaler.step(opt);                             // skipped where a gradient is inf/NaN
//     scaler.update();                              // backs off or grows the scale
//   }
//
// The found-inf check, the skipped step and the scale update all run on the device: nothing
// in a scaled Adam/AdamW/SGD step waits for the host, so the whole step can be captured
// (train::CapturedStep) and replays bitwise equal to eager (Note [Skipped steps] in
// src/kernels/optim.hpp). Other optimizers are skipped on the host: GradScaler::step reads
// found_inf for them (one sync), which a captured step refuses.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "ember/optim/optimizer.hpp"
#include "ember/tensor.hpp"

namespace ember::optim {

/// GradScaler's configuration (PyTorch's constructor arguments and defaults).
struct GradScalerOptions {
  double init_scale = 65536.0;     // the scale before the first update
  double growth_factor = 2.0;      // scale *= growth after growth_interval clean steps (> 1)
  double backoff_factor = 0.5;     // scale *= backoff after a step with inf/NaN (0 < b < 1)
  int64_t growth_interval = 2000;  // clean steps between growths (>= 1)
  bool enabled = true;             // false: every call is a no-op (scale returns the loss)
};

/// Dynamic loss scaler (torch.cuda.amp.GradScaler). State per device: the scale (f32 [1]),
/// the growth tracker (i32 [1]) and, per optimizer, found_inf (f32 [1]); all made on the
/// loss's device at the first scale().
class GradScaler {
 public:
  /// Throws ember::Error naming a bad option.
  explicit GradScaler(GradScalerOptions options = {});
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  /// loss × scale (differentiable; same shape as the loss). Disabled: the loss itself.
  ///   scaler.scale(loss).backward();
  Tensor scale(const Tensor& loss);
  /// Divides the gradients of `opt`'s parameters by the scale in place and records in the
  /// optimizer's found_inf whether any is inf or NaN (on the device, one multi-tensor pass).
  /// Once per optimizer between update()s; step() calls it when the caller did not.
  void unscale_(Optimizer& opt);
  /// unscale_ (when not done yet), then opt's step, skipped where found_inf is set: on the
  /// device for Adam, AdamW and SGD (not counted in their step counts, as PyTorch's), after
  /// one host read of found_inf for the others. Disabled: opt.step().
  void step(Optimizer& opt);
  /// Updates the scale from every optimizer's found_inf since the last update
  /// (torch._amp_update_scale_): backoff on inf/NaN, growth after growth_interval clean steps.
  void update();
  /// Sets the scale to `new_scale` instead of the rule (the skipped steps still count).
  void update(double new_scale);

  /// The current scale (a host read; init_scale before the first scale(); 1 when disabled).
  double get_scale() const;
  /// The device scale (f32 [1]); undefined before the first scale().
  const Tensor& scale_tensor() const { return scale_; }
  /// 1 where the last update() found an inf or NaN in any optimizer's gradients, else 0 (f32
  /// [1] on the scale's device, not read); undefined before the first scale().
  const Tensor& found_inf() const { return found_combined_; }
  /// `opt`'s found_inf since its last unscale_ (f32 [1]); undefined before its first unscale_.
  Tensor found_inf(const Optimizer& opt) const;
  bool is_enabled() const { return options_.enabled; }
  double get_growth_factor() const { return options_.growth_factor; }
  void set_growth_factor(double factor);
  double get_backoff_factor() const { return options_.backoff_factor; }
  void set_backoff_factor(double factor);
  int64_t get_growth_interval() const { return options_.growth_interval; }
  void set_growth_interval(int64_t interval);
  /// Clean steps since the last growth or backoff (a host read).
  int64_t get_growth_tracker() const;

  /// PyTorch's keys: {"scale", "growth_factor", "backoff_factor", "growth_interval",
  /// "_growth_tracker"}; an empty object when disabled. Reads the device state.
  nlohmann::json state_dict() const;
  /// Restores a state_dict() (validated first; nothing changes on error). Disabled: no-op.
  void load_state_dict(const nlohmann::json& state);

 private:
  enum class Stage : uint8_t { ready, unscaled, stepped };
  struct PerOptimizer {
    const Optimizer* optimizer;
    Tensor found_inf;
    Stage stage = Stage::ready;
    bool device_skip = false;  // stepped with step_unless_found_inf
  };
  PerOptimizer& per_optimizer(const Optimizer& opt);
  void check_started(const char* who) const;
  void run_update(bool rule);

  GradScalerOptions options_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_, growth_tracker_, found_combined_;
  std::vector<PerOptimizer> optimizers_;
};

}  // namespace ember::optim
