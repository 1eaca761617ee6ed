// src/cpu/vec_math.hpp — branch-free float math that the compiler can vectorise.
//
// glibc's expf/tanhf/erff are scalar calls (15-40 cycles per element), which makes
// exp-heavy kernels (exp, sigmoid, silu, softmax, tanh, GELU) compute-bound far below
// memory bandwidth. The f32 functions below are written without branches (both sides of
// a split are computed and one is selected) so plain loops over them vectorise:
//   exp_of  — Cephes range reduction + degree-6 polynomial; within 1 ulp of expf over the
//             whole range, including subnormal results, overflow to inf, 0 and NaN;
//   tanh_of — Cephes: odd polynomial below |x| = 0.625, 1 - 2/(e^{2|x|} + 1) above;
//   erf_of  — Taylor series below |x| = 0.5, the Numerical Recipes erfc fit (relative
//             error < 1.2e-7) above; both within a few ulp.
// f64 keeps libm (gradcheck wants the reference).
//
// Note [Vectorising under trapping math]
// GCC will not if-convert the clamps below while -ftrapping-math (the default) is on, so
// files whose hot loops call exp_of start with #pragma GCC optimize("no-trapping-math").
// ember never reads floating-point exception flags, so results are unchanged.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/elementwise.hpp"

namespace ember::cpu {

inline float exp_of(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so k·kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kMaxArg = 88.7228394f;   // above: inf
  constexpr float kMinArg = -103.972084f;  // below: 0
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

inline float tanh_of(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float large = 1.0f - 2.0f / (exp_of(2.0f * ax) + 1.0f);  // e = inf gives 1
  const float signed_large = x < 0.0f ? -large : large;
  return ax < 0.625f ? small : signed_large;  // NaN takes the second branch and stays NaN
}

inline double tanh_of(double x) { return std::tanh(x); }

inline float erf_of(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  // erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)), n <= 6: error < 1e-9 for |x| < 0.5
  float p = 1.2055332981789664e-4f;
  p = p * z - 8.548327023450853e-4f;
  p = p * z + 5.223977625442188e-3f;
  p = p * z - 2.6866170645131252e-2f;
  p = p * z + 1.1283791670955126e-1f;
  p = p * z - 3.7612638903183754e-1f;
  p = p * z + 1.1283791670955126f;
  const float small = x * p;
  const float t = 1.0f / (1.0f + 0.5f * ax);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  q = q * t - 1.26551223f;
  const float erfc = t * exp_of(q - z);
  const float large = 1.0f - erfc;
  const float signed_large = x < 0.0f ? -large : large;
  return ax < 0.5f ? small : signed_large;
}

inline double erf_of(double x) { return std::erf(x); }

/// The CPU's math as the policy of the shared elementwise formulas
/// (src/kernels/elementwise.hpp): exp, tanh and erf are the vectorisable versions above; the
/// rest of <cmath> comes from kernels::StdMath.
struct HostMath : kernels::StdMath {
  template <typename T>
  static T exp(T x) {
    return exp_of(x);
  }
  template <typename T>
  static T log(T x) {
    return std::log(x);
  }
  template <typename T>
  static T log1p(T x) {
    return std::log1p(x);
  }
  template <typename T>
  static T tanh(T x) {
    return tanh_of(x);
  }
  template <typename T>
  static T erf(T x) {
    return erf_of(x);
  }
  template <typename T>
  static T sqrt(T x) {
    return std::sqrt(x);
  }
  template <typename T>
  static T abs(T x) {
    return std::abs(x);
  }
  template <typename T>
  static T pow(T x, T y) {
    return std::pow(x, y);
  }
};

}  // namespace ember::cpu
