// src/backend/optim_args.hpp — the arguments of the fused optimizer steps (the kernel table's
// adam_step_multi, sgd_step_multi and optim_step_multi slots), on their own so that the layer
// above ops that fills them (src/optim, through ops/optim.hpp) sees neither the kernel table
// nor the op catalogue. Plain structs and one formula; the kernels' side of the math is
// src/kernels/optim.hpp.
#pragma once

#include <cmath>
#include <cstdint>

namespace ember::backend {

/// One fused Adam/AdamW step on one parameter: torch.optim's single-tensor formulas
/// (foreach=False), computed in the parameter's dtype with the scalars below cast to it.
/// `step` is the count after this step's increment (1 on the first step).
struct AdamArgs {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr·wd first; Adam: g += wd·p
  bool amsgrad = false;                 // max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq)
  bool maximize = false;                // ascend: g = -g
  int64_t step = 1;
  // Loss scaling (Note [Skipped steps] in src/kernels/optim.hpp); both null unless a
  // GradScaler steps: f32 [1] and i64 [1] on the parameters' device, read there.
  const float* found_inf = nullptr;        // *found_inf != 0: the step changes nothing
  const int64_t* skipped_steps = nullptr;  // bias corrections use step - *skipped_steps
};

/// One fused SGD step on one parameter (torch.optim.SGD, single-tensor formulas).
/// `first_step`: the momentum buffer is new and takes the gradient itself (no dampening).
struct SgdArgs {
  double lr = 1e-3;
  double momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false;
  bool first_step = false;
  // Loss scaling, as AdamArgs: skipped where *found_inf != 0; with skipped_steps, the momentum
  // buffer also starts (takes the gradient) where step - *skipped_steps == 1.
  const float* found_inf = nullptr;
  const int64_t* skipped_steps = nullptr;
  int64_t step = 0;  // the parameters' step count (read only with skipped_steps)
};

/// One parameter of a multi-tensor optimizer step: contiguous buffers of `numel` elements of
/// the call's dtype, all on one device. Adam: state = {exp_avg, exp_avg_sq, max_exp_avg_sq
/// (amsgrad only, else null)}; SGD: state = {momentum_buffer (momentum != 0 only, else null)}.
struct OptimSlot {
  void* param = nullptr;
  const void* grad = nullptr;
  void* state[3] = {nullptr, nullptr, nullptr};
  int64_t numel = 0;
};

/// The elementwise optimizers of the generic fused step (optim_step_multi), each with
/// torch.optim's single-tensor formulas (src/kernels/optim.hpp writes them out).
enum class OptimAlgo : uint8_t { rmsprop, adagrad, adadelta, adamax, nadam, radam };

/// One fused step of an OptimAlgo on one parameter: the group's hyperparameters plus the
/// parameter's step count (and NAdam's running momentum product). Fields an algorithm does
/// not use stay at their defaults, so slots with equal args share one call. OptimSlot
/// state per algorithm: RMSprop {square_avg, grad_avg (centered), momentum_buffer
/// (momentum > 0)}; Adagrad {sum}; Adadelta {square_avg, acc_delta}; Adamax {exp_avg,
/// exp_inf}; NAdam and RAdam {exp_avg, exp_avg_sq}.
struct OptimArgs {
  OptimAlgo algo = OptimAlgo::rmsprop;
  double lr = 1e-3;
  double alpha = 0.99;   // RMSprop alpha, Adadelta rho, beta1 of Adamax/NAdam/RAdam
  double beta2 = 0.999;  // Adamax/NAdam/RAdam
  double eps = 1e-8;
  double weight_decay = 0.0;    // L2: g += weight_decay · p
  double momentum = 0.0;        // RMSprop
  double lr_decay = 0.0;        // Adagrad
  double momentum_decay = 0.0;  // NAdam
  double mu_product = 1.0;      // NAdam: μ_1···μ_t including this step (float32, as torch)
  bool centered = false;        // RMSprop
  bool maximize = false;
  int64_t step = 1;  // this step's count, from 1
  bool operator==(const OptimArgs&) const = default;
};

/// NAdam's momentum coefficient μ_t = β1 (1 - 0.5 · 0.96^(t · momentum_decay)): the step's
/// scalars (src/kernels/optim.hpp) and the running product src/optim keeps both use it.
inline double nadam_mu(double beta1, double momentum_decay, double t) {
  return beta1 * (1. - 0.5 * std::pow(0.96, t * momentum_decay));
}

}  // namespace ember::backend
