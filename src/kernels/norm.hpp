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

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

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

// Note [Batch norm's per-channel arithmetic in one kernel]
// Between batch norm's statistics and its affine (and between the backward's sums and its dx),
// the op works on [C] vectors: 1/√(var + eps), the scale and shift of the affine, the running
// statistics' update; in the backward the three coefficients of dx and the parameters'
// gradients. Built from tensor ops that was about a dozen kernels each way per layer, each a
// launch of a few microseconds on a few hundred values (ResNet-50's 53 layers: over a thousand
// launches a step, ~4 ms of device time on an H100). Here each way is one kernel (a thread per
// channel on CUDA, a loop on the CPU) with the same formulas in the same order, each product and
// sum rounded apart (no contraction into fma: the CPU and the GPU give the same bits).
template <typename P>
EMBER_HD inline P bn_mul(P a, P b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(P) == 4)
    return __fmul_rn(a, b);
  else
    return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
template <typename P>
EMBER_HD inline P bn_add(P a, P b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(P) == 4)
    return __fadd_rn(a, b);
  else
    return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
/// 1/√x, both correctly rounded (the CPU's and the GPU's bits agree).
template <typename P>
EMBER_HD inline P bn_rsqrt(P x) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(P) == 4)
    return __fdiv_rn(1.0f, __fsqrt_rn(x));
  else
    return __ddiv_rn(1.0, __dsqrt_rn(x));
#else
  return P(1) / std::sqrt(x);
#endif
}

/// One channel of batch_norm_prepare (backend::BatchNormPrepare): w, b: the weight and bias
/// (null: 1 and 0); rm, rv: the running statistics, updated in place (null: no update).
template <typename P>
struct BatchNormChannel {
  P invstd, scale, shift;
};

template <typename P>
EMBER_HD inline BatchNormChannel<P> batch_norm_channel(P mean, P var, const P* w, const P* b, P* rm,
                                                       P* rv, double eps, double momentum,
                                                       double unbias) {
  BatchNormChannel<P> r;
  r.invstd = bn_rsqrt(bn_add(var, static_cast<P>(eps)));
  r.scale = w ? bn_mul(r.invstd, *w) : r.invstd;
  r.shift = -bn_mul(mean, r.scale);
  if (b) r.shift = bn_add(r.shift, *b);
  if (rm && rv) {
    const P keep = static_cast<P>(1.0 - momentum), take = static_cast<P>(momentum);
    *rm = bn_add(bn_mul(*rm, keep), bn_mul(mean, take));
    *rv = bn_add(bn_mul(*rv, keep), bn_mul(var, static_cast<P>(momentum * unbias)));
  }
  return r;
}

/// One channel of batch_norm_backward_prepare: dx = g·scale_g + x·scale_x + shift.
template <typename P>
struct BatchNormBackwardChannel {
  P scale_g, scale_x, shift;
};

template <typename P>
EMBER_HD inline BatchNormBackwardChannel<P> batch_norm_backward_channel(P sum_g, P sum_gx, P mean,
                                                                        P invstd, const P* w,
                                                                        double inv_m,
                                                                        bool training) {
  BatchNormBackwardChannel<P> r;
  r.scale_g = w ? bn_mul(*w, invstd) : invstd;
  r.scale_x = P(0);
  r.shift = P(0);
  if (training) {
    const P im = static_cast<P>(inv_m);
    r.scale_x = -bn_mul(bn_mul(r.scale_g, bn_mul(invstd, invstd)), bn_mul(sum_gx, im));
    r.shift = bn_add(-bn_mul(mean, r.scale_x), -bn_mul(r.scale_g, bn_mul(sum_g, im)));
  }
  return r;
}

/// One element of channel_affine (backend::ChannelAffine), computed in P (16-bit data widened
/// exactly) and rounded to T: `av` already gated, `bv` with `sb` only when has_b, `res` only
/// when has_res. Cast: the backend's T <-> P conversion.
template <typename T, typename P, typename Cast>
EMBER_HD inline T channel_affine_element(P av, P sa, bool has_b, P bv, P sb, P shift, bool has_res,
                                         P res, bool relu, Cast cast_to_t) {
  P v = bn_mul(av, sa);
  if (has_b) v = bn_add(v, bn_mul(bv, sb));
  T out = cast_to_t(bn_add(v, shift));
  if (has_res) out = cast_to_t(bn_add(static_cast<P>(out), res));
  if (relu && static_cast<P>(out) < P(0)) out = cast_to_t(P(0));
  return out;
}

/// a where gate > 0, else a·0 (ReLU's backward: its bits, NaN and the sign of 0 kept).
///
/// Note [A gate without a branch]
/// On the host both are computed and the gate picks between their bits: a compiler keeps
/// `gate > 0 ? a : a·0` as a branch (it will not speculate the product, which could raise a
/// floating-point exception), and a ReLU's gate is positive for about half the elements at
/// random, so the branch mispredicted half the time (the fused batch norm's backward reduce on
/// the CPU took 12 ms for 2M elements, 2.6 with the bits picked).
template <typename P>
EMBER_HD inline P gated(P a, P gate) {
#if defined(__CUDA_ARCH__)
  return gate > P(0) ? a : bn_mul(a, P(0));
#else
  using U = std::conditional_t<sizeof(P) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(P) == sizeof(U), "gated: f32 or f64");
  const U keep = U(0) - static_cast<U>(gate > P(0));  // all ones where the gate is open
  const P closed = bn_mul(a, P(0));
  return std::bit_cast<P>((std::bit_cast<U>(a) & keep) | (std::bit_cast<U>(closed) & ~keep));
#endif
}

}  // namespace ember::kernels
