// src/kernels/optim.hpp — the optimizer family's shared math: the per-step scalars of the
// fused Adam/AdamW and SGD updates, computed once on the host in f64 and rounded to the
// parameter's type, exactly as both backends' kernels consume them (src/cpu/optim.cpp
// holds the formulas in torch's order; src/cuda/optim.cu follows them).
#pragma once

#include <cmath>

#include "backend/backend.hpp"

namespace ember::kernels {

template <typename T>
struct AdamScalars {
  T sign, weight_decay, beta1, one_minus_beta1, beta2, one_minus_beta2;
  T bias_correction2_sqrt, eps, neg_step_size, decay;
  bool l2, amsgrad;  // Adam with weight decay (not AdamW); keep the running max of v
};

/// The scalars of Adam step `a.step` (bias corrections from the step count).
template <typename T>
AdamScalars<T> adam_scalars(const backend::AdamArgs& a) {
  const double t = static_cast<double>(a.step);
  const double bias_correction1 = 1.0 - std::pow(a.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(a.beta2, t);
  const double step_size = a.lr / bias_correction1;
  return {.sign = T(a.maximize ? -1 : 1),
          .weight_decay = T(a.weight_decay),
          .beta1 = T(a.beta1),
          .one_minus_beta1 = T(1.0 - a.beta1),
          .beta2 = T(a.beta2),
          .one_minus_beta2 = T(1.0 - a.beta2),
          .bias_correction2_sqrt = T(std::sqrt(bias_correction2)),
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

/// The scalars of one SGD step.
template <typename T>
SgdScalars<T> sgd_scalars(const backend::SgdArgs& a) {
  return {.sign = T(a.maximize ? -1 : 1),
          .weight_decay = T(a.weight_decay),
          .momentum = T(a.momentum),
          .one_minus_dampening = T(1.0 - a.dampening),
          .neg_lr = T(-a.lr),
          .l2 = a.weight_decay != 0.0,
          .use_momentum = a.momentum != 0.0,
          .first = a.first_step,
          .nesterov = a.nesterov};
}

}  // namespace ember::kernels
