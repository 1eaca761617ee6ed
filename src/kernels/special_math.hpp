// src/kernels/special_math.hpp — the special functions of issue 32's elementwise math (digamma,
// polygamma, the Hurwitz zeta, the modified Bessel functions i0/i1 and their scaled forms,
// erfcx, sinc, ...) and the scalar formulas of their UnaryOp and BinaryOp entries, shared by
// the CPU and CUDA kernels through src/kernels/elementwise.hpp, which includes this header.
//
// The special functions are written here (no library has them on both backends) and
// evaluated in double whatever the tensor's dtype, so f32, f16 and bf16 results are the f64
// result rounded once. Each names its method: a power series where it converges without
// cancellation, an asymptotic expansion where the series would need too many terms, a
// recurrence or reflection between the two.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/backend.hpp"
#include "kernels/common.hpp"

namespace ember::kernels::special {

#if defined(__CUDA_ARCH__)
#define EMBER_SPECIAL_STD_(name) ::name
#else
#define EMBER_SPECIAL_STD_(name) std::name
#endif

inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kInvSqrtPi = 0.56418958354775628695;  // 1/√π
inline constexpr double kInvLn2 = 1.44269504088896340736;     // 1/ln 2
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

EMBER_HD inline bool is_nan(double x) { return x != x; }
EMBER_HD inline double dfloor(double x) { return EMBER_SPECIAL_STD_(floor)(x); }
EMBER_HD inline double dabs(double x) { return EMBER_SPECIAL_STD_(fabs)(x); }
EMBER_HD inline double dexp(double x) { return EMBER_SPECIAL_STD_(exp)(x); }
EMBER_HD inline double dlog(double x) { return EMBER_SPECIAL_STD_(log)(x); }
EMBER_HD inline double dpow(double x, double y) { return EMBER_SPECIAL_STD_(pow)(x, y); }
EMBER_HD inline double dsqrt(double x) { return EMBER_SPECIAL_STD_(sqrt)(x); }

/// log|Γ(x)|. glibc's lgamma writes the sign to the global `signgam`, a data race between the
/// CPU's threads: the host takes the reentrant lgamma_r where the C library has it.
EMBER_HD inline double log_gamma(double x) {
#if !defined(__CUDA_ARCH__) && defined(__GLIBC__)
  int sign = 0;
  return ::lgamma_r(x, &sign);
#else
  return EMBER_SPECIAL_STD_(lgamma)(x);
#endif
}

/// ψ(x), the digamma function: reflection ψ(x) = ψ(1 - x) - π/tan(πx) below 0, the
/// recurrence ψ(x) = ψ(x + 1) - 1/x up to x ≥ 10, then the asymptotic expansion
/// ln x - 1/(2x) - Σ B₂ₖ/(2k x²ᵏ) (seven terms: below 1e-17 relative at x = 10). As PyTorch:
/// ±0 give ∓inf, the negative integers NaN.
EMBER_HD inline double digamma(double x) {
  if (x == 0.0) return EMBER_SPECIAL_STD_(copysign)(kInf, -x);
  if (is_nan(x) || x == -kInf) return kNaN;
  if (x == kInf) return kInf;
  double result = 0.0;
  if (x < 0.0) {
    if (x == dfloor(x)) return kNaN;
    const double r = x - dfloor(x);  // tan(πx) has period 1: reduce first, exactly
    result = -kPi / EMBER_SPECIAL_STD_(tan)(kPi * r);
    x = 1.0 - x;
  }
  while (x < 10.0) {
    result -= 1.0 / x;
    x += 1.0;
  }
  const double z = 1.0 / (x * x);
  const double tail =
      z * (1.0 / 12 - z * (1.0 / 120 -
                           z * (1.0 / 252 -
                                z * (1.0 / 240 - z * (1.0 / 132 - z * (691.0 / 32760 - z / 12))))));
  return result + dlog(x) - 0.5 / x - tail;
}

/// ζ(s, q) = Σₖ (q + k)^-s, the Hurwitz zeta function: the first terms summed until q + k ≥
/// max(10, s), the rest by Euler–Maclaurin: a^(1-s)/(s-1) + a^-s/2 + Σⱼ B₂ⱼ/(2j)! ·
/// s(s+1)…(s+2j-2) · a^(-s-2j+1) (twelve terms). As PyTorch (Cephes' domain): s = 1 gives inf,
/// s < 1 NaN; q a non-positive integer inf, a negative q with a fractional s NaN.
EMBER_HD inline double zeta(double s, double q) {
  if (is_nan(s) || is_nan(q) || q == -kInf) return kNaN;
  if (s == 1.0) return kInf;
  if (s < 1.0) return kNaN;
  if (q <= 0.0) {
    if (q == dfloor(q)) return kInf;
    if (s != dfloor(s)) return kNaN;
    if (q < -1e7) return kNaN;  // the direct sum would take that many terms
  }
  if (q == kInf) return 0.0;
  constexpr double kB2jOverFactorial[12] = {
      0.08333333333333333,    -0.001388888888888889,   3.306878306878307e-05,
      -8.267195767195768e-07, 2.08767569878681e-08,    -5.284190138687493e-10,
      1.3382536530684679e-11, -3.3896802963225827e-13, 8.586062056277845e-15,
      -2.174868698558062e-16, 5.5090028283602295e-18,  -1.3954464685812522e-19};
  double sum = 0.0, a = q;
  while (a < 10.0 || a < s) {
    sum += dpow(a, -s);
    a += 1.0;
  }
  const double a_s = dpow(a, -s);
  sum += a * a_s / (s - 1.0) + 0.5 * a_s;
  double factor = s * a_s / a;  // s(s+1)…(s+2j-2) · a^(-s-2j+1), j = 1
  for (int j = 0; j < 12; ++j) {
    const double term = kB2jOverFactorial[j] * factor;
    sum += term;
    if (dabs(term) <= 1e-17 * dabs(sum)) break;
    factor *= (s + 2 * j + 1) * (s + 2 * j + 2) / (a * a);
  }
  return sum;
}

/// ψ⁽ⁿ⁾(x): digamma for n = 0, (-1)ⁿ⁺¹ n! ζ(n + 1, x) above (n ≥ 0, an integer).
EMBER_HD inline double polygamma(int n, double x) {
  if (n == 0) return digamma(x);
  double factorial = 1.0;
  for (int k = 2; k <= n; ++k) factorial *= k;
  return (n % 2 == 1 ? 1.0 : -1.0) * factorial * zeta(n + 1.0, x);
}

/// I₀(x)·e^-|x| (Scaled) or I₀(x), and the same for I₁ (One): the power series
/// Σ (x²/4)ᵏ / (k!(k+ν)!) · (x/2)^ν (positive terms, no cancellation) for |x| ≤ 30, the
/// asymptotic expansion e^|x|/√(2π|x|) · Σ (-1)ᵏ Πⱼ(4ν² - (2j-1)²) / (k! (8|x|)ᵏ) beyond
/// (its smallest term is below 1e-20 there). I₁ is odd, I₀ even.
template <bool One, bool Scaled>
EMBER_HD inline double bessel_i(double x) {
  if (is_nan(x)) return kNaN;
  const double ax = dabs(x);
  const double sign = (One && x < 0.0) ? -1.0 : 1.0;
  if (ax == kInf) return Scaled ? 0.0 : sign * kInf;
  double value;
  if (ax <= 30.0) {
    const double q = 0.25 * ax * ax;
    double term = One ? 0.5 * ax : 1.0, sum = term;
    for (int k = 1; k < 500; ++k) {
      term *= q / (k * (One ? k + 1.0 : double(k)));
      sum += term;
      if (term <= 1e-17 * sum) break;
    }
    value = Scaled ? sum * dexp(-ax) : sum;
  } else {
    const double four_nu2 = One ? 4.0 : 0.0;
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 60; ++k) {
      const double next = -term * (four_nu2 - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * ax);
      if (dabs(next) >= dabs(term)) break;  // the expansion starts to diverge
      term = next;
      sum += term;
      if (dabs(term) <= 1e-17 * dabs(sum)) break;
    }
    sum /= dsqrt(2.0 * kPi * ax);
    value = Scaled ? sum : sum * dexp(ax);
  }
  return sign * value;
}

/// erfcx(x) = e^(x²)·erfc(x): directly below 26 (erfc is accurate relative to itself there and
/// x² rounds within 1e-13 relative), and the asymptotic expansion
/// 1/(x√π) · (1 - 1/(2x²) + 3/(4x⁴) - 15/(8x⁶) + …) beyond, where erfc underflows.
EMBER_HD inline double erfcx(double x) {
  if (is_nan(x)) return kNaN;
  if (x < 26.0) {
    if (x < -26.7) return kInf;  // e^(x²) overflows; erfc(x) is 2
    return dexp(x * x) * EMBER_SPECIAL_STD_(erfc)(x);
  }
  if (x == kInf) return 0.0;
  const double z = 1.0 / (2.0 * x * x);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 8; ++k) {
    term *= -(2.0 * k - 1) * z;
    sum += term;
  }
  return sum * kInvSqrtPi / x;
}

/// sin(πx)/(πx), 1 at 0.
EMBER_HD inline double sinc(double x) {
  if (x == 0.0) return 1.0;
  const double px = kPi * x;
  return EMBER_SPECIAL_STD_(sin)(px) / px;
}

/// The mantissa of x in [0.5, 1) with x's sign (x itself for 0, inf and NaN).
EMBER_HD inline double frexp_mantissa(double x) {
  int e = 0;
  return EMBER_SPECIAL_STD_(frexp)(x, &e);
}

/// Whether `op` is an entry of this header (its formula is special_unary below).
constexpr bool is_special_unary(backend::UnaryOp op) {
  using U = backend::UnaryOp;
  return op == U::asinh || op == U::acosh || op == U::atanh || op == U::lgamma ||
         op == U::digamma || op == U::polygamma || op == U::i0 || op == U::special_i0e ||
         op == U::special_i1 || op == U::special_i1e || op == U::erfcx || op == U::sinc ||
         op == U::frexp;
}

/// y = Op(x) for the entries of is_special_unary; a: polygamma's order n.
template <typename T, backend::UnaryOp Op>
EMBER_HD inline T special_unary(T x_in, T a) {
  using U = backend::UnaryOp;
  const double x = static_cast<double>(x_in);
  double y;
  if constexpr (Op == U::asinh)
    y = EMBER_SPECIAL_STD_(asinh)(x);
  else if constexpr (Op == U::acosh)
    y = EMBER_SPECIAL_STD_(acosh)(x);
  else if constexpr (Op == U::atanh)
    y = EMBER_SPECIAL_STD_(atanh)(x);
  else if constexpr (Op == U::lgamma)
    y = log_gamma(x);
  else if constexpr (Op == U::digamma)
    y = digamma(x);
  else if constexpr (Op == U::polygamma)
    y = polygamma(static_cast<int>(a), x);
  else if constexpr (Op == U::i0)
    y = bessel_i<false, false>(x);
  else if constexpr (Op == U::special_i0e)
    y = bessel_i<false, true>(x);
  else if constexpr (Op == U::special_i1)
    y = bessel_i<true, false>(x);
  else if constexpr (Op == U::special_i1e)
    y = bessel_i<true, true>(x);
  else if constexpr (Op == U::erfcx)
    y = erfcx(x);
  else if constexpr (Op == U::sinc)
    y = sinc(x);
  else if constexpr (Op == U::frexp)
    y = frexp_mantissa(x);
  else
    static_assert(Op == U::asinh, "unhandled special UnaryOp");
  return static_cast<T>(y);
}

/// The binary entries of this header that read integers only, and those that read floats only
/// (elementwise.hpp's binary_applies asks).
constexpr bool is_integer_binary(backend::BinaryOp op) {
  using B = backend::BinaryOp;
  return op == B::gcd || op == B::lcm || op == B::bitwise_and || op == B::bitwise_or ||
         op == B::bitwise_xor || op == B::bitwise_left_shift || op == B::bitwise_right_shift;
}
constexpr bool is_float_binary(backend::BinaryOp op) {
  using B = backend::BinaryOp;
  return op == B::xlogy || op == B::special_xlog1py || op == B::hypot || op == B::copysign ||
         op == B::nextafter || op == B::logaddexp || op == B::logaddexp2 || op == B::special_zeta;
}
constexpr bool is_special_binary(backend::BinaryOp op) {
  return is_integer_binary(op) || is_float_binary(op);
}

/// gcd(|a|, |b|) in the unsigned type (|MIN| fits there).
template <typename T>
EMBER_HD inline std::make_unsigned_t<T> gcd_of(T a_in, T b_in) {
  using U = std::make_unsigned_t<T>;
  U a = a_in < 0 ? U(0) - U(a_in) : U(a_in), b = b_in < 0 ? U(0) - U(b_in) : U(b_in);
  while (b != 0) {
    const U r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/// Op(a, b) for the entries of is_special_binary (T an integer type for is_integer_binary's,
/// float or double for the others).
template <typename T, backend::BinaryOp Op>
EMBER_HD inline T special_binary(T a, T b) {
  using B = backend::BinaryOp;
  if constexpr (is_integer_binary(Op)) {
    using U = std::make_unsigned_t<T>;
    constexpr T kBits = static_cast<T>(sizeof(T) * 8);
    if constexpr (Op == B::gcd) {
      return static_cast<T>(gcd_of(a, b));
    } else if constexpr (Op == B::lcm) {  // |a / gcd · b|, wrapping as PyTorch's
      const U g = gcd_of(a, b);
      if (g == 0) return T(0);
      const U ua = a < 0 ? U(0) - U(a) : U(a), ub = b < 0 ? U(0) - U(b) : U(b);
      return static_cast<T>(U(ua / g) * ub);
    } else if constexpr (Op == B::bitwise_and) {
      return static_cast<T>(a & b);
    } else if constexpr (Op == B::bitwise_or) {
      return static_cast<T>(a | b);
    } else if constexpr (Op == B::bitwise_xor) {
      return static_cast<T>(a ^ b);
    } else if constexpr (Op == B::bitwise_left_shift) {  // PyTorch 2.x: 0 outside [0, bits)
      return (b < 0 || b >= kBits) ? T(0) : static_cast<T>(U(a) << b);
    } else {  // bitwise_right_shift: arithmetic; the sign fills it outside [0, bits)
      return (b < 0 || b >= kBits) ? (a < 0 ? T(-1) : T(0)) : static_cast<T>(a >> b);
    }
  } else if constexpr (Op == B::nextafter) {  // in T's own precision
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>)
      return ::nextafterf(a, b);
    else
      return ::nextafter(a, b);
#else
    return std::nextafter(a, b);
#endif
  } else {
    const double x = static_cast<double>(a), y = static_cast<double>(b);
    double r;
    if constexpr (Op == B::xlogy || Op == B::special_xlog1py) {  // 0 where x is 0, NaN y aside
      r = is_nan(y)  ? kNaN
          : x == 0.0 ? 0.0
                     : x * (Op == B::xlogy ? dlog(y) : EMBER_SPECIAL_STD_(log1p)(y));
    } else if constexpr (Op == B::hypot) {
      r = EMBER_SPECIAL_STD_(hypot)(x, y);
    } else if constexpr (Op == B::copysign) {
      r = EMBER_SPECIAL_STD_(copysign)(x, y);
    } else if constexpr (Op == B::logaddexp || Op == B::logaddexp2) {
      // max + log(1 + e^-|x-y|); equal infinities give themselves (their difference is NaN).
      const double m = x > y ? x : y;
      if (is_nan(x) || is_nan(y))
        r = kNaN;
      else if (x == y && dabs(x) == kInf)
        r = x;
      else if (Op == B::logaddexp)
        r = m + EMBER_SPECIAL_STD_(log1p)(dexp(-dabs(x - y)));
      else
        r = m + EMBER_SPECIAL_STD_(log1p)(EMBER_SPECIAL_STD_(exp2)(-dabs(x - y))) * kInvLn2;
    } else if constexpr (Op == B::special_zeta) {
      r = zeta(x, y);
    } else {
      static_assert(Op == B::xlogy, "unhandled special BinaryOp");
    }
    return static_cast<T>(r);
  }
}

#undef EMBER_SPECIAL_STD_

}  // namespace ember::kernels::special
