// src/kernels/optim.hpp — the optimizer family's shared math: the per-step scalars of every
// fused update, computed once in f64 and rounded to the parameter's type, and the
// per-element updates (the *_element functions below) of Adam/AdamW, SGD and the elementwise
// optimizers of optim_step_multi (RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam), written
// once here for both backends. Each update takes the backend's
// rounding policy R — static mul, add, div, sqrt, fma and max, each rounded once (the CPU's
// plain operators under fp-contract=off with std::fma, CUDA's __fmul_rn ... intrinsics) —
// so both backends run the same operations in the same order and an f32 step gives the
// same bits on each. The order is torch.optim's single-tensor code, with PyTorch's fused
// multiply-adds where its CPU kernels have them (Note [Fused multiply-add] in
// src/cpu/optim.cpp): x.add_(y, alpha=a) is fma(y, a, x), x.addcmul_(y, z, value=v) is
// fma(v·y, z, x), x.addcdiv_(y, z, value=v) is x + (v·y) / z.
#pragma once

#include <cmath>
#include <type_traits>

#include "backend/backend.hpp"
#include "kernels/common.hpp"

namespace ember::kernels {

template <typename T>
struct AdamScalars {
  T sign, weight_decay, beta1, one_minus_beta1, beta2, one_minus_beta2;
  T bias_correction2_sqrt, eps, neg_step_size, decay;
  bool l2, amsgrad;  // Adam with weight decay (not AdamW); keep the running max of v
};

// Note [Skipped steps]
// A GradScaler step whose gradients hold an inf or NaN is skipped on the device: the fused
// Adam and SGD kernels read *found_inf (AdamArgs/SgdArgs::found_inf) and return at once when it
// is set, so no host sync decides it and a captured step replays it. PyTorch does not count a
// skipped step (optimizer.step() is not called), while the host's step counts here advance on
// every call; the optimizer's device counter *skipped_steps (added to by amp_update_scale)
// says how many were skipped, and the per-step scalars come from the effective step
// step - *skipped_steps. With skipped_steps set, CUDA computes them on the device (these
// functions are EMBER_HD) from the staged args, the CPU on the host from the counter it reads.
// The counter is per optimizer: it is exact when every parameter steps from the first step
// on (a parameter whose first gradient comes after a skipped step would see it subtracted).

/// f64 pow and sqrt for the scalar functions both backends run.
EMBER_HD inline double scalar_pow(double a, double b) {
#if defined(__CUDA_ARCH__)
  return ::pow(a, b);
#else
  return std::pow(a, b);
#endif
}
EMBER_HD inline double scalar_sqrt(double a) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(a);
#else
  return std::sqrt(a);
#endif
}

/// The scalars of Adam step `a.step - skipped` (bias corrections from the step count; `skipped`
/// is *a.skipped_steps where set, Note [Skipped steps]).
template <typename T>
EMBER_HD AdamScalars<T> adam_scalars(const backend::AdamArgs& a, int64_t skipped = 0) {
  const double t = static_cast<double>(a.step - skipped);
  const double bias_correction1 = 1.0 - scalar_pow(a.beta1, t);
  const double bias_correction2 = 1.0 - scalar_pow(a.beta2, t);
  const double step_size = a.lr / bias_correction1;
  return {.sign = T(a.maximize ? -1 : 1),
          .weight_decay = T(a.weight_decay),
          .beta1 = T(a.beta1),
          .one_minus_beta1 = T(1.0 - a.beta1),
          .beta2 = T(a.beta2),
          .one_minus_beta2 = T(1.0 - a.beta2),
          .bias_correction2_sqrt = T(scalar_sqrt(bias_correction2)),
          .eps = T(a.eps),
          .neg_step_size = T(-step_size),
          .decay = T(a.decoupled_weight_decay ? 1.0 - a.lr * a.weight_decay : 1.0),
          .l2 = !a.decoupled_weight_decay && a.weight_decay != 0.0,
          .amsgrad = a.amsgrad};
}

template <typename T>
struct SgdScalars {
  T sign, weight_decay, momentum, one_minus_dampening, neg_lr;
  bool l2, use_momentum, first, nesterov;
};

/// The scalars of one SGD step (`skipped`: as adam_scalars; the momentum buffer starts at the
/// first step not skipped).
template <typename T>
EMBER_HD SgdScalars<T> sgd_scalars(const backend::SgdArgs& a, int64_t skipped = 0) {
  return {.sign = T(a.maximize ? -1 : 1),
          .weight_decay = T(a.weight_decay),
          .momentum = T(a.momentum),
          .one_minus_dampening = T(1.0 - a.dampening),
          .neg_lr = T(-a.lr),
          .l2 = a.weight_decay != 0.0,
          .use_momentum = a.momentum != 0.0,
          .first = a.first_step || (a.skipped_steps != nullptr && a.step - skipped == 1),
          .nesterov = a.nesterov};
}

/// Which branches of Adam's element update run. The CPU passes compile-time constants (its
/// loops are instantiated per combination and fold the branches away); CUDA passes the
/// scalars' own flags.
struct AdamFlags {
  bool l2, amsgrad;
};

/// Adam's moments for one element (torch.optim.adam._single_tensor_adam; AdamW has no L2 term):
///   g = -g if maximize;  g = fma(p, wd, g) (l2)
///   m = fma(g, 1-β1, m·β1);  v = fma((1-β2)·g, g, v·β2);  amsgrad: v_max = max(v_max, v)
/// Returns the second moment the denominator uses (v, or v_max with amsgrad).
template <typename R, typename T>
EMBER_HD inline T adam_moments_element(T p, T g, T& m, T& v, T* vmax, AdamFlags f,
                                       const AdamScalars<T>& s) {
  T gi = R::mul(g, s.sign);
  if (f.l2) gi = R::fma(p, s.weight_decay, gi);
  const T mi = R::fma(gi, s.one_minus_beta1, R::mul(m, s.beta1));
  const T vi = R::fma(R::mul(s.one_minus_beta2, gi), gi, R::mul(v, s.beta2));
  m = mi;
  v = vi;
  if (!f.amsgrad) return vi;
  const T old = *vmax;
  const T top = (old >= vi || old != old) ? old : vi;  // torch.maximum: NaN wins
  *vmax = top;
  return top;
}

/// Adam's parameter update from m and the square root of the second moment:
///   denom = root / sqrt(1-β2^t) + eps;  p = p·decay + (-(lr / (1-β1^t))·m) / denom
/// (decay = 1 - lr·wd for AdamW, else 1).
template <typename R, typename T>
EMBER_HD inline void adam_param_element(T& p, T m, T root, const AdamScalars<T>& s) {
  const T denom = R::add(R::div(root, s.bias_correction2_sqrt), s.eps);
  p = R::add(R::mul(p, s.decay), R::div(R::mul(s.neg_step_size, m), denom));
}

/// One element of an Adam step: the moments, the root, the parameter. (The CPU runs the two
/// halves in separate vector loops around a block of square roots: Note [Blocked Adam].)
template <typename R, typename T>
EMBER_HD inline void adam_element(T& p, T g, T& m, T& v, T* vmax, const AdamScalars<T>& s) {
  const T second = adam_moments_element<R>(p, g, m, v, vmax, AdamFlags{s.l2, s.amsgrad}, s);
  adam_param_element<R>(p, m, R::sqrt(second), s);
}

/// Which branches of SGD's element update run (as AdamFlags).
struct SgdFlags {
  bool l2, momentum, first, nesterov;
};

/// One element of an SGD step (torch.optim.sgd._single_tensor_sgd):
///   g = -g if maximize;  g = fma(p, wd, g) (l2)
///   momentum: buf = g on the first step, else buf = fma(g, 1-dampening, buf·μ);
///             g = fma(buf, μ, g) (nesterov), else g = buf
///   p = fma(g, -lr, p)
template <typename R, typename T>
EMBER_HD inline void sgd_element(T& p, T g, T* buf, SgdFlags f, const SgdScalars<T>& s) {
  T gi = R::mul(g, s.sign);
  if (f.l2) gi = R::fma(p, s.weight_decay, gi);
  if (f.momentum) {
    const T bi = f.first ? gi : R::fma(gi, s.one_minus_dampening, R::mul(*buf, s.momentum));
    *buf = bi;
    gi = f.nesterov ? R::fma(bi, s.momentum, gi) : bi;
  }
  p = R::fma(gi, s.neg_lr, p);
}

/// torch._amp_update_scale_'s rule (both backends): found: scale *= backoff, tracker = 0;
/// else tracker += 1, and at growth_interval scale *= growth where the product is finite,
/// tracker = 0. The products are taken in f64 and rounded to f32, as PyTorch's kernels do.
EMBER_HD inline void amp_update_scale_rule(float& scale, int32_t& tracker, bool found,
                                           double growth_factor, double backoff_factor,
                                           int64_t growth_interval) {
  if (found) {
    scale = static_cast<float>(static_cast<double>(scale) * backoff_factor);
    tracker = 0;
    return;
  }
  const int32_t successful = tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(scale) * growth_factor);
    if (grown - grown == 0.0f) scale = grown;  // finite (inf - inf and NaN - NaN are NaN)
    tracker = 0;
  } else {
    tracker = successful;
  }
}

// ---- the elementwise optimizers of optim_step_multi ----

/// Per-step scalars of an OptimAlgo, in the parameter's type (computed in f64 first, as
/// Python computes them, then rounded as PyTorch rounds a Python scalar to the tensor's type).
template <typename T>
struct OptimScalars {
  T sign;                    // -1 with maximize
  T weight_decay;            // used when l2
  T alpha, one_minus_alpha;  // RMSprop alpha / Adadelta rho / beta1, and 1 - it
  T beta2, one_minus_beta2;
  T eps, momentum;
  T neg_lr;                 // -lr; Adagrad: -lr/(1+(t-1)·lr_decay); Adamax: -lr/(1-β1^t)
  T lr;                     // RAdam
  T bias_correction;        // NAdam: 1-β2^t; RAdam: 1-β1^t
  T bias_correction2_sqrt;  // RAdam: sqrt(1-β2^t)
  T rect;                   // RAdam: the variance rectification term (when rectified)
  T grad_step, avg_step;    // NAdam: -lr(1-μ_t)/(1-Πμ), -lr·μ_{t+1}/(1-Πμ·μ_{t+1})
  bool l2, centered, use_momentum, rectified;
};

using backend::nadam_mu;

template <typename T>
OptimScalars<T> optim_scalars(const backend::OptimArgs& a) {
  using backend::OptimAlgo;
  const double t = static_cast<double>(a.step);
  OptimScalars<T> s{};
  s.sign = T(a.maximize ? -1 : 1);
  s.weight_decay = T(a.weight_decay);
  s.l2 = a.weight_decay != 0.0;
  s.alpha = T(a.alpha);
  s.one_minus_alpha = T(1 - a.alpha);
  s.beta2 = T(a.beta2);
  s.one_minus_beta2 = T(1 - a.beta2);
  s.eps = T(a.eps);
  s.momentum = T(a.momentum);
  s.use_momentum = a.momentum > 0;
  s.centered = a.centered;
  s.neg_lr = T(-a.lr);
  s.lr = T(a.lr);
  switch (a.algo) {
    case OptimAlgo::rmsprop:
    case OptimAlgo::adadelta: break;
    case OptimAlgo::adagrad: s.neg_lr = T(-(a.lr / (1 + (t - 1) * a.lr_decay))); break;
    case OptimAlgo::adamax: s.neg_lr = T(-(a.lr / (1 - std::pow(a.alpha, t)))); break;
    case OptimAlgo::nadam: {
      const double mu = nadam_mu(a.alpha, a.momentum_decay, t);
      const double mu_next = nadam_mu(a.alpha, a.momentum_decay, t + 1);
      // torch keeps mu_product in a float32 0-d tensor: mu_product * mu * mu_next in float.
      const float product = static_cast<float>(a.mu_product);
      const float product_next = (product * static_cast<float>(mu)) * static_cast<float>(mu_next);
      s.bias_correction = T(1 - std::pow(a.beta2, t));
      s.grad_step = T(-a.lr * (1. - mu) / (1. - static_cast<double>(product)));
      s.avg_step = T(-a.lr * mu_next / (1. - static_cast<double>(product_next)));
      break;
    }
    case OptimAlgo::radam: {
      const double bias_correction1 = 1 - std::pow(a.alpha, t);
      const double bias_correction2 = 1 - std::pow(a.beta2, t);
      const double rho_inf = 2 / (1 - a.beta2) - 1;
      const double rho_t = rho_inf - 2 * t * std::pow(a.beta2, t) / bias_correction2;
      s.bias_correction = T(bias_correction1);
      s.bias_correction2_sqrt = T(std::sqrt(bias_correction2));
      s.rectified = rho_t > 5.;
      if (s.rectified)
        s.rect = T(std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                             ((rho_inf - 4) * (rho_inf - 2) * rho_t)));
      break;
    }
  }
  return s;
}

/// The gradient an update uses: negated with maximize, plus weight_decay · p (L2).
template <typename R, typename T>
EMBER_HD inline T optim_grad(T p, T g, const OptimScalars<T>& s) {
  T gi = R::mul(g, s.sign);
  if (s.l2) gi = R::fma(p, s.weight_decay, gi);
  return gi;
}

/// RMSprop (torch.optim.rmsprop._single_tensor_rmsprop):
///   v = fma((1-α)·g, g, v·α);  centered: ḡ = fma(g, 1-α, ḡ·α), avg = sqrt(fma(-ḡ, ḡ, v))
///   else avg = sqrt(v);  avg += eps
///   momentum: buf = buf·μ + g / avg, p = fma(buf, -lr, p);  else p = p + (-lr·g) / avg
template <typename R, typename T>
EMBER_HD inline void rmsprop_element(T& p, T g, T& square_avg, T* grad_avg, T* buf,
                                     const OptimScalars<T>& s) {
  const T gi = optim_grad<R>(p, g, s);
  const T v = R::fma(R::mul(s.one_minus_alpha, gi), gi, R::mul(square_avg, s.alpha));
  square_avg = v;
  T avg;
  if (s.centered) {
    const T mean = R::fma(gi, s.one_minus_alpha, R::mul(*grad_avg, s.alpha));
    *grad_avg = mean;
    avg = R::sqrt(R::fma(-mean, mean, v));
  } else {
    avg = R::sqrt(v);
  }
  avg = R::add(avg, s.eps);
  if (s.use_momentum) {
    const T b = R::add(R::mul(*buf, s.momentum), R::div(gi, avg));
    *buf = b;
    p = R::fma(b, s.neg_lr, p);
  } else {
    p = R::add(p, R::div(R::mul(s.neg_lr, gi), avg));
  }
}

/// Adagrad: sum = fma(g, g, sum);  p = p + (-clr·g) / (sqrt(sum) + eps),
/// clr = lr / (1 + (t-1)·lr_decay).
template <typename R, typename T>
EMBER_HD inline void adagrad_element(T& p, T g, T& sum, const OptimScalars<T>& s) {
  const T gi = optim_grad<R>(p, g, s);
  const T acc = R::fma(gi, gi, sum);
  sum = acc;
  p = R::add(p, R::div(R::mul(s.neg_lr, gi), R::add(R::sqrt(acc), s.eps)));
}

/// Adadelta: v = fma((1-ρ)·g, g, v·ρ);  δ = sqrt(u + eps) / sqrt(v + eps) · g;
///   u = fma((1-ρ)·δ, δ, u·ρ);  p = fma(δ, -lr, p).
template <typename R, typename T>
EMBER_HD inline void adadelta_element(T& p, T g, T& square_avg, T& acc_delta,
                                      const OptimScalars<T>& s) {
  const T gi = optim_grad<R>(p, g, s);
  const T v = R::fma(R::mul(s.one_minus_alpha, gi), gi, R::mul(square_avg, s.alpha));
  square_avg = v;
  const T std_dev = R::sqrt(R::add(v, s.eps));
  const T delta = R::mul(R::div(R::sqrt(R::add(acc_delta, s.eps)), std_dev), gi);
  acc_delta = R::fma(R::mul(s.one_minus_alpha, delta), delta, R::mul(acc_delta, s.alpha));
  p = R::fma(delta, s.neg_lr, p);
}

/// Adamax: m = fma(g, 1-β1, m·β1);  u = max(u·β2, |g| + eps) (NaN wins, as torch.amax);
///   p = p + (-clr·m) / u,  clr = lr / (1-β1^t).
template <typename R, typename T>
EMBER_HD inline void adamax_element(T& p, T g, T& exp_avg, T& exp_inf, const OptimScalars<T>& s) {
  const T gi = optim_grad<R>(p, g, s);
  const T m = R::fma(gi, s.one_minus_alpha, R::mul(exp_avg, s.alpha));
  exp_avg = m;
  const T decayed = R::mul(exp_inf, s.beta2);
  const T fresh = R::add(gi < T(0) ? -gi : gi, s.eps);
  const T u = (decayed != decayed || decayed > fresh) ? decayed : fresh;
  exp_inf = u;
  p = R::add(p, R::div(R::mul(s.neg_lr, m), u));
}

/// NAdam: m = fma(g, 1-β1, m·β1);  v = fma((1-β2)·g, g, v·β2);  d = sqrt(v / (1-β2^t)) + eps;
///   p = p + (grad_step·g) / d;  p = p + (avg_step·m) / d.
template <typename R, typename T>
EMBER_HD inline void nadam_element(T& p, T g, T& exp_avg, T& exp_avg_sq, const OptimScalars<T>& s) {
  const T gi = optim_grad<R>(p, g, s);
  const T m = R::fma(gi, s.one_minus_alpha, R::mul(exp_avg, s.alpha));
  const T v = R::fma(R::mul(s.one_minus_beta2, gi), gi, R::mul(exp_avg_sq, s.beta2));
  exp_avg = m;
  exp_avg_sq = v;
  const T denom = R::add(R::sqrt(R::div(v, s.bias_correction)), s.eps);
  const T q = R::add(p, R::div(R::mul(s.grad_step, gi), denom));
  p = R::add(q, R::div(R::mul(s.avg_step, m), denom));
}

/// RAdam: m = fma(g, 1-β1, m·β1);  v = fma((1-β2)·g, g, v·β2);  m̂ = m / (1-β1^t);
///   rectified (ρ_t > 5): p -= m̂·lr · (sqrt(1-β2^t) / (sqrt(v) + eps)) · rect;  else p -= m̂·lr.
template <typename R, typename T>
EMBER_HD inline void radam_element(T& p, T g, T& exp_avg, T& exp_avg_sq, const OptimScalars<T>& s) {
  const T gi = optim_grad<R>(p, g, s);
  const T m = R::fma(gi, s.one_minus_alpha, R::mul(exp_avg, s.alpha));
  const T v = R::fma(R::mul(s.one_minus_beta2, gi), gi, R::mul(exp_avg_sq, s.beta2));
  exp_avg = m;
  exp_avg_sq = v;
  T step = R::mul(R::div(m, s.bias_correction), s.lr);
  if (s.rectified) {
    const T adaptive = R::div(s.bias_correction2_sqrt, R::add(R::sqrt(v), s.eps));
    step = R::mul(R::mul(step, adaptive), s.rect);
  }
  p = R::add(p, -step);
}

/// Runs the update of kAlgo on element i of a slot's buffers (p, g, state[0..2]); backends
/// pick kAlgo once per call (with_optim_algo), so the loop has no switch.
template <backend::OptimAlgo kAlgo, typename R, typename T>
EMBER_HD inline void optim_element(T* p, const T* g, T* s0, T* s1, T* s2, int64_t i,
                                   const OptimScalars<T>& s) {
  using backend::OptimAlgo;
  if constexpr (kAlgo == OptimAlgo::rmsprop)
    rmsprop_element<R>(p[i], g[i], s0[i], s.centered ? s1 + i : nullptr,
                       s.use_momentum ? s2 + i : nullptr, s);
  else if constexpr (kAlgo == OptimAlgo::adagrad)
    adagrad_element<R>(p[i], g[i], s0[i], s);
  else if constexpr (kAlgo == OptimAlgo::adadelta)
    adadelta_element<R>(p[i], g[i], s0[i], s1[i], s);
  else if constexpr (kAlgo == OptimAlgo::adamax)
    adamax_element<R>(p[i], g[i], s0[i], s1[i], s);
  else if constexpr (kAlgo == OptimAlgo::nadam)
    nadam_element<R>(p[i], g[i], s0[i], s1[i], s);
  else
    radam_element<R>(p[i], g[i], s0[i], s1[i], s);
}

/// Calls f(std::integral_constant<OptimAlgo, algo>{}).
template <typename F>
void with_optim_algo(backend::OptimAlgo algo, F&& f) {
  using backend::OptimAlgo;
  switch (algo) {
    case OptimAlgo::rmsprop: f(std::integral_constant<OptimAlgo, OptimAlgo::rmsprop>{}); return;
    case OptimAlgo::adagrad: f(std::integral_constant<OptimAlgo, OptimAlgo::adagrad>{}); return;
    case OptimAlgo::adadelta: f(std::integral_constant<OptimAlgo, OptimAlgo::adadelta>{}); return;
    case OptimAlgo::adamax: f(std::integral_constant<OptimAlgo, OptimAlgo::adamax>{}); return;
    case OptimAlgo::nadam: f(std::integral_constant<OptimAlgo, OptimAlgo::nadam>{}); return;
    case OptimAlgo::radam: f(std::integral_constant<OptimAlgo, OptimAlgo::radam>{}); return;
  }
}

/// Whether `algo` with args `a` reads and writes OptimSlot::state[i].
inline bool optim_uses_state(const backend::OptimArgs& a, int i) {
  using backend::OptimAlgo;
  if (i == 0) return true;
  switch (a.algo) {
    case OptimAlgo::rmsprop: return i == 1 ? a.centered : a.momentum > 0;
    case OptimAlgo::adagrad: return false;
    default: return i == 1;
  }
}

}  // namespace ember::kernels
