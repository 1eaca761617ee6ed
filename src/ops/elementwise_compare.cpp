// src/ops/elementwise_compare.cpp — the comparisons and selection (eq ... ge, where,
// masked_fill), the other binary math with its backward rules (atan2, fmod, remainder), the
// logical ops, clamp's variants, the floating-point predicates and interpolation (lerp,
// addcmul, addcdiv): the second half of the elementwise ops, split from elementwise.cpp.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using backend::UnaryOp;

namespace ops {
// Defined in src/ops/elementwise.cpp: a unary kernel's op (dtype check, dispatch) and the
// broadcasting binary one (operands of one dtype, after ops::promote).
Tensor unary_forward(Op op, backend::UnaryOp kernel, const Tensor& x, double a, double b);
Tensor binary_forward(Op op, const Tensor& a, const Tensor& b);
// clamp, clamp_min or clamp_max of an integer tensor (elementwise.cpp).
Tensor clamp_integer(Op op, const Tensor& x, double lo, double hi);
}  // namespace ops

using ops::binary_forward;
using ops::unary_forward;

// ---- comparisons and selection ----

Tensor logical_not(const Tensor& x) {
  const ops::OpScope op_scope(Op::logical_not, x);
  ops::check_supported(Op::logical_not, x);
  Tensor out = ops::make_tensor(x.shape(), DType::boolean, x.device());
  ops::backend_of(x).unary(UnaryOp::logical_not, ops::view_of(out), ops::view_of(x), 0.0, 0.0);
  return out;
}

namespace {
// A comparison or logical op: promoted operands (no graph: the result is bool), bool out.
Tensor compare(Op op, const Tensor& a_in, const Tensor& b_in) {
  NoGradGuard no_grad;
  const auto [a, b] = ops::promote(op, a_in, b_in);
  return binary_forward(op, a, b);
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(Op::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(Op::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(Op::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(Op::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(Op::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(Op::ge, a, b); }
namespace {
using ops::scalar_like;
// The scalar a comparison with `v` reads: in a's dtype when v is exactly a value of it;
// otherwise (an integer or bool tensor against 2.5, or against a number outside its range)
// an f64 0-d tensor, so the comparison promotes to f64 and is exact (x < 2.5 on i64 is
// x <= 2, never the x < 2 a cast to the integer dtype would give).
Tensor compared_scalar(const Tensor& a, double v) {
  ops::check_defined("comparison", a);
  if (is_floating(a.dtype())) return scalar_like(a, v);
  double lo = 0.0, hi = 1.0;
  switch (a.dtype()) {
    case DType::i32:
      lo = -2147483648.0;
      hi = 2147483647.0;
      break;
    case DType::i64:
      lo = -9223372036854775808.0;
      hi = 9223372036854775807.0;  // rounds to 2^63, which i64 cannot hold: the test is <
      break;
    case DType::u8: hi = 255.0; break;
    default: break;  // bool: 0 and 1
  }
  const bool exact = std::trunc(v) == v && v >= lo && (a.dtype() == DType::i64 ? v < hi : v <= hi);
  return exact ? scalar_like(a, v) : full(Shape{}, v, {.dtype = DType::f64, .device = a.device()});
}
}  // namespace
Tensor eq(const Tensor& a, double b) { return eq(a, compared_scalar(a, b)); }
Tensor ne(const Tensor& a, double b) { return ne(a, compared_scalar(a, b)); }
Tensor gt(const Tensor& a, double b) { return gt(a, compared_scalar(a, b)); }
Tensor ge(const Tensor& a, double b) { return ge(a, compared_scalar(a, b)); }
Tensor lt(const Tensor& a, double b) { return lt(a, compared_scalar(a, b)); }
Tensor le(const Tensor& a, double b) { return le(a, compared_scalar(a, b)); }

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  ops::check_defined("where", cond, "condition");
  const auto [a, b] = ops::promote(Op::where, a_in, b_in);
  EMBER_CHECK(cond.dtype() == DType::boolean, op_name(Op::where), ": condition dtype ",
              dtype_name(cond.dtype()),
              " (expected bool; build it with a comparison such as gt(x, 0.0))");
  ops::check_same_device("where", cond, a);
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  // Note [Memory formats]: the format of an operand of the output's shape, walked in its order.
  const MemoryFormat format = a.shape() == shape      ? ops::format_of(a)
                              : b.shape() == shape    ? ops::format_of(b)
                              : cond.shape() == shape ? ops::format_of(cond)
                                                      : MemoryFormat::contiguous;
  Tensor out = ops::make_tensor(shape, a.dtype(), a.device(), format);
  backend::View o = ops::view_of(out), vc = ops::broadcast_view(cond, shape),
                va = ops::broadcast_view(a, shape), vb = ops::broadcast_view(b, shape);
  ops::in_memory_order(format, {&o, &vc, &va, &vb});
  ops::backend_of(a).where(o, vc, va, vb);
  if (autograd::needs_grad(a, b))
    autograd::record(Op::where, out, {&a, &b},
                     [sc = SavedTensor(cond)](const Tensor& g, GradList& gi) {
                       Tensor zero = zeros(Shape{}, {.dtype = g.dtype(), .device = g.device()});
                       Tensor c = sc.get();
                       gi[0] = where(c, g, zero);
                       gi[1] = where(c, zero, g);
                     });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  ops::check_defined("masked_fill", x);
  ops::check_defined("masked_fill", mask, "mask");
  EMBER_CHECK(mask.dtype() == DType::boolean, "masked_fill: mask dtype ", dtype_name(mask.dtype()),
              " (expected bool)");
  ops::check_same_device("masked_fill", x, mask);
  const Shape out = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  EMBER_CHECK(out == x.shape(), "masked_fill: mask shape ", mask.shape().to_string(),
              " does not broadcast to input shape ", x.shape().to_string());
  ops::check_scalar_fits("masked_fill", value, x.dtype());
  return where(mask, full(Shape{}, value, {.dtype = x.dtype(), .device = x.device()}), x);
}

// ---- more binary math, logical ops, clamp variants, predicates, interpolation ----

Tensor atan2(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = ops::promote(Op::atan2, a_in, b_in);
  Tensor out = binary_forward(Op::atan2, a, b);
  if (autograd::needs_grad(a, b))
    autograd::record(Op::atan2, out, {&a, &b},
                     [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g, GradList& gi) {
                       // d/da = b / (a² + b²), d/db = -a / (a² + b²)
                       Tensor y = sa.get(), x = sb.get();
                       Tensor scale_g = div(g, add(square(y), square(x)));
                       gi[0] = mul(scale_g, x);
                       gi[1] = neg(mul(scale_g, y));
                     });
  return out;
}

namespace {
// fmod and remainder: a - q·b with q = trunc(a / b) or floor(a / b), so d/da = 1, d/db = -q.
Tensor modulo(Op op, const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = ops::promote(op, a_in, b_in);
  Tensor out = binary_forward(op, a, b);
  if (autograd::needs_grad(a, b))
    autograd::record(op, out, {&a, &b},
                     [op, sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g, GradList& gi) {
                       gi[0] = g;
                       Tensor q = div(sa.get(), sb.get());
                       gi[1] = neg(mul(g, op == Op::fmod ? trunc(q) : floor(q)));
                     });
  return out;
}
}  // namespace

Tensor fmod(const Tensor& a, const Tensor& b) { return modulo(Op::fmod, a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return modulo(Op::remainder, a, b); }
Tensor fmod(const Tensor& a, double b) {
  ops::check_defined(op_name(Op::fmod), a);
  return fmod(a, scalar_like(a, b));
}
Tensor remainder(const Tensor& a, double b) {
  ops::check_defined(op_name(Op::remainder), a);
  return remainder(a, scalar_like(a, b));
}

Tensor logical_and(const Tensor& a, const Tensor& b) { return compare(Op::logical_and, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return compare(Op::logical_or, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return compare(Op::logical_xor, a, b); }

namespace {
// clamp with one bound: the clamp kernel with ±inf for the other (its gradient mask too).
Tensor clamp_one(Op op, const Tensor& x, double lo, double hi) {
  EMBER_CHECK(!std::isnan(lo) && !std::isnan(hi), op_name(op), ": the bound is NaN");
  if (x.defined() && !is_floating(x.dtype())) return ops::clamp_integer(op, x, lo, hi);
  Tensor out = unary_forward(op, UnaryOp::clamp, x, lo, hi);
  if (autograd::needs_grad(x))
    autograd::record(op, out, {&x},
                     [op, lo, hi, sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
                       gi[0] = mul(g, unary_forward(op, UnaryOp::clamp_mask, sx.get(), lo, hi));
                     });
  return out;
}
using ops::kInf;
}  // namespace

Tensor clamp_min(const Tensor& x, double lo) { return clamp_one(Op::clamp_min, x, lo, kInf); }
Tensor clamp_max(const Tensor& x, double hi) { return clamp_one(Op::clamp_max, x, -kInf, hi); }
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  const ops::UserOp user(Op::clamp, {&x});
  EMBER_CHECK(lo || hi, op_name(Op::clamp),
              ": neither bound given (expected at least one of min and max)");
  if (lo && hi) return clamp(x, *lo, *hi);
  return lo ? clamp_min(x, *lo) : clamp_max(x, *hi);
}
namespace {
// The operands of a composite cast to their joint result type (Note [Type promotion]), after
// checking that `op` computes in it on the first operand's device.
std::vector<Tensor> promote_all(Op op, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands) ops::check_defined(op_name(op), *t);
  const DType dtype = ops::result_type(operands);
  ops::check_supported(op, dtype, (*operands.begin())->device());
  std::vector<Tensor> out;
  for (const Tensor* t : operands) out.push_back(ops::cast_to(*t, dtype));
  return out;
}
}  // namespace

Tensor clamp(const Tensor& x_in, const Tensor& lo_in, const Tensor& hi_in) {
  const ops::UserOp user(Op::clamp, {&x_in, &lo_in, &hi_in});
  ops::check_defined(op_name(Op::clamp), x_in);
  EMBER_CHECK(lo_in.defined() || hi_in.defined(), op_name(Op::clamp),
              ": neither bound given (expected at least one of min and max)");
  const DType dtype = ops::result_type({&x_in, &lo_in, &hi_in});
  ops::check_supported(Op::clamp, dtype, x_in.device());
  const Tensor x = ops::cast_to(x_in, dtype), lo = ops::cast_to(lo_in, dtype),
               hi = ops::cast_to(hi_in, dtype);
  Tensor out = lo.defined() ? maximum(x, lo) : x;
  return hi.defined() ? minimum(out, hi) : out;
}

namespace {
// isnan/isinf (false) and isfinite (true) of an integer or bool tensor.
Tensor constant_mask(const Tensor& x, bool value) {
  return full(x.shape(), value ? 1.0 : 0.0, {.dtype = DType::boolean, .device = x.device()});
}
}  // namespace

Tensor isnan(const Tensor& x) {
  const ops::OpScope op_scope(Op::isnan, x);
  ops::check_supported(Op::isnan, x);
  if (!is_floating(x.dtype())) return constant_mask(x, false);
  return ne(x, x);
}
Tensor isinf(const Tensor& x) {
  const ops::OpScope op_scope(Op::isinf, x);
  ops::check_supported(Op::isinf, x);
  if (!is_floating(x.dtype())) return constant_mask(x, false);
  return eq(abs(x.detach()), kInf);
}
Tensor isfinite(const Tensor& x) {
  const ops::OpScope op_scope(Op::isfinite, x);
  ops::check_supported(Op::isfinite, x);
  if (!is_floating(x.dtype())) return constant_mask(x, true);
  Tensor v = x.detach();
  return eq(sub(v, v), 0.0);  // inf - inf and NaN - NaN are NaN
}

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  const ops::OpScope op_scope(Op::nan_to_num, x);
  ops::check_supported(Op::nan_to_num, x);
  const double big = x.dtype() == DType::f64 ? std::numeric_limits<double>::max()
                                             : std::numeric_limits<float>::max();
  Tensor out = where(isnan(x), scalar_like(x, nan), x);
  out = where(eq(x.detach(), kInf), scalar_like(x, posinf.value_or(big)), out);
  return where(eq(x.detach(), -kInf), scalar_like(x, neginf.value_or(-big)), out);
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  const ops::UserOp user(Op::lerp, {&start, &end, &weight});
  const std::vector<Tensor> v = promote_all(Op::lerp, {&start, &end, &weight});
  return add(v[0], mul(v[2], sub(v[1], v[0])));
}
Tensor lerp(const Tensor& start, const Tensor& end, double weight) {
  const ops::UserOp user(Op::lerp, {&start, &end});
  const std::vector<Tensor> v = promote_all(Op::lerp, {&start, &end});
  return add(v[0], mul(sub(v[1], v[0]), weight));
}
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, double value) {
  const ops::UserOp user(Op::addcmul, {&x, &t1, &t2});
  const std::vector<Tensor> v = promote_all(Op::addcmul, {&x, &t1, &t2});
  return add(v[0], mul(mul(v[1], v[2]), value));
}
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, double value) {
  const ops::UserOp user(Op::addcdiv, {&x, &t1, &t2});
  const std::vector<Tensor> v = promote_all(Op::addcdiv, {&x, &t1, &t2});
  return add(v[0], mul(div(v[1], v[2]), value));
}

}  // namespace ember
