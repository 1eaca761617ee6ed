// src/optim/clip.cpp — clip_grad_norm and clip_grad_value (torch.nn.utils semantics).
//
// The norm is built from tensor ops, per gradient then across gradients (as PyTorch), so it
// stays on the gradients' device until the one scalar the caller receives is read.
#include "ember/optim/clip.hpp"

#include <cmath>

#include "backend/backend.hpp"
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

// All contiguous, one device, one dtype: the two multi-tensor kernels apply.
bool fusable(const std::vector<Tensor>& grads) {
  for (const Tensor& g : grads)
    if (!g.is_contiguous() || g.device() != grads[0].device() || g.dtype() != grads[0].dtype())
      return false;
  return true;
}

struct GradList {
  std::vector<void*> data;
  std::vector<int64_t> numels;
  explicit GradList(const std::vector<Tensor>& grads) {
    for (const Tensor& g : grads) {
      data.push_back(g.data_ptr());
      numels.push_back(g.numel());
    }
  }
  int64_t count() const { return static_cast<int64_t>(data.size()); }
};

// The total norm as a 0-d tensor of the gradients' dtype on their device (not read).
Tensor total_norm(const std::vector<Tensor>& grads, double norm_type) {
  if (fusable(grads)) {
    const Tensor& g0 = grads[0];
    Tensor total = zeros({}, {.dtype = g0.dtype(), .device = g0.device()});
    const GradList list(grads);
    backend::backend_for(g0.device())
        .grad_norm_multi(g0.dtype(), list.data.data(), list.numels.data(), list.count(), norm_type,
                         total.data_ptr());
    return total;
  }
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) {
    Tensor n = g.numel() == 0 ? zeros({}, {.dtype = DType::f64, .device = g.device()})
                              : grad_norm(g, norm_type);
    norms.push_back(n.device() == grads[0].device() ? n : n.to(grads[0].device()));
  }
  const Tensor all = stack(norms);
  return (std::isinf(norm_type) ? max(all) : grad_norm(all, norm_type)).to(grads[0].dtype());
}

// Scales every gradient by min(1, max_norm / (total + 1e-6)), reading total where it lives.
void scale_by_norm(const std::vector<Tensor>& grads, const Tensor& total, double max_norm) {
  if (fusable(grads) && total.device() == grads[0].device() && total.dtype() == grads[0].dtype()) {
    const GradList list(grads);
    backend::backend_for(total.device())
        .clip_grads_by_norm(total.dtype(), list.data.data(), list.numels.data(), list.count(),
                            max_norm, total.data_ptr());
    for (const Tensor& g : grads) g.storage()->bump_version();
    return;
  }
  const Tensor coef = clamp(max_norm / (total.to(DType::f64) + 1e-6), -kInfNorm, 1.0);
  for (const Tensor& g : grads) Tensor(g).mul_(coef.to(g.dtype()).to(g.device()));
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
  check_args(max_norm, norm_type);
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = gradients_of(params);
  if (grads.empty()) return Tensor();
  Tensor total = total_norm(grads, norm_type);
  scale_by_norm(grads, total, max_norm);
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type,
                      bool error_if_nonfinite) {
  check_args(max_norm, norm_type);
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = gradients_of(params);
  if (grads.empty()) return 0.0;
  const Tensor total_t = total_norm(grads, norm_type);
  const double total = total_t.item<double>();
  EMBER_CHECK(
      !error_if_nonfinite || std::isfinite(total), "clip_grad_norm: the total norm of order ",
      norm_type, " of the gradients is non-finite (got ", total,
      "; expected a finite norm, or pass error_if_nonfinite = false to scale by it anyway)");
  scale_by_norm(grads, total_t, max_norm);
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
