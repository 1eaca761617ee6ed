// src/cpu/vec_math.hpp — branch-free float math that the compiler can vectorise.
//
// glibc's expf is a scalar call (~15 cycles per element), which makes exp-heavy kernels
// (exp, sigmoid, silu, softmax) compute-bound far below memory bandwidth. exp_of(float)
// below is a Cephes-style range reduction plus a degree-6 polynomial, written without
// branches so a plain loop over it vectorises. Accuracy: within 2 ulp of expf over the
// whole range, including subnormal results, overflow to inf, underflow to 0 and NaN.
// f64 keeps std::exp (gradcheck wants the reference).
//
// Note [Vectorising under trapping math]
// GCC will not if-convert the clamps below while -ftrapping-math (the default) is on, so
// files whose hot loops call exp_of start with #pragma GCC optimize("no-trapping-math").
// ember never reads floating-point exception flags, so results are unchanged.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ember::cpu {

inline float exp_of(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;       // ln 2 split so k·kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kMaxArg = 88.7228394f;       // above: inf
  constexpr float kMinArg = -103.972084f;      // below: 0
  const float xc = x > kMaxArg ? kMaxArg : (x < kMinArg ? kMinArg : x);
  // Adding 1.5·2^23 rounds to an integer, which lands in the low mantissa bits of t.
  constexpr float kRoundMagic = 12582912.0f;
  constexpr int32_t kRoundMagicBits = 0x4B400000;
  const float t = xc * kLog2e + kRoundMagic;
  const float k = t - kRoundMagic;
  const float r = (xc - k * kLn2Hi) - k * kLn2Lo;  // |r| <= ln2 / 2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  // 2^k in two factors so results down to the subnormal range stay exact (k >= -150).
  const int32_t ki = std::bit_cast<int32_t>(t) - kRoundMagicBits;
  const int32_t k1 = ki >> 1;
  const int32_t k2 = ki - k1;
  const float s1 = std::bit_cast<float>((k1 + 127) << 23);
  const float s2 = std::bit_cast<float>((k2 + 127) << 23);
  float result = y * s1 * s2;
  result = x > kMaxArg ? INFINITY : result;
  result = x < kMinArg ? 0.0f : result;
  return x != x ? x : result;
}

inline double exp_of(double x) { return std::exp(x); }

}  // namespace ember::cpu
