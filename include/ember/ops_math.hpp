// ember/ops_math.hpp — issue 32's elementwise math: inverse hyperbolic functions, the gamma
// family (lgamma, digamma, polygamma, mvlgamma), modified Bessel functions, erfcx, sinc, logit,
// the float-bit ops (signbit, copysign, nextafter, ldexp, frexp), log-sum-exp pairs, integer
// and bitwise ops, isclose, and the activations CELU ... RReLU. PyTorch's semantics and
// names; the torch.special names are in ember::special (special::psi, special::i0e, ...), so
// ported code reads the same. Binary ops broadcast and promote like add (Note [Type
// promotion] in src/ops/common.cpp).
//
//   Tensor y = lgamma(x), z = special::xlog1py(x, y);
//   Tensor r = rrelu(x, 1.0 / 8, 1.0 / 3, /*training=*/true);
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "ember/ops.hpp"
#include "ember/tensor.hpp"

namespace ember {

// ---- unary math (float dtypes; computed in f64 and rounded once for the special functions)

/// asinh(x). Example: asinh(full({2}, 1.0))  // [0.8814, 0.8814]
Tensor asinh(const Tensor& x);
/// acosh(x), NaN below 1. Example: acosh(full({2}, 2.0))  // [1.3170, 1.3170]
Tensor acosh(const Tensor& x);
/// atanh(x), ±inf at ±1. Example: atanh(full({2}, 0.5))  // [0.5493, 0.5493]
Tensor atanh(const Tensor& x);
/// log|Γ(x)|; inf at the non-positive integers. Example: lgamma(full({1}, 0.5))  // [0.5724]
Tensor lgamma(const Tensor& x);
/// ψ(x) = d/dx log Γ(x); ∓inf at ±0, NaN at the negative integers.
/// Example: digamma(full({1}, 1.0))  // [-0.5772]
Tensor digamma(const Tensor& x);
/// ψ⁽ⁿ⁾(x), the n-th derivative of digamma (n ≥ 0). Example: polygamma(1, full({1}, 1.0))  //
/// [1.6449] (π²/6)
Tensor polygamma(int64_t n, const Tensor& x);
/// The multivariate log-gamma of dimension p ≥ 1: Σⱼ lgamma(x - j/2) + p(p-1)/4·log π; every
/// element must be above (p - 1)/2. Example: mvlgamma(full({1}, 2.5), 3)  // [1.8810]
Tensor mvlgamma(const Tensor& x, int64_t p);
/// I₀(x), the modified Bessel function of the first kind of order 0.
/// Example: i0(full({1}, 1.0))  // [1.2661]
Tensor i0(const Tensor& x);
/// sin(πx)/(πx), 1 at 0. Example: sinc(full({1}, 0.5))  // [0.6366]
Tensor sinc(const Tensor& x);
/// log(x / (1 - x)), x clamped to [eps, 1 - eps] first when eps is given (the gradient is 0
/// outside). Example: logit(full({1}, 0.25))  // [-1.0986]
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
/// Whether the sign bit is set (bool): true for -0.0 and for a NaN with its sign bit.
/// Example: signbit(full({1}, -0.0))  // [true]
Tensor signbit(const Tensor& x);
/// Rounds toward zero: PyTorch's alias of trunc. Example: fix(full({1}, -1.7))  // [-1]
Tensor fix(const Tensor& x);
/// x = mantissa · 2^exponent with |mantissa| in [0.5, 1) (0, inf and NaN keep themselves, with
/// exponent 0); the exponent is i32. Example: auto [m, e] = frexp(full({1}, 8.0));  // 0.5, 4
std::pair<Tensor, Tensor> frexp(const Tensor& x);

// ---- binary math (broadcast, promote)

/// x·log(y), 0 where x is 0 (unless y is NaN). Example: xlogy(zeros({1}), zeros({1}))  // [0]
Tensor xlogy(const Tensor& x, const Tensor& y);
/// √(a² + b²) without overflow. Example: hypot(full({1}, 3.0), full({1}, 4.0))  // [5]
Tensor hypot(const Tensor& a, const Tensor& b);
/// |a| with the sign of b (-0.0 counts as negative). Example: copysign(ones({1}), full({1},
/// -0.0))  // [-1]
Tensor copysign(const Tensor& a, const Tensor& b);
/// The next representable value after a toward b, in a's dtype (f32, f64; no gradient).
/// Example: nextafter(ones({1}), full({1}, 2.0))  // [1 + 2^-23]
Tensor nextafter(const Tensor& a, const Tensor& b);
/// x · 2^other. Example: ldexp(ones({1}), full({1}, 3.0))  // [8]
Tensor ldexp(const Tensor& x, const Tensor& other);
/// a^b computed in f64 (both operands are cast to f64; so is the result).
/// Example: float_power(full({1}, 2.0, {.dtype = DType::i64}), 0.5)  // [1.4142] f64
Tensor float_power(const Tensor& a, const Tensor& b);
Tensor float_power(const Tensor& a, double b);
/// log(eᵃ + eᵇ), stable. Example: logaddexp(zeros({1}), zeros({1}))  // [0.6931]
Tensor logaddexp(const Tensor& a, const Tensor& b);
/// log₂(2ᵃ + 2ᵇ), stable. Example: logaddexp2(zeros({1}), zeros({1}))  // [1]
Tensor logaddexp2(const Tensor& a, const Tensor& b);
/// 0 where x < 0, values where x == 0, 1 where x > 0 (x and values of one dtype; NaN gives 0).
/// Example: heaviside(full({1}, 0.0), full({1}, 0.5))  // [0.5]
Tensor heaviside(const Tensor& x, const Tensor& values);
/// The greatest common divisor (non-negative; gcd(0, 0) = 0) of integer tensors.
/// Example: gcd(full({1}, 12.0, {.dtype = DType::i64}), full({1}, 18.0, {.dtype = DType::i64}))
/// // [6]
Tensor gcd(const Tensor& a, const Tensor& b);
/// The least common multiple (non-negative; 0 when either is 0) of integer tensors.
/// Example: lcm(a, b) with a = 4, b = 6  // [12]
Tensor lcm(const Tensor& a, const Tensor& b);
/// a & b of integer or bool tensors. Example: bitwise_and(a, b) with a = 12, b = 10  // [8]
Tensor bitwise_and(const Tensor& a, const Tensor& b);
/// a | b of integer or bool tensors. Example: bitwise_or(a, b) with a = 12, b = 10  // [14]
Tensor bitwise_or(const Tensor& a, const Tensor& b);
/// a ^ b of integer or bool tensors. Example: bitwise_xor(a, b) with a = 12, b = 10  // [6]
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
/// ~x of an integer or bool tensor. Example: bitwise_not(a) with a = 12  // [-13]
Tensor bitwise_not(const Tensor& x);
/// a << b of integer tensors; 0 where b is negative or not below the width (PyTorch 2.x).
/// Example: bitwise_left_shift(a, b) with a = 5, b = 2  // [20]
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
/// a >> b (arithmetic) of integer tensors; the sign fills it where b is negative or not below
/// the width (PyTorch 2.x). Example: bitwise_right_shift(a, b) with a = -8, b = 1  // [-4]
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);
/// |a - b| <= atol + rtol·|b| elementwise (bool), or a == b; NaNs equal when equal_nan.
/// a and b of one dtype. Example: isclose(ones({2}), full({2}, 1.0 + 1e-9))  // [true, true]
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
/// Whether isclose holds everywhere. Example: allclose(ones({2}), ones({2}))  // true
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);

// ---- activations (torch.nn.functional's; the modules are in ember/nn/activation.hpp)

/// max(0, x) + min(0, alpha·(e^(x/alpha) - 1)). Example: celu(x, 1.0)
Tensor celu(const Tensor& x, double alpha = 1.0);
/// x / (1 + |x|). Example: softsign(full({1}, 1.0))  // [0.5]
Tensor softsign(const Tensor& x);
/// x where |x| > lambd, 0 elsewhere. Example: hardshrink(full({1}, 0.3))  // [0]
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
/// x - lambd above lambd, x + lambd below -lambd, 0 between (lambd ≥ 0).
/// Example: softshrink(full({1}, 0.75))  // [0.25]
Tensor softshrink(const Tensor& x, double lambd = 0.5);
/// x - tanh(x). Example: tanhshrink(zeros({1}))  // [0]
Tensor tanhshrink(const Tensor& x);
/// x where x > threshold, value elsewhere. Example: threshold(x, 0.1, 20.0)
Tensor threshold(const Tensor& x, double threshold, double value);
/// Randomized leaky ReLU: x where x > 0, a·x elsewhere; in training a is drawn per element from
/// U(lower, upper) with ember's generator (manual_seed makes it repeat) and the gradient uses
/// the drawn slopes; in evaluation a = (lower + upper)/2.
/// Example: rrelu(x, 1.0 / 8, 1.0 / 3, /*training=*/true)
Tensor rrelu(const Tensor& x, double lower = 1.0 / 8, double upper = 1.0 / 3,
             bool training = false);

// ---- torch.special

namespace special {
/// e^-|x|·I₀(x). Example: special::i0e(zeros({1}))  // [1]
Tensor i0e(const Tensor& x);
/// I₁(x), the modified Bessel function of the first kind of order 1.
/// Example: special::i1(ones({1}))  // [0.5652]
Tensor i1(const Tensor& x);
/// e^-|x|·I₁(x). Example: special::i1e(ones({1}))  // [0.2079]
Tensor i1e(const Tensor& x);
/// e^(x²)·erfc(x), accurate where erfc underflows. Example: special::erfcx(zeros({1}))  // [1]
Tensor erfcx(const Tensor& x);
/// x·log1p(y), 0 where x is 0 (unless y is NaN). Example: special::xlog1py(ones({1}),
/// zeros({1}))  // [0]
Tensor xlog1py(const Tensor& x, const Tensor& y);
/// The Hurwitz zeta function ζ(x, q) = Σₖ (q + k)^-x (x > 1; the gradient is q's only, as
/// PyTorch). Example: special::zeta(full({1}, 2.0), ones({1}))  // [1.6449]
Tensor zeta(const Tensor& x, const Tensor& q);
/// -x·log(x) for x > 0, 0 at 0, -inf below. Example: special::entr(full({1}, 0.5))  // [0.3466]
Tensor entr(const Tensor& x);
/// The standard normal CDF Φ(x). Example: special::ndtr(zeros({1}))  // [0.5]
Tensor ndtr(const Tensor& x);
/// Φ⁻¹(p), the standard normal quantile. Example: special::ndtri(full({1}, 0.975))  // [1.9600]
Tensor ndtri(const Tensor& p);
/// log Φ(x), accurate far into the left tail. Example: special::log_ndtr(full({1}, -40.0))  //
/// [-804.6085]
Tensor log_ndtr(const Tensor& x);

// torch.special's names for ember's ops.
/// special::psi = special::digamma = ember::digamma.
inline Tensor digamma(const Tensor& x) { return ember::digamma(x); }
inline Tensor psi(const Tensor& x) { return ember::digamma(x); }
/// special::gammaln = ember::lgamma.
inline Tensor gammaln(const Tensor& x) { return ember::lgamma(x); }
/// special::multigammaln = ember::mvlgamma.
inline Tensor multigammaln(const Tensor& x, int64_t p) { return ember::mvlgamma(x, p); }
/// special::polygamma = ember::polygamma.
inline Tensor polygamma(int64_t n, const Tensor& x) { return ember::polygamma(n, x); }
/// special::i0 = ember::i0.
inline Tensor i0(const Tensor& x) { return ember::i0(x); }
/// special::logit = ember::logit.
inline Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt) {
  return ember::logit(x, eps);
}
/// special::expit = ember::sigmoid.
inline Tensor expit(const Tensor& x) { return ember::sigmoid(x); }
/// special::sinc = ember::sinc.
inline Tensor sinc(const Tensor& x) { return ember::sinc(x); }
/// special::xlogy = ember::xlogy.
inline Tensor xlogy(const Tensor& x, const Tensor& y) { return ember::xlogy(x, y); }
/// special::erf, erfc, erfinv, expm1, exp2, log1p: ember's.
inline Tensor erf(const Tensor& x) { return ember::erf(x); }
inline Tensor erfc(const Tensor& x) { return ember::erfc(x); }
inline Tensor erfinv(const Tensor& x) { return ember::erfinv(x); }
inline Tensor expm1(const Tensor& x) { return ember::expm1(x); }
inline Tensor exp2(const Tensor& x) { return ember::exp2(x); }
inline Tensor log1p(const Tensor& x) { return ember::log1p(x); }
}  // namespace special

}  // namespace ember
