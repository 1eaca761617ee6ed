// src/kernels/elementwise.hpp — the scalar math of the elementwise family, shared by the CPU
// (src/cpu/unary.cpp, binary.cpp) and CUDA (src/cuda/elementwise.cu) kernels: one formula per
// UnaryOp and BinaryOp (PyTorch's, including the derivative helpers backward rules use), and
// the visitors that turn a runtime op into a compile-time one.
//
// The unary formulas take a math policy `M` for the transcendental functions, because the
// backends evaluate them differently: the CPU with its vectorisable exp_of / tanh_of / erf_of
// (src/cpu/vec_math.hpp, within 1-2 ulp), CUDA with the device math library. A policy is a
// struct of static functions on T: its own exp, log, log1p, tanh, erf, sqrt, abs and pow,
// and the rest of the math library from StdMath, which both policies derive from.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "backend/backend.hpp"
#include "kernels/common.hpp"
#include "kernels/special_math.hpp"

namespace ember::kernels {

using backend::BinaryOp;
using backend::UnaryOp;

inline constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/√2
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/√(2π)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // √(2/π)
inline constexpr double kGeluKappa = 0.044715;
inline constexpr double kSeluScale = 1.0507009873554804934;  // PyTorch's SELU constants
inline constexpr double kSeluAlpha = 1.6732632423543772848;

// ---- the standard math library, the same on both backends ----

/// erfinv on the host (the C++ library has none): Giles' single-precision approximation
/// ("Approximating the erfinv function", GPU Computing Gems, 2011) as the start, then two
/// Newton steps on erf(y) = x in double, so f64 results are exact to a few ulp.
inline double erfinv_host(double x) {
  if (!(x > -1.0 && x < 1.0)) {
    if (x == 1.0) return std::numeric_limits<double>::infinity();
    if (x == -1.0) return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * x;
  for (int i = 0; i < 2; ++i) {  // d erf(y)/dy = 2/√π · exp(-y²)
    const double step = (std::erf(y) - x) / (1.1283791670955126 * std::exp(-y * y));
    if (!std::isfinite(step)) break;
    y -= step;
  }
  return y;
}

#if defined(__CUDA_ARCH__)
#define EMBER_STD_MATH_(name) ::name
#else
#define EMBER_STD_MATH_(name) std::name
#endif
#define EMBER_STD_MATH_FN_(name)     \
  template <typename T>              \
  EMBER_HD static T name(T x) {      \
    return EMBER_STD_MATH_(name)(x); \
  }

/// The functions both backends take straight from the math library (<cmath> on the host,
/// CUDA's device math, which overloads the same names for float and double). The backends'
/// policies (HostMath, DeviceMath) derive from it and add their own exp, tanh, erf, ...
struct StdMath {
  EMBER_STD_MATH_FN_(sin)
  EMBER_STD_MATH_FN_(cos)
  EMBER_STD_MATH_FN_(tan)
  EMBER_STD_MATH_FN_(asin)
  EMBER_STD_MATH_FN_(acos)
  EMBER_STD_MATH_FN_(atan)
  EMBER_STD_MATH_FN_(sinh)
  EMBER_STD_MATH_FN_(cosh)
  EMBER_STD_MATH_FN_(floor)
  EMBER_STD_MATH_FN_(ceil)
  EMBER_STD_MATH_FN_(rint)  // round half to even, as torch.round
  EMBER_STD_MATH_FN_(trunc)
  EMBER_STD_MATH_FN_(expm1)
  EMBER_STD_MATH_FN_(log2)
  EMBER_STD_MATH_FN_(log10)
  EMBER_STD_MATH_FN_(exp2)
  EMBER_STD_MATH_FN_(erfc)
  template <typename T>
  EMBER_HD static T atan2(T y, T x) {
    return EMBER_STD_MATH_(atan2)(y, x);
  }
  template <typename T>
  EMBER_HD static T fmod(T x, T y) {
    return EMBER_STD_MATH_(fmod)(x, y);
  }
  template <typename T>
  EMBER_HD static T erfinv(T x) {
#if defined(__CUDA_ARCH__)
    return ::erfinv(x);
#else
    return static_cast<T>(erfinv_host(static_cast<double>(x)));
#endif
  }
};

#undef EMBER_STD_MATH_FN_
#undef EMBER_STD_MATH_

// ---- unary ----

// Stable without a branch: for x << 0 exp(-x) overflows to inf and 1/inf = 0.
template <typename M, typename T>
EMBER_HD inline T sigmoid_of(T x) {
  return T(1) / (T(1) + M::exp(-x));
}

template <typename T>
EMBER_HD inline T gelu_tanh_inner(T x) {
  return T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x);
}

/// y = Op(x) with the scalar arguments a, b (affine: x·a + b; pow_scalar: x^a; clamp and
/// clamp_mask: [a, b]).
template <typename M, typename T, UnaryOp Op>
EMBER_HD inline T unary_apply(T x, T a, T b) {
  if constexpr (Op == UnaryOp::neg)
    return -x;
  else if constexpr (Op == UnaryOp::abs)
    return M::abs(x);
  else if constexpr (Op == UnaryOp::sqrt)
    return M::sqrt(x);
  else if constexpr (Op == UnaryOp::rsqrt)
    return T(1) / M::sqrt(x);
  else if constexpr (Op == UnaryOp::square)
    return x * x;
  else if constexpr (Op == UnaryOp::exp)
    return M::exp(x);
  else if constexpr (Op == UnaryOp::log)
    return M::log(x);
  else if constexpr (Op == UnaryOp::sign)
    return T((T(0) < x) - (x < T(0)));
  else if constexpr (Op == UnaryOp::relu)
    return x < T(0) ? T(0) : x;
  else if constexpr (Op == UnaryOp::sigmoid)
    return sigmoid_of<M>(x);
  else if constexpr (Op == UnaryOp::tanh)
    return M::tanh(x);
  else if constexpr (Op == UnaryOp::gelu_erf)
    return T(0.5) * x * (T(1) + M::erf(x * T(kSqrt1_2)));
  else if constexpr (Op == UnaryOp::gelu_tanh)
    return T(0.5) * x * (T(1) + M::tanh(gelu_tanh_inner(x)));
  else if constexpr (Op == UnaryOp::silu)
    return x * sigmoid_of<M>(x);
  else if constexpr (Op == UnaryOp::softplus)  // a = beta, b = threshold (PyTorch's)
    return x * a > b ? x : M::log1p(M::exp(x * a)) / a;
  else if constexpr (Op == UnaryOp::leaky_relu)  // a = negative_slope
    return x > T(0) ? x : x * a;
  else if constexpr (Op == UnaryOp::elu)  // a = alpha
    return x > T(0) ? x : a * M::expm1(x);
  else if constexpr (Op == UnaryOp::selu)
    return T(kSeluScale) * (x > T(0) ? x : T(kSeluAlpha) * M::expm1(x));
  else if constexpr (Op == UnaryOp::mish)  // x·tanh(softplus(x)), softplus linear above 20
    return x * M::tanh(x > T(20) ? x : M::log1p(M::exp(x)));
  else if constexpr (Op == UnaryOp::hardswish)
    return x <= T(-3) ? T(0) : (x >= T(3) ? x : x * (x + T(3)) / T(6));
  else if constexpr (Op == UnaryOp::hardsigmoid)
    return x <= T(-3) ? T(0) : (x >= T(3) ? T(1) : x / T(6) + T(0.5));
  else if constexpr (Op == UnaryOp::logsigmoid)  // min(x, 0) - log1p(exp(-|x|)), stable
    return (x < T(0) ? x : T(0)) - M::log1p(M::exp(-M::abs(x)));
  else if constexpr (Op == UnaryOp::sin)
    return M::sin(x);
  else if constexpr (Op == UnaryOp::cos)
    return M::cos(x);
  else if constexpr (Op == UnaryOp::tan)
    return M::tan(x);
  else if constexpr (Op == UnaryOp::asin)
    return M::asin(x);
  else if constexpr (Op == UnaryOp::acos)
    return M::acos(x);
  else if constexpr (Op == UnaryOp::atan)
    return M::atan(x);
  else if constexpr (Op == UnaryOp::sinh)
    return M::sinh(x);
  else if constexpr (Op == UnaryOp::cosh)
    return M::cosh(x);
  else if constexpr (Op == UnaryOp::floor)
    return M::floor(x);
  else if constexpr (Op == UnaryOp::ceil)
    return M::ceil(x);
  else if constexpr (Op == UnaryOp::round)
    return M::rint(x);
  else if constexpr (Op == UnaryOp::trunc)
    return M::trunc(x);
  else if constexpr (Op == UnaryOp::frac)
    return x - M::trunc(x);
  else if constexpr (Op == UnaryOp::log1p)
    return M::log1p(x);
  else if constexpr (Op == UnaryOp::expm1)
    return M::expm1(x);
  else if constexpr (Op == UnaryOp::log2)
    return M::log2(x);
  else if constexpr (Op == UnaryOp::log10)
    return M::log10(x);
  else if constexpr (Op == UnaryOp::exp2)
    return M::exp2(x);
  else if constexpr (Op == UnaryOp::reciprocal)
    return T(1) / x;
  else if constexpr (Op == UnaryOp::erf)
    return M::erf(x);
  else if constexpr (Op == UnaryOp::erfc)
    return M::erfc(x);
  else if constexpr (Op == UnaryOp::erfinv)
    return M::erfinv(x);
  else if constexpr (Op == UnaryOp::affine)
    return x * a + b;
  else if constexpr (Op == UnaryOp::pow_scalar)  // exact shortcuts for the common exponents
    return a == T(2) ? x * x : a == T(1) ? x : a == T(-1) ? T(1) / x : M::pow(x, a);
  else if constexpr (Op == UnaryOp::clamp) {
    const T y = x < a ? a : x;  // NaN passes through both comparisons
    return y > b ? b : y;
  } else if constexpr (Op == UnaryOp::relu_grad)
    return x > T(0) ? T(1) : T(0);
  else if constexpr (Op == UnaryOp::gelu_erf_grad) {
    const T cdf = T(0.5) * (T(1) + M::erf(x * T(kSqrt1_2)));
    const T pdf = T(kInvSqrt2Pi) * M::exp(T(-0.5) * x * x);
    return cdf + x * pdf;
  } else if constexpr (Op == UnaryOp::gelu_tanh_grad) {
    const T t = M::tanh(gelu_tanh_inner(x));
    const T inner_grad = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluKappa) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * inner_grad;
  } else if constexpr (Op == UnaryOp::silu_grad) {
    const T s = sigmoid_of<M>(x);
    return s * (T(1) + x * (T(1) - s));
  } else if constexpr (Op == UnaryOp::clamp_mask)
    return (a <= x && x <= b) ? T(1) : T(0);
  else if constexpr (special::is_special_unary(Op))  // src/kernels/special_math.hpp
    return special::special_unary<T, Op>(x, a);
  else
    static_assert(Op == UnaryOp::neg, "unhandled UnaryOp");
}

/// Calls f(std::integral_constant<UnaryOp, op>{}) for every op with a formula above
/// (everything but logical_not, which writes bool); false for the others. The cases come from
/// the catalogue, so an op added there without a formula trips unary_apply's static_assert.
template <typename F>
bool visit_unary(UnaryOp op, F&& f) {
  switch (op) {
#define EMBER_UNARY_CASE_(name, ...) \
  case UnaryOp::name: f(std::integral_constant<UnaryOp, UnaryOp::name>{}); return true;
    EMBER_OPS_UNARY(EMBER_UNARY_CASE_)
    EMBER_UNARY_KERNEL_ONLY(EMBER_UNARY_CASE_)
#undef EMBER_UNARY_CASE_
    case UnaryOp::logical_not:
    case UnaryOp::count: break;
  }
  return false;
}

// ---- binary ----

/// The comparisons and the logical ops read any T and write bool (backend.hpp).
using backend::is_comparison;

/// What Op(T, T) writes: bool for comparisons and logical ops, T otherwise.
template <typename T, BinaryOp Op>
using BinaryResult = std::conditional_t<is_comparison(Op), bool, T>;

/// Integer + - * wrap around like PyTorch's (two's complement) instead of being UB.
template <typename T>
EMBER_HD inline T wrap(T a, T b, BinaryOp op) {
  using U = std::make_unsigned_t<T>;
  const U x = static_cast<U>(a), y = static_cast<U>(b);
  return static_cast<T>(op == BinaryOp::add ? U(x + y) : op == BinaryOp::sub ? U(x - y) : U(x * y));
}

/// Op(a, b); pow takes the policy's pow (floating T only).
template <typename M, typename T, BinaryOp Op>
EMBER_HD inline BinaryResult<T, Op> binary_apply(T a, T b) {
  constexpr bool kInt = std::is_integral_v<T>;
  if constexpr (Op == BinaryOp::add || Op == BinaryOp::sub || Op == BinaryOp::mul) {
    if constexpr (kInt)
      return wrap(a, b, Op);
    else if constexpr (Op == BinaryOp::add)
      return a + b;
    else if constexpr (Op == BinaryOp::sub)
      return a - b;
    else
      return a * b;
  } else if constexpr (Op == BinaryOp::div) {
    if constexpr (kInt) {
      // Truncating division; x/0 gives 0 and MIN/-1 wraps instead of trapping.
      if (b == 0) return T(0);
      if (b == T(-1)) return wrap(T(0), a, BinaryOp::sub);
      return a / b;
    } else {
      return a / b;
    }
  } else if constexpr (Op == BinaryOp::pow) {
    return M::pow(a, b);
  } else if constexpr (Op == BinaryOp::atan2) {
    return M::atan2(a, b);
  } else if constexpr (Op == BinaryOp::fmod) {  // the sign of the dividend, as C's fmod
    return M::fmod(a, b);
  } else if constexpr (Op == BinaryOp::remainder) {  // the sign of the divisor, as Python's %
    const T r = M::fmod(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
  } else if constexpr (Op == BinaryOp::maximum) {
    if constexpr (kInt)
      return a > b ? a : b;
    else
      return a != a ? a : (a > b ? a : b);  // NaN in either operand propagates
  } else if constexpr (Op == BinaryOp::minimum) {
    if constexpr (kInt)
      return a < b ? a : b;
    else
      return a != a ? a : (a < b ? a : b);
  } else if constexpr (Op == BinaryOp::eq)
    return a == b;
  else if constexpr (Op == BinaryOp::ne)
    return a != b;
  else if constexpr (Op == BinaryOp::lt)
    return a < b;
  else if constexpr (Op == BinaryOp::le)
    return a <= b;
  else if constexpr (Op == BinaryOp::gt)
    return a > b;
  else if constexpr (Op == BinaryOp::ge)
    return a >= b;
  else if constexpr (Op == BinaryOp::logical_and)  // NaN counts as true, as in PyTorch
    return a != T(0) && b != T(0);
  else if constexpr (Op == BinaryOp::logical_or)
    return a != T(0) || b != T(0);
  else if constexpr (Op == BinaryOp::logical_xor)
    return (a != T(0)) != (b != T(0));
  else if constexpr (Op == BinaryOp::relu_backward)  // the bits of a · (b > 0 ? 1 : 0)
    return b > T(0) ? a : a * T(0);
  else if constexpr (Op == BinaryOp::gelu_tanh_backward)  // Note [Activation backward in one]
    return a * unary_apply<M, T, UnaryOp::gelu_tanh_grad>(b, T(0), T(0));
  else if constexpr (Op == BinaryOp::gelu_erf_backward)
    return a * unary_apply<M, T, UnaryOp::gelu_erf_grad>(b, T(0), T(0));
  else if constexpr (Op == BinaryOp::silu_backward)
    return a * unary_apply<M, T, UnaryOp::silu_grad>(b, T(0), T(0));
  else if constexpr (special::is_special_binary(Op))  // src/kernels/special_math.hpp
    return special::special_binary<T, Op>(a, b);
  else
    static_assert(Op == BinaryOp::add, "unhandled BinaryOp");
}

/// Whether BinaryOp `op` applies to T: the arithmetic ops for numeric T (pow, atan2, fmod and
/// remainder for floating T only; gcd, lcm and the bitwise ops for i32 and i64 only), the
/// comparisons and logical ops for every T.
template <typename T>
constexpr bool binary_applies(BinaryOp op) {
  if (special::is_integer_binary(op)) return std::is_integral_v<T> && std::is_signed_v<T>;
  if (special::is_float_binary(op)) return !std::is_integral_v<T>;
  const bool float_only = op == BinaryOp::pow || op == BinaryOp::atan2 || op == BinaryOp::fmod ||
                          op == BinaryOp::remainder || op == BinaryOp::gelu_tanh_backward ||
                          op == BinaryOp::gelu_erf_backward || op == BinaryOp::silu_backward;
  return !float_only || !std::is_integral_v<T>;  // the 16-bit float types are not integral
}

/// Calls f(std::integral_constant<BinaryOp, op>{}) when `op` applies to T; false otherwise.
/// The cases come from the catalogue (an op added there without a formula fails the build).
template <typename T, typename F>
bool visit_binary(BinaryOp op, F&& f) {
  switch (op) {
#define EMBER_BINARY_CASE_(name, ...)                        \
  case BinaryOp::name:                                       \
    if constexpr (binary_applies<T>(BinaryOp::name)) {       \
      f(std::integral_constant<BinaryOp, BinaryOp::name>{}); \
      return true;                                           \
    }                                                        \
    return false;
    EMBER_OPS_BINARY(EMBER_BINARY_CASE_)
    EMBER_BINARY_KERNEL_ONLY(EMBER_BINARY_CASE_)
#undef EMBER_BINARY_CASE_
    case BinaryOp::count: break;
  }
  return false;
}

/// The element types comparisons read: f32, f64, the backend's 16-bit floats (Half, BFloat),
/// i32, i64, and u8 for both u8 and bool (one byte, 0 or 1). `backend` names the backend in
/// the error for anything else.
template <typename Half, typename BFloat, typename F>
void dispatch_comparison(DType t, const char* backend, F&& f) {
  switch (t) {
    case DType::f32: return f(Tag<float>{});
    case DType::f64: return f(Tag<double>{});
    case DType::f16: return f(Tag<Half>{});
    case DType::bf16: return f(Tag<BFloat>{});
    case DType::i32: return f(Tag<int32_t>{});
    case DType::i64: return f(Tag<int64_t>{});
    case DType::u8:
    case DType::boolean: return f(Tag<uint8_t>{});
    default: break;
  }
  EMBER_ASSERT(false, "binary: the ", backend, " comparisons support every dtype (got ",
               dtype_name(t), ")");
}

/// The binary slot of both backends up to its loop: checks the views' dtypes (internal: the
/// op promoted them), then calls run(Tag<T>{}, std::integral_constant<BinaryOp, op>{}) for
/// the input type T (u8 for bool comparisons; `Half`, `BFloat`: the backend's 16-bit floats).
/// `backend` ("CPU", "CUDA") names the kernel.
template <typename Half, typename BFloat, typename Run>
void dispatch_binary(BinaryOp op, const backend::View& out, const backend::View& a,
                     const backend::View& b, const char* backend, Run&& run) {
  EMBER_ASSERT(a.dtype == b.dtype, "binary: input dtypes differ");
  if (is_comparison(op)) {
    EMBER_ASSERT(out.dtype == DType::boolean, "binary: comparisons write bool");
  } else {
    EMBER_ASSERT(out.dtype == a.dtype, "binary: output dtype differs from the inputs'");
  }
  auto typed = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool known = visit_binary<T>(op, [&](auto c) { run(tag, c); });
    EMBER_ASSERT(known, "binary: pow, atan2, fmod and remainder support floats only (got ",
                 dtype_name(a.dtype), ")");
  };
  if (is_comparison(op))
    dispatch_comparison<Half, BFloat>(a.dtype, backend, typed);
  else
    dispatch_arithmetic<Half, BFloat>(a.dtype, "binary", backend, typed);
}

}  // namespace ember::kernels
