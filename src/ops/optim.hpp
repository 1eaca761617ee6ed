// src/ops/optim.hpp — the optimizer ops: fused multi-tensor Adam/AdamW and SGD steps, the
// generic step of the other elementwise optimizers (RMSprop ... RAdam), and
// the gradient-norm pair behind clip_grad_norm. src/optim keeps the bookkeeping (groups,
// state tensors, step counts); these run the kernels, so optim never sees the backend table.
// This header is the ops layer's interface to src/optim (tools/check_layers.py lets the layers
// above ops include it): it may include nothing of the op and kernel layers but the step
// arguments, backend/optim_args.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/optim_args.hpp"
#include "ember/tensor.hpp"

namespace ember::ops {

/// One parameter of an Adam step: updated in place with its gradient and moments (same
/// shape, dtype and device; max_exp_avg_sq only with amsgrad, else null). `step` counts this
/// step (the bias corrections use it).
struct AdamItem {
  const Tensor* param;
  Tensor grad;
  const Tensor* exp_avg;
  const Tensor* exp_avg_sq;
  const Tensor* max_exp_avg_sq;
  int64_t step;
};

/// Fused Adam/AdamW over every item with the group's `args` (hyperparameters and loss scaling;
/// args.step is replaced by each item's): one multi-tensor kernel per (device, dtype, step),
/// which on a GPU is one launch per parameter group. A non-contiguous parameter or gradient
/// goes through contiguous copies written back into the parameter's own buffer.
void adam_step_(std::span<const AdamItem> items, const backend::AdamArgs& args);

/// One parameter of an SGD step; momentum_buffer is null without momentum, and `first_step`
/// says it was just created (PyTorch: it then takes the gradient itself).
struct SgdItem {
  const Tensor* param;
  Tensor grad;
  const Tensor* momentum_buffer;
  bool first_step;
  int64_t step = 0;  // the parameter's step count (used with SgdArgs::skipped_steps)
};

/// Fused SGD over every item, batched as adam_step_ (args.step and first_step come from each
/// item).
void sgd_step_(std::span<const SgdItem> items, const backend::SgdArgs& args);

/// One parameter of an elementwise optimizer step (backend::OptimAlgo): its gradient, its
/// state tensors (same shape, dtype and device; null where args do not use one, see
/// backend::OptimArgs) and the step's args (hyperparameters, step count, NAdam's product).
struct OptimItem {
  const Tensor* param;
  Tensor grad;
  std::array<const Tensor*, 3> state;
  backend::OptimArgs args;
};

/// Fused step over every item: one multi-tensor kernel per (device, dtype, args), batched
/// as adam_step_.
void optim_step_(std::span<const OptimItem> items);

/// The norm of order `norm_type` (inf: max |g|) of all gradients together, as a 0-d tensor
/// of their dtype on their device, accumulated in f64 in a fixed order. Not read.
Tensor total_grad_norm(const std::vector<Tensor>& grads, double norm_type);

/// Scales every gradient in place by min(1, max_norm / (total + 1e-6)), reading `total` on
/// the device (no host sync).
void clip_grads_by_norm_(const std::vector<Tensor>& grads, const Tensor& total, double max_norm);

/// GradScaler's unscale: every gradient *= f32(1 / f64(scale)) in place, and found_inf (f32
/// [1], not zeroed here) set to 1 where any element is inf or NaN; one multi-tensor call per
/// dtype (f32, f64). scale (f32 [1]) and found_inf live on the gradients' device; nothing is
/// read on the host.
void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& scale, const Tensor& found_inf);

/// GradScaler's update on the scale's device (backend slot amp_update_scale): found_combined
/// = any found_infs set; scale and growth_tracker (undefined: left alone) follow
/// torch._amp_update_scale_; each defined skipped_steps[i] += found_infs[i] != 0.
void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker,
                       const Tensor& found_combined, const std::vector<Tensor>& found_infs,
                       const std::vector<Tensor>& skipped_steps, double growth_factor,
                       double backoff_factor, int64_t growth_interval);

}  // namespace ember::ops
