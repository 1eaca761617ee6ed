// src/kernels/softmax.hpp — the softmax family's shared math (src/cpu/softmax.cpp and
// src/cuda/softmax.cu): the [O, D, I] layout around the softmax dim and the per-element
// formulas of the forward and backward, so the two backends cannot drift apart.
//
// Shape letters: the tensor is [O, D, I] — O = product of dims before `dim` (outer),
// D = the softmax dim, I = product of dims after it (inner). Per slice (one o, one i), with m
// the slice's maximum and s = Σ exp(x - m) accumulated in f64:
//   softmax      y = exp(x - m) · (1/s)          grad  gi = y · (g - Σ g·y)
//   log_softmax  y = (x - m) - log s              grad  gi = g - exp(y) · Σ g
//
// Note [16-bit softmax]
// f16 and bf16 tensors are loaded to f32 and computed exactly as f32 tensors are (the same
// slice maxima, f64 sums, f32 roundings), then rounded once on store: the result is the f32
// kernel's result on the widened input, rounded to the 16-bit type once. The backward is the
// same with grad and the forward's (16-bit) output widened. Both backends keep to it (the CPU
// runs its f32 routines on widened slices, CUDA's kernels load with cast<float>), which
// tests/test_half_kernels.cpp checks bitwise.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/index.hpp"

namespace ember::kernels {

/// The tensor around the softmax dim: [outer, size, inner], as the index family's
/// (kernels::layout_of(shape, dim)).
using SoftmaxLayout = IndexLayout;

// Note [log_softmax rounding]: log_softmax is (x - m) - log Σ exp(x - m), in that order. The
// shorter x - (m + log Σ) rounds m + log Σ first: at x ≈ 1e4 an f32 ulp is 1e-3, which the
// result inherits. x - m is exact for the entries that matter (Sterbenz), and log Σ is small.
template <typename C>
EMBER_HD inline C log_softmax_value(C x, C max, C log_sum) {
  return (x - max) - log_sum;
}

/// softmax's input gradient from its output y, the incoming gradient g and dot = Σ g·y.
template <typename C>
EMBER_HD inline C softmax_grad_value(C g, C y, C dot) {
  return y * (g - dot);
}

/// log_softmax's input gradient from exp(y) (y its output), g and sum = Σ g.
template <typename C>
EMBER_HD inline C log_softmax_grad_value(C g, C exp_y, C sum) {
  return g - exp_y * sum;
}

}  // namespace ember::kernels
