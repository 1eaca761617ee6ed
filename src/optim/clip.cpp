// src/optim/clip.cpp — clip_grad_norm and clip_grad_value (torch.nn.utils semantics).
//
// The norm is built from tensor ops, per gradient then across gradients (as PyTorch), so it
// stays on the gradients' device until the one scalar the caller receives is read.
#include "ember/optim/clip.hpp"

#include <cmath>

#include "ember/autograd.hpp"
#include "ember/ops.hpp"
#include "ember/profiler.hpp"
#include "ops/optim.hpp"

namespace ember::optim {
namespace {

// The gradients of `params` (parameters without one are skipped), checked.
std::vector<Tensor> gradients_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    EMBER_CHECK(is_compute_float(g.dtype()), "clip_grad_norm: gradient dtype ",
                dtype_name(g.dtype()), " not supported (expected f32 or f64)");
    grads.push_back(g);
  }
  return grads;
}

void check_args(double max_norm, double norm_type) {
  EMBER_CHECK(norm_type > 0.0, "clip_grad_norm: invalid norm_type ", norm_type,
              " (expected p > 0 or infinity)");
  // A negative max_norm would flip every gradient's sign.
  EMBER_CHECK(max_norm >= 0.0, "clip_grad_norm: invalid max_norm ", max_norm,
              " (expected max_norm >= 0)");
}

}  // namespace

Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  const detail::ProfileScope profile(ProfileKind::range, "clip_grad_norm");
  check_args(max_norm, norm_type);
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = gradients_of(params);
  if (grads.empty()) return Tensor();
  Tensor total = ops::total_grad_norm(grads, norm_type);
  ops::clip_grads_by_norm_(grads, total, max_norm);
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type,
                      bool error_if_nonfinite) {
  const detail::ProfileScope profile(ProfileKind::range, "clip_grad_norm");
  check_args(max_norm, norm_type);
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = gradients_of(params);
  if (grads.empty()) return 0.0;
  const Tensor total_t = ops::total_grad_norm(grads, norm_type);
  const double total = total_t.item<double>();
  EMBER_CHECK(
      !error_if_nonfinite || std::isfinite(total), "clip_grad_norm: the total norm of order ",
      norm_type, " of the gradients is non-finite (got ", total,
      "; expected a finite norm, or pass error_if_nonfinite = false to scale by it anyway)");
  ops::clip_grads_by_norm_(grads, total_t, max_norm);
  return total;
}

void clip_grad_value(const std::vector<Tensor>& params, double clip_value) {
  EMBER_CHECK(clip_value >= 0.0, "clip_grad_value: invalid clip_value ", clip_value,
              " (expected clip_value >= 0)");
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace ember::optim
