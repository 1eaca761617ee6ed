// src/ops/elementwise_math.cpp — issue 32's elementwise math (include/ember/ops_math.hpp): the
// special functions and binary ops that have a kernel entry (their formulas are
// src/kernels/special_math.hpp), each with its backward right below, and the composites built
// from them and from ember's other ops (mvlgamma, logit, signbit, ldexp, frexp's exponent, the
// activations, the normal distribution's functions), whose gradients come from the primitives.
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "ember/ops_math.hpp"
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace ops {
// Defined in src/ops/elementwise.cpp: a unary kernel's op (dtype check, dispatch) and the
// broadcasting binary one (operands of one dtype, after ops::promote).
Tensor unary_forward(Op op, backend::UnaryOp kernel, const Tensor& x, double a, double b);
Tensor binary_forward(Op op, const Tensor& a, const Tensor& b);
}  // namespace ops

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLogPi = 1.14472988584940017414;
using ops::kLn2;
constexpr double kSqrt1_2 = 0.70710678118654752440;  // 1/√2
using ops::kTwoOverSqrtPi;
constexpr double kSqrt2Pi = 2.50662827463100050242;  // √(2π)
using ops::kInf;
using ops::scalar_like;

// A unary op of a kernel entry: its gradient is g · derivative(x, y) from the saved input and
// output. `a` is the kernel's scalar (polygamma's order).
template <typename D>
Tensor unary_math(Op op, const Tensor& x, D derivative, double a = 0.0) {
  Tensor out = ops::unary_forward(op, backend::unary_kernel(op), x, a, 0.0);
  if (autograd::needs_grad(x))
    autograd::record(
        op, out, {&x},
        [sx = SavedTensor(x), so = SavedTensor(out), derivative](const Tensor& g, GradList& gi) {
          gi[0] = mul(g, derivative(sx.get(), so.get()));
        });
  return out;
}

// Which of a binary op's inputs want a gradient.
struct Inputs {
  bool a = false, b = false;
};

// A binary op of a kernel entry, promoted first; grads(g, a, b, out, want, gi) fills the
// gradients of the inputs that `want` names.
template <typename G>
Tensor binary_math(Op op, const Tensor& a_in, const Tensor& b_in, G grads) {
  const auto [a, b] = ops::promote(op, a_in, b_in);
  Tensor out = ops::binary_forward(op, a, b);
  if (autograd::needs_grad(a, b)) {
    const Inputs want{a.requires_grad(), b.requires_grad()};
    autograd::record(
        op, out, {&a, &b},
        [want, sa = SavedTensor(a), sb = SavedTensor(b), so = SavedTensor(out), grads](
            const Tensor& g, GradList& gi) { grads(g, sa.get(), sb.get(), so.get(), want, gi); });
  }
  return out;
}

Tensor no_grads(Op op, const Tensor& a, const Tensor& b) {
  const auto [pa, pb] = ops::promote(op, a, b);
  return ops::binary_forward(op, pa, pb);
}

Tensor one_minus(const Tensor& x) { return add(neg(x), 1.0); }

}  // namespace

// ---- unary math

Tensor asinh(const Tensor& x) {
  return unary_math(Op::asinh, x,
                    [](const Tensor& v, const Tensor&) { return rsqrt(add(square(v), 1.0)); });
}
Tensor acosh(const Tensor& x) {
  return unary_math(Op::acosh, x,
                    [](const Tensor& v, const Tensor&) { return rsqrt(add(square(v), -1.0)); });
}
Tensor atanh(const Tensor& x) {
  return unary_math(Op::atanh, x, [](const Tensor& v, const Tensor&) {
    return reciprocal(one_minus(square(v)));
  });
}
Tensor lgamma(const Tensor& x) {
  return unary_math(Op::lgamma, x, [](const Tensor& v, const Tensor&) { return digamma(v); });
}
Tensor digamma(const Tensor& x) {
  return unary_math(Op::digamma, x, [](const Tensor& v, const Tensor&) { return polygamma(1, v); });
}
Tensor polygamma(int64_t n, const Tensor& x) {
  EMBER_CHECK(n >= 0 && n <= 100, op_name(Op::polygamma), ": order n = ", n,
              " (expected 0 <= n <= 100)");
  return unary_math(
      Op::polygamma, x, [n](const Tensor& v, const Tensor&) { return polygamma(n + 1, v); },
      static_cast<double>(n));
}
Tensor i0(const Tensor& x) {
  return unary_math(Op::i0, x, [](const Tensor& v, const Tensor&) { return special::i1(v); });
}
Tensor sinc(const Tensor& x) {
  // d/dx sin(πx)/(πx) = (cos(πx) - sinc(x)) / x, 0 at 0.
  return unary_math(Op::sinc, x, [](const Tensor& v, const Tensor& y) {
    const Tensor zero = eq(v, 0.0);
    const Tensor safe = where(zero, ones_like(v), v);
    return where(zero, zeros_like(v), div(sub(cos(mul(safe, kPi)), y), safe));
  });
}

Tensor special::i0e(const Tensor& x) {  // d/dx e^-|x| I₀ = e^-|x| I₁ - sign(x) · e^-|x| I₀
  return unary_math(Op::special_i0e, x, [](const Tensor& v, const Tensor& y) {
    return sub(special::i1e(v), mul(sign(v), y));
  });
}
Tensor special::i1(const Tensor& x) {  // I₁' = I₀ - I₁/x, 1/2 at 0
  return unary_math(Op::special_i1, x, [](const Tensor& v, const Tensor& y) {
    const Tensor zero = eq(v, 0.0);
    const Tensor safe = where(zero, ones_like(v), v);
    return where(zero, full_like(v, 0.5), sub(ember::i0(v), div(y, safe)));
  });
}
Tensor special::i1e(const Tensor& x) {  // (e^-|x| I₁)' = e^-|x| I₀ - e^-|x| I₁ (sign(x) + 1/x)
  return unary_math(Op::special_i1e, x, [](const Tensor& v, const Tensor& y) {
    const Tensor zero = eq(v, 0.0);
    const Tensor safe = where(zero, ones_like(v), v);
    return where(zero, full_like(v, 0.5),
                 sub(special::i0e(v), mul(y, add(sign(v), reciprocal(safe)))));
  });
}
Tensor special::erfcx(const Tensor& x) {  // erfcx' = 2x·erfcx(x) - 2/√π
  return unary_math(Op::erfcx, x, [](const Tensor& v, const Tensor& y) {
    return add(mul(mul(v, y), 2.0), -kTwoOverSqrtPi);
  });
}

Tensor mvlgamma(const Tensor& x, int64_t p) {
  const ops::UserOp user(Op::mvlgamma, {&x});
  ops::check_defined(op_name(Op::mvlgamma), x);
  ops::check_supported(Op::mvlgamma, x);
  EMBER_CHECK(p >= 1, op_name(Op::mvlgamma), ": p = ", p, " (expected p >= 1)");
  const double bound = (static_cast<double>(p) - 1.0) / 2.0;
  EMBER_CHECK(x.numel() == 0 || all(gt(x.detach(), bound)).item<bool>(), op_name(Op::mvlgamma),
              ": every element must be greater than (p - 1)/2 = ", bound, " (p = ", p, ")");
  Tensor out = lgamma(x);
  for (int64_t j = 1; j < p; ++j) out = add(out, lgamma(add(x, -0.5 * static_cast<double>(j))));
  return add(out, static_cast<double>(p) * static_cast<double>(p - 1) / 4.0 * kLogPi);
}

Tensor logit(const Tensor& x, std::optional<double> eps) {
  const ops::UserOp user(Op::logit, {&x});
  ops::check_defined(op_name(Op::logit), x);
  ops::check_supported(Op::logit, x);
  const Tensor v = eps ? clamp(x, *eps, 1.0 - *eps) : x;
  return sub(log(v), log1p(neg(v)));  // log x - log(1 - x), accurate near 0
}

Tensor signbit(const Tensor& x) {
  const ops::UserOp user(Op::signbit, {&x});
  ops::check_defined(op_name(Op::signbit), x);
  ops::check_supported(Op::signbit, x);
  const Tensor v = x.detach();
  if (!is_floating(v.dtype())) return lt(v, 0.0);
  return lt(copysign(ones_like(v), v), 0.0);  // -0.0 and a negative NaN included
}

Tensor fix(const Tensor& x) {
  const ops::UserOp user(Op::fix, {&x});
  ops::check_defined(op_name(Op::fix), x);
  ops::check_supported(Op::fix, x);
  return trunc(x);
}

std::pair<Tensor, Tensor> frexp(const Tensor& x) {
  Tensor mantissa = ops::unary_forward(Op::frexp, backend::UnaryOp::frexp, x, 0.0, 0.0);
  // x / mantissa is the power of two exactly, so its log2 is the exponent exactly; 0 for 0,
  // inf and NaN (whose mantissa is themselves), as PyTorch.
  const Tensor v = x.detach();
  const Tensor regular = logical_and(isfinite(v), ne(v, 0.0));
  const Tensor power = where(regular, div(v, mantissa), ones_like(v));
  Tensor exponent = round(log2(abs(power)));
  if (autograd::needs_grad(x))  // d mantissa/dx = 2^-exponent
    autograd::record(Op::frexp, mantissa, {&x},
                     [se = SavedTensor(exponent)](const Tensor& g, GradList& gi) {
                       gi[0] = div(g, exp2(se.get()));
                     });
  return {mantissa, exponent.to(DType::i32)};
}

// ---- binary math

Tensor xlogy(const Tensor& x, const Tensor& y) {
  return binary_math(Op::xlogy, x, y,
                     [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&,
                        Inputs want, GradList& gi) {  // as PyTorch: xlogy(a != 0, b) and a / b
                       if (want.a) gi[0] = mul(g, xlogy(ne(a, 0.0).to(a.dtype()), b));
                       if (want.b) gi[1] = mul(g, div(a, b));
                     });
}
Tensor special::xlog1py(const Tensor& x, const Tensor& y) {
  return binary_math(Op::special_xlog1py, x, y,
                     [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&,
                        Inputs want, GradList& gi) {
                       if (want.a) gi[0] = mul(g, special::xlog1py(ne(a, 0.0).to(a.dtype()), b));
                       if (want.b) gi[1] = mul(g, div(a, add(b, 1.0)));
                     });
}
Tensor hypot(const Tensor& a_in, const Tensor& b_in) {
  return binary_math(Op::hypot, a_in, b_in,
                     [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out,
                        Inputs want, GradList& gi) {
                       if (want.a) gi[0] = mul(g, div(a, out));
                       if (want.b) gi[1] = mul(g, div(b, out));
                     });
}
Tensor copysign(const Tensor& a_in, const Tensor& b_in) {
  return binary_math(Op::copysign, a_in, b_in,
                     [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out,
                        Inputs want, GradList& gi) {  // ±1 where a != 0, 0 at a == 0; none to b
                       if (want.a) {
                         const Tensor zero = eq(a, 0.0);
                         const Tensor safe = where(zero, ones_like(a), a);
                         gi[0] = mul(g, where(zero, zeros_like(a), div(out, safe)));
                       }
                       if (want.b) gi[1] = zeros_like(g);
                     });
}
Tensor nextafter(const Tensor& a, const Tensor& b) { return no_grads(Op::nextafter, a, b); }
Tensor logaddexp(const Tensor& a_in, const Tensor& b_in) {
  return binary_math(Op::logaddexp, a_in, b_in,
                     [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&,
                        Inputs want, GradList& gi) {  // σ(a - b) and σ(b - a)
                       if (want.a) gi[0] = mul(g, sigmoid(sub(a, b)));
                       if (want.b) gi[1] = mul(g, sigmoid(sub(b, a)));
                     });
}
Tensor logaddexp2(const Tensor& a_in, const Tensor& b_in) {
  return binary_math(Op::logaddexp2, a_in, b_in,
                     [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&,
                        Inputs want, GradList& gi) {  // 1 / (1 + 2^(b - a)) = σ((a - b)·ln 2)
                       if (want.a) gi[0] = mul(g, sigmoid(mul(sub(a, b), kLn2)));
                       if (want.b) gi[1] = mul(g, sigmoid(mul(sub(b, a), kLn2)));
                     });
}
Tensor special::zeta(const Tensor& x, const Tensor& q) {
  EMBER_CHECK(!(x.defined() && autograd::needs_grad(x)), op_name(Op::special_zeta),
              ": the gradient with respect to x is not implemented (as PyTorch; q's is)");
  return binary_math(Op::special_zeta, x, q,
                     [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&,
                        Inputs want, GradList& gi) {  // dζ(s, q)/dq = -s·ζ(s + 1, q)
                       if (want.b) gi[1] = mul(g, mul(neg(a), special::zeta(add(a, 1.0), b)));
                     });
}

Tensor gcd(const Tensor& a, const Tensor& b) { return no_grads(Op::gcd, a, b); }
Tensor lcm(const Tensor& a, const Tensor& b) { return no_grads(Op::lcm, a, b); }
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b) {
  return no_grads(Op::bitwise_left_shift, a, b);
}
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b) {
  return no_grads(Op::bitwise_right_shift, a, b);
}

namespace {
// and/or/xor: the integer kernel, or the logical op for two bool tensors (which it is, bitwise).
Tensor bitwise(Op op, const Tensor& a, const Tensor& b) {
  if (a.defined() && b.defined() && a.dtype() == DType::boolean && b.dtype() == DType::boolean) {
    const ops::UserOp user(op, {&a, &b});
    ops::check_same_device(op_name(op), a, b);
    return op == Op::bitwise_and  ? logical_and(a, b)
           : op == Op::bitwise_or ? logical_or(a, b)
                                  : logical_xor(a, b);
  }
  return no_grads(op, a, b);
}
}  // namespace

Tensor bitwise_and(const Tensor& a, const Tensor& b) { return bitwise(Op::bitwise_and, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return bitwise(Op::bitwise_or, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return bitwise(Op::bitwise_xor, a, b); }
Tensor bitwise_not(const Tensor& x) {
  const ops::UserOp user(Op::bitwise_not, {&x});
  ops::check_defined(op_name(Op::bitwise_not), x);
  ops::check_supported(Op::bitwise_not, x);
  if (x.dtype() == DType::boolean) return logical_not(x);
  return ops::binary_forward(Op::bitwise_xor, x, scalar_like(x, -1.0));  // ~x = x ^ -1
}

Tensor ldexp(const Tensor& x, const Tensor& other) {
  const ops::UserOp user(Op::ldexp, {&x, &other});
  ops::check_defined(op_name(Op::ldexp), x, "input");
  ops::check_defined(op_name(Op::ldexp), other, "other");
  ops::check_supported(Op::ldexp, x);
  const Tensor e = is_floating(other.dtype()) ? other : other.to(x.dtype());
  return mul(x, exp2(e));
}

Tensor float_power(const Tensor& a, const Tensor& b) {
  const ops::UserOp user(Op::float_power, {&a, &b});
  ops::check_defined(op_name(Op::float_power), a, "input");
  ops::check_defined(op_name(Op::float_power), b, "exponent");
  ops::check_supported(Op::float_power, a);
  ops::check_supported(Op::float_power, b, "exponent");
  return pow(a.to(DType::f64), b.to(DType::f64));
}
Tensor float_power(const Tensor& a, double b) {
  const ops::UserOp user(Op::float_power, {&a});
  ops::check_defined(op_name(Op::float_power), a);
  ops::check_supported(Op::float_power, a);
  return pow(a.to(DType::f64), b);
}

Tensor heaviside(const Tensor& x, const Tensor& values) {
  const ops::UserOp user(Op::heaviside, {&x, &values});
  const char* name = op_name(Op::heaviside);
  ops::check_defined(name, x, "input");
  ops::check_defined(name, values, "values");
  ops::check_supported(Op::heaviside, x);
  EMBER_CHECK(x.dtype() == values.dtype(), name, ": values dtype ", dtype_name(values.dtype()),
              " (expected the input's, ", dtype_name(x.dtype()), ", as PyTorch)");
  ops::check_same_device(name, x, values);
  const Tensor v = x.detach();
  return where(eq(v, 0.0), values.detach(), gt(v, 0.0).to(v.dtype()));
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  const ops::UserOp user(Op::isclose, {&a, &b});
  const char* name = op_name(Op::isclose);
  ops::check_defined(name, a, "input");
  ops::check_defined(name, b, "other");
  ops::check_supported(Op::isclose, a);
  EMBER_CHECK(a.dtype() == b.dtype(), name, ": other's dtype ", dtype_name(b.dtype()),
              " (expected the input's, ", dtype_name(a.dtype()), ")");
  EMBER_CHECK(rtol >= 0.0, name, ": rtol ", rtol, " (expected >= 0)");
  EMBER_CHECK(atol >= 0.0, name, ": atol ", atol, " (expected >= 0)");
  ops::check_same_device(name, a, b);
  const bool floating = is_floating(a.dtype());
  const Tensor x = floating ? a.detach() : a.detach().to(DType::f64);
  const Tensor y = floating ? b.detach() : b.detach().to(DType::f64);
  Tensor close = eq(x, y);
  if (equal_nan && floating) close = logical_or(close, logical_and(isnan(x), isnan(y)));
  if (rtol == 0.0 && atol == 0.0) return close;
  const Tensor allowed = add(abs(mul(y, rtol)), atol);
  const Tensor error = abs(sub(x, y));
  return logical_or(close, logical_and(isfinite(error), le(error, allowed)));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  const Tensor close = isclose(a, b, rtol, atol, equal_nan);
  return close.numel() == 0 || all(close).item<bool>();
}

// ---- activations

namespace {
void check_activation(Op op, const Tensor& x) {
  ops::check_defined(op_name(op), x);
  ops::check_supported(op, x);
}
}  // namespace

Tensor celu(const Tensor& x, double alpha) {
  const ops::UserOp user(Op::celu, {&x});
  check_activation(Op::celu, x);
  EMBER_CHECK(alpha != 0.0, op_name(Op::celu), ": alpha is 0 (expected a non-zero alpha)");
  // relu(x) + α·expm1(min(x, 0)/α): the clamp keeps expm1 finite (and its gradient 0) above 0.
  return add(relu(x), mul(expm1(mul(clamp_max(x, 0.0), 1.0 / alpha)), alpha));
}

Tensor softsign(const Tensor& x) {
  const ops::UserOp user(Op::softsign, {&x});
  check_activation(Op::softsign, x);
  return div(x, add(abs(x), 1.0));
}

Tensor hardshrink(const Tensor& x, double lambd) {
  const ops::UserOp user(Op::hardshrink, {&x});
  check_activation(Op::hardshrink, x);
  const Tensor v = x.detach();
  // 0 where -lambd <= x <= lambd, else x: NaN passes, as PyTorch's.
  return where(logical_and(ge(v, -lambd), le(v, lambd)), zeros_like(v), x);
}

Tensor softshrink(const Tensor& x, double lambd) {
  const ops::UserOp user(Op::softshrink, {&x});
  check_activation(Op::softshrink, x);
  EMBER_CHECK(lambd >= 0.0, op_name(Op::softshrink), ": lambd ", lambd, " (expected >= 0)");
  return sub(x, clamp(x, -lambd, lambd));
}

Tensor tanhshrink(const Tensor& x) {
  const ops::UserOp user(Op::tanhshrink, {&x});
  check_activation(Op::tanhshrink, x);
  return sub(x, tanh(x));
}

Tensor threshold(const Tensor& x, double threshold, double value) {
  const ops::UserOp user(Op::threshold, {&x});
  check_activation(Op::threshold, x);
  // value where x <= threshold, else x (NaN passes, as PyTorch's).
  return where(le(x.detach(), threshold), scalar_like(x, value), x);
}

Tensor rrelu(const Tensor& x, double lower, double upper, bool training) {
  const ops::UserOp user(Op::rrelu, {&x});
  check_activation(Op::rrelu, x);
  EMBER_CHECK(lower <= upper, op_name(Op::rrelu), ": lower bound ", lower, " is above upper bound ",
              upper);
  if (!training) return leaky_relu(x, (lower + upper) / 2.0);
  // One slope per element from U(lower, upper), 1 where x > 0: y = x·slope, dy/dx = slope.
  const Tensor drawn = rand(x.shape(), {.dtype = x.dtype(), .device = x.device()}, lower, upper);
  const Tensor slope = where(gt(x.detach(), 0.0), ones_like(drawn), drawn);
  return mul(x, slope);
}

// ---- torch.special's distribution functions

Tensor special::entr(const Tensor& x) {
  const ops::UserOp user(Op::special_entr, {&x});
  check_activation(Op::special_entr, x);
  const Tensor v = x.detach();
  const Tensor positive = gt(v, 0.0);
  const Tensor safe = where(positive, x, ones_like(v));  // log's gradient stays finite
  Tensor out = where(positive, neg(mul(safe, log(safe))),
                     where(eq(v, 0.0), zeros_like(v), full_like(v, -kInf)));
  return where(isnan(v), v, out);
}

Tensor special::ndtr(const Tensor& x) {
  const ops::UserOp user(Op::special_ndtr, {&x});
  check_activation(Op::special_ndtr, x);
  return mul(ember::erfc(mul(x, -kSqrt1_2)),
             0.5);  // Φ(x) = erfc(-x/√2)/2, accurate in the left tail
}

Tensor special::ndtri(const Tensor& p) {
  const ops::UserOp user(Op::special_ndtri, {&p});
  check_activation(Op::special_ndtri, p);
  Tensor out;
  {
    // √2·erfinv(2p - 1), then two Newton steps on Φ(x) = p: erfinv's start loses digits where
    // 2p - 1 rounds (p near 0), Φ through erfc does not.
    const NoGradGuard no_grad;
    const Tensor v = p.detach();
    out = mul(ember::erfinv(add(mul(v, 2.0), -1.0)), 1.0 / kSqrt1_2);
    for (int i = 0; i < 2; ++i) {
      const Tensor density = mul(exp(mul(square(out), -0.5)), 1.0 / kSqrt2Pi);
      const Tensor step = div(sub(special::ndtr(out), v), density);
      out = where(isfinite(step), sub(out, step), out);
    }
  }
  if (autograd::needs_grad(p))  // dΦ⁻¹/dp = 1/φ(x) = √(2π)·e^(x²/2)
    autograd::record(Op::special_ndtri, out, {&p},
                     [so = SavedTensor(out)](const Tensor& g, GradList& gi) {
                       gi[0] = mul(g, mul(exp(mul(square(so.get()), 0.5)), kSqrt2Pi));
                     });
  return out;
}

Tensor special::log_ndtr(const Tensor& x) {
  const ops::UserOp user(Op::special_log_ndtr, {&x});
  check_activation(Op::special_log_ndtr, x);
  // Below 0: log(erfcx(-x/√2)/2) - x²/2, which never underflows; above: log1p(-erfc(x/√2)/2).
  // Each branch reads x clamped to its side, so the other side's values stay finite.
  const Tensor left = clamp_max(x, 0.0), right = clamp_min(x, 0.0);
  const Tensor low =
      sub(log(mul(special::erfcx(mul(left, -kSqrt1_2)), 0.5)), mul(square(left), 0.5));
  const Tensor high = ember::log1p(mul(ember::erfc(mul(right, kSqrt1_2)), -0.5));
  return where(lt(x.detach(), 0.0), low, high);
}

}  // namespace ember
