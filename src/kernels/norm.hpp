// src/kernels/norm.hpp — layer norm's shared math (src/cpu/norm.cpp and src/cuda/norm.cu): the
// per-row statistics and the per-element formulas of the forward and backward, so the two
// backends cannot drift apart.
//
// Shape letters: x, y, grad_x, grad_y are [rows, n]; weight w and bias b are [n]. Per row, in
// the compute type C (below), with the row sums in f64:
//   mean = Σx / n,  rstd = 1/√(Σ(x - mean)² / n + eps),  x̂ = (x - mean)·rstd,  y = x̂·w + b
//   grad_x = rstd·(gw - a - x̂·c),  gw = grad_y·w,  a = Σgw / n,  c = Σgw·x̂ / n
//   grad_w = Σ_rows grad_y·x̂,  grad_b = Σ_rows grad_y  (column sums)
// An absent weight is w = 1 and an absent bias b = 0 (x̂·1 + 0 is x̂ exactly).
//
// Note [RMS norm is layer norm without the mean]
// rms_norm is the same row computation with mean = 0 and no bias: rstd = 1/√(Σx² / n + eps),
// x̂ = x·rstd, y = x̂·w, grad_x = rstd·(gw - x̂·c) (a = 0: the mean's gradient is gone), grad_w as
// above. The kernels take the kind as a template parameter (NormKind) and skip the mean, a and
// the bias for rms; x - 0 and gw - 0 are exact, so every other rounding is layer norm's, and the
// 16-bit rules below hold for both.
//
// Note [16-bit layer norm]
// x of dtype T in f32, f64, f16 or bf16 computes in C = Compute<T> (f32 for the 16-bit types,
// T otherwise); the weight and bias share one dtype P, which is T or, for a 16-bit T, f32 (as
// PyTorch's mixed-type layer norm). A 16-bit kernel loads x, grad_y, w and b to f32 and does
// exactly what the f32 kernel does — the same f64 row sums in the same order, the same f32
// roundings — then rounds y and grad_x to T once on store; mean and rstd (saved for the
// backward) stay f32; the column sums for grad_w and grad_b accumulate as the f32 kernel's do
// and are rounded to P once. So a 16-bit result is the f32 kernel's result on the widened
// inputs, rounded once (tests/test_half_kernels.cpp checks it bitwise on each backend). On CUDA
// that takes the f32 kernel's choices too: a register row's packs hold 4 elements for both
// (8-byte loads for the 16-bit types), and the backward's grids, which group the rows into
// column-sum partials, are sized by the f32 kernel's occupancy (Note [Layer norm on CUDA]). (A
// 16-bit view not aligned to 8 bytes takes 1-element packs where a fresh f32 copy of it takes
// 4: its row sums then add in another order — the same math, other f64 roundings.)
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common.hpp"

namespace ember::kernels {

/// Which normalisation a row kernel computes (Note [RMS norm is layer norm without the mean]).
enum class NormKind { layer, rms };

/// The dtype an input of dtype `x` computes in, and mean and rstd are kept in: f32 for f16/bf16.
inline DType layer_norm_compute_dtype(DType x) {
  return x == DType::f16 || x == DType::bf16 ? DType::f32 : x;
}

/// Calls f(Tag<C>{}) when the parameters' dtype `p` is the input's compute dtype, else
/// f(Tag<T>{}) (p is the 16-bit input's own dtype). T and C: the backend's type of the input's
/// dtype `x` and its compute type. Both backends' slots dispatch their weight type with it.
template <typename T, typename C, typename F>
void dispatch_layer_norm_param(DType p, DType x, F&& f) {
  const DType compute = layer_norm_compute_dtype(x);
  if (p == compute) return f(Tag<C>{});
  EMBER_ASSERT(p == x, "layer_norm: parameters of dtype ", dtype_name(p), " for an input of dtype ",
               dtype_name(x), " (expected ", dtype_name(x), " or ", dtype_name(compute), ")");
  f(Tag<T>{});
}

/// rstd from the f64 sum of squared deviations (from the mean, or from 0 for rms_norm) of a row
/// of n values.
EMBER_HD inline double layer_norm_rstd(double sq_dev_sum, int64_t n, double eps) {
#if defined(__CUDA_ARCH__)
  return 1.0 / ::sqrt(sq_dev_sum / static_cast<double>(n) + eps);
#else
  return 1.0 / std::sqrt(sq_dev_sum / static_cast<double>(n) + eps);
#endif
}

/// x̂ = (x - mean)·rstd.
template <typename C>
EMBER_HD inline C layer_norm_normalized(C x, C mean, C rstd) {
  return (x - mean) * rstd;
}

/// y = x̂·w + b.
template <typename C>
EMBER_HD inline C layer_norm_affine(C h, C w, C b) {
  return h * w + b;
}

/// y = x̂·w (rms_norm: no bias).
template <typename C>
EMBER_HD inline C rms_norm_scale(C h, C w) {
  return h * w;
}

/// grad_x = rstd·(gw - a - x̂·c) with gw = grad_y·w and the row means a, c (rms_norm: a = 0).
template <typename C>
EMBER_HD inline C layer_norm_grad_x(C gw, C a, C h, C c, C rstd) {
  return rstd * (gw - a - h * c);
}

}  // namespace ember::kernels
