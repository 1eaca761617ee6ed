// src/kernels/rotary.hpp — rotary position embedding's shared math (src/cpu/rotary.cpp and
// src/cuda/rotary.cu): the pair formulas of the forward and its transpose, and the pair space
// both backends loop over, so the two cannot drift apart.
//
// Note [Rotary pairs]
// out = x·cos + rotate_half(x)·sin over the last dim D (even) mixes elements in pairs only:
// element i with i + D/2 (transformers' rotate_half: rotate_half(x) = [-x₂, x₁]), or 2j with
// 2j + 1 when interleaved (GPT-J / Meta). For a pair (a, b) at indices (i, k):
//   out_i = a·cos_i - b·sin_i,   out_k = b·cos_k + a·sin_k
// and its transpose (x's gradient from out's, g):
//   gx_i = g_i·cos_i + g_k·sin_k,  gx_k = g_k·cos_k - g_i·sin_i
// (with Llama's cos and sin, whose halves repeat, this is the forward with -sin). So each
// kernel walks the pair space — x's shape with the last dim halved — and every operand (out,
// x or grad, cos, sin) is seen there through its own strides: the pair's first element at
// stride s of the last dim (rotate_half) or 2s (interleaved), its second `partner` elements
// further on, D/2·s or s. Any strides work (a head-transposed view is read in place; cos and
// sin broadcast with stride 0) and a pair is read once and written once.
// Every product and sum is rounded on its own (no fused multiply-add), in the compute type (f32
// for the 16-bit types, rounded once on store): an f32 result is bitwise the composite
// x·cos + cat(-x₂, x₁)·sin's on each backend.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/backend.hpp"
#include "kernels/common.hpp"

namespace ember::kernels {

/// a·b rounded on its own (never contracted into a fused multiply-add).
template <typename C>
EMBER_HD inline C rotary_mul(C a, C b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>)
    return __fmul_rn(a, b);
  else
    return __dmul_rn(a, b);
#else
  return a * b;  // the CPU file is compiled with fp-contract=off
#endif
}

/// The forward of one pair (a, b) with the cos and sin at its two indices.
template <typename C>
EMBER_HD inline void rotary_pair(C& out_a, C& out_b, C a, C b, C cos_a, C cos_b, C sin_a, C sin_b) {
  out_a = rotary_mul(a, cos_a) - rotary_mul(b, sin_a);
  out_b = rotary_mul(b, cos_b) + rotary_mul(a, sin_b);
}

/// The transpose of rotary_pair: x's gradient at a pair from out's (g_a, g_b).
template <typename C>
EMBER_HD inline void rotary_pair_backward(C& gx_a, C& gx_b, C g_a, C g_b, C cos_a, C cos_b, C sin_a,
                                          C sin_b) {
  gx_a = rotary_mul(g_a, cos_a) + rotary_mul(g_b, sin_b);
  gx_b = rotary_mul(g_b, cos_b) - rotary_mul(g_a, sin_a);
}

/// The pair space of a rotary slot's operands out, in (x or out's gradient), cos and sin, all of
/// one shape [..., D] (Note [Rotary pairs]).
struct RotaryPairs {
  static constexpr int kOperands = 4;
  Shape shape;                   // the operands' shape with the last dim D/2
  Shape strides[kOperands];      // each operand's strides there (elements)
  int64_t partner[kOperands]{};  // from a pair's first element to its second (elements)
};

inline RotaryPairs rotary_pairs(const backend::View& out, const backend::View& in,
                                const backend::View& cos, const backend::View& sin,
                                bool interleaved) {
  const backend::View* const views[RotaryPairs::kOperands] = {&out, &in, &cos, &sin};
  RotaryPairs p;
  const int last = out.shape.size() - 1;
  EMBER_ASSERT(last >= 0 && out.shape[last] % 2 == 0, "rotary_embedding: shape ",
               out.shape.to_string(), " (expected an even last dim)");
  const int64_t half = out.shape[last] / 2;
  p.shape = out.shape;
  p.shape[last] = half;
  for (int k = 0; k < RotaryPairs::kOperands; ++k) {
    const int64_t s = views[k]->strides[last];
    p.strides[k] = views[k]->strides;
    p.strides[k][last] = interleaved ? 2 * s : s;
    p.partner[k] = interleaved ? s : half * s;
  }
  return p;
}

}  // namespace ember::kernels
