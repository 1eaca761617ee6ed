// src/optim/clip.cpp — clip_grad_norm and clip_grad_value (torch.nn.utils semantics).
//
// The norm is built from tensor ops, per gradient then across gradients (as PyTorch), so it
// stays on the gradients' device until the one scalar the caller receives is read.
#include "ember/optim/clip.hpp"

#include <cmath>

#include "ember/autograd.hpp"
#include "ember/ops.hpp"

namespace ember::optim {
namespace {

// The norm of one gradient as a 0-d tensor (f64 for accuracy, on the gradient's device).
Tensor grad_norm(const Tensor& g, double norm_type) {
  const Tensor x = g.to(DType::f64).abs();
  if (std::isinf(norm_type)) return max(x);
  if (norm_type == 1.0) return sum(x);
  if (norm_type == 2.0) return sqrt(sum(square(x)));
  return pow(sum(pow(x, norm_type)), 1.0 / norm_type);
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type,
                      bool error_if_nonfinite) {
  EMBER_CHECK(norm_type > 0.0, "clip_grad_norm: invalid norm_type ", norm_type,
              " (expected p > 0 or infinity)");
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    EMBER_CHECK(is_compute_float(g.dtype()), "clip_grad_norm: gradient dtype ",
                dtype_name(g.dtype()), " not supported (expected f32 or f64)");
    grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) {
    Tensor n = g.numel() == 0 ? zeros({}, {.dtype = DType::f64, .device = g.device()})
                              : grad_norm(g, norm_type);
    norms.push_back(n.device() == grads[0].device() ? n : n.to(grads[0].device()));
  }
  const Tensor all = stack(norms);
  const Tensor total_t = std::isinf(norm_type) ? max(all) : grad_norm(all, norm_type);
  const double total = total_t.item<double>();
  EMBER_CHECK(
      !error_if_nonfinite || std::isfinite(total), "clip_grad_norm: the total norm of order ",
      norm_type, " of the gradients is non-finite (got ", total,
      "; expected a finite norm, or pass error_if_nonfinite = false to scale by it anyway)");
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    for (Tensor& g : grads) g.mul_(coef);
  }
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
