// src/ops/elementwise.cpp — unary and binary elementwise ops with their backward rules.
//
// Binary ops broadcast: the backward produces gradients in the broadcast shape and the
// engine sums them back to each input's shape (Note [Backward order] in engine.cpp). Operands
// of different dtypes are first cast to their result type (ops::promote, Note [Type
// promotion] in common.cpp) with the differentiable .to(DType), whose backward casts each
// gradient back to its input's dtype.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using backend::BinaryOp;
using backend::UnaryOp;

namespace ops {

Tensor unary_forward(Op op, UnaryOp kernel, const Tensor& x, double a = 0.0, double b = 0.0) {
  const ops::OpScope op_scope(op, x);
  check_supported(op, x);
  const MemoryFormat format = format_of(x);  // Note [Memory formats]
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device(), format);
  backend::View o = view_of(out), i = view_of(x);
  in_memory_order(format, {&o, &i});
  backend_of(x).unary(kernel, o, i, a, b);
  return out;
}
Tensor unary_forward(Op op, const Tensor& x) {
  return unary_forward(op, backend::unary_kernel(op), x);
}

// a op b for operands already of one dtype (ops::promote made them so).
Tensor binary_forward(Op op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_defined(name, a, "first input");
  check_defined(name, b, "second input");
  check_same_dtype(name, a, b);
  check_same_device(name, a, b);
  const ops::OpScope op_scope(op, a);
  check_supported(op, a);
  const bool comparison = backend::is_comparison(backend::binary_kernel(op));
  const Shape shape =
      a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), name);
  // The output takes the format of an operand of its shape (Note [Memory formats]).
  const MemoryFormat format = a.shape() == shape   ? format_of(a)
                              : b.shape() == shape ? format_of(b)
                                                   : MemoryFormat::contiguous;
  Tensor out = make_tensor(shape, comparison ? DType::boolean : a.dtype(), a.device(), format);
  backend::View o = view_of(out), va = broadcast_view(a, shape), vb = broadcast_view(b, shape);
  in_memory_order(format, {&o, &va, &vb});
  backend_of(a).binary(backend::binary_kernel(op), o, va, vb);
  return out;
}

}  // namespace ops

using ops::binary_forward;
using ops::unary_forward;

// ---- binary ----

namespace {
// Note [Adding a 16-bit tensor to an f32 one]
// Under autocast a transformer's residual stream stays f32 while its blocks return bf16:
// x + attn(ln(x)) promotes the bf16 operand with a cast (a full pass writing an f32 copy)
// and then adds. For two contiguous operands of one shape, one f32 and one f16/bf16, the
// add_widened kernel reads the 16-bit one as it is: the same bits (the widening is exact),
// one pass fewer (GPT-2: 24 a step). The backward is promote's: g, and g cast to the 16-bit
// operand's dtype.
std::optional<Tensor> add_widened(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype() || a.shape() != b.shape() ||
      a.device() != b.device() || a.numel() == 0 || !a.is_contiguous() || !b.is_contiguous())
    return {};
  const bool a_wide = a.dtype() == DType::f32;
  const Tensor& wide = a_wide ? a : b;
  const Tensor& narrow = a_wide ? b : a;
  if (wide.dtype() != DType::f32 || (narrow.dtype() != DType::bf16 && narrow.dtype() != DType::f16))
    return {};
  const ops::OpScope op_scope(Op::add, wide);
  ops::check_supported(Op::add, wide);
  Tensor out = ops::make_tensor(a.shape(), DType::f32, a.device());
  ops::backend_of(a).add_widened(ops::view_of(out), ops::view_of(wide), ops::view_of(narrow));
  if (autograd::needs_grad(a, b)) {
    autograd::Node& node = autograd::record(
        Op::add, out, {&a, &b}, [a_wide, low = narrow.dtype()](const Tensor& g, GradList& gi) {
          gi[a_wide ? 0 : 1] = g;
          // The copy the last node to add into g may have written beside it (Note [A
          // lower-precision copy beside a tensor] in src/ops/autocast.cpp), else the cast.
          const Tensor copy = ops::low_copy_of(g, low);
          gi[a_wide ? 1 : 0] = copy.defined() ? copy : g.to(low);
        });
    if (narrow.requires_grad()) node.reads_gradient_as = narrow.dtype();
  }
  return out;
}
}  // namespace

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  if (a_in.defined() && b_in.defined() && a_in.dtype() != b_in.dtype()) [[unlikely]]
    if (auto out = add_widened(a_in, b_in)) return *out;
  const auto [a, b] = ops::promote(Op::add, a_in, b_in);
  Tensor out = binary_forward(Op::add, a, b);
  if (autograd::needs_grad(a, b))
    autograd::record(Op::add, out, {&a, &b}, [](const Tensor& g, GradList& gi) {
      gi[0] = g;
      gi[1] = g;
    });
  return out;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = ops::promote(Op::sub, a_in, b_in);
  Tensor out = binary_forward(Op::sub, a, b);
  if (autograd::needs_grad(a, b))
    autograd::record(Op::sub, out, {&a, &b},
                     [nb = b.requires_grad()](const Tensor& g, GradList& gi) {
                       gi[0] = g;
                       if (nb) gi[1] = neg(g);
                     });
  return out;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = ops::promote(Op::mul, a_in, b_in);
  Tensor out = binary_forward(Op::mul, a, b);
  if (autograd::needs_grad(a, b)) {
    const bool na = a.requires_grad(), nb = b.requires_grad();
    autograd::record(Op::mul, out, {&a, &b},
                     [na, nb, sa = SavedTensor(nb ? a : Tensor()),
                      sb = SavedTensor(na ? b : Tensor())](const Tensor& g, GradList& gi) {
                       if (na) gi[0] = mul(g, sb.get());
                       if (nb) gi[1] = mul(g, sa.get());
                     });
  }
  return out;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  // True division, as PyTorch: integer and bool operands (u8 and bool too, which the
  // catalogue does not list for div) divide as f32; floor or truncating division are separate
  // ops there.
  if (a_in.defined() && b_in.defined() && !is_floating(ops::result_type({&a_in, &b_in})))
    return div(a_in.to(DType::f32), b_in.to(DType::f32));
  const auto [a, b] = ops::promote(Op::div, a_in, b_in);
  Tensor out = binary_forward(Op::div, a, b);
  if (autograd::needs_grad(a, b)) {
    const bool nb = b.requires_grad();
    autograd::record(Op::div, out, {&a, &b},
                     [nb, sb = SavedTensor(b), so = SavedTensor(nb ? out : Tensor())](
                         const Tensor& g, GradList& gi) {
                       Tensor bb = sb.get();
                       Tensor ga = div(g, bb);
                       if (nb) gi[1] = neg(mul(ga, so.get()));
                       gi[0] = ga;
                     });
  }
  return out;
}

Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  if (const auto c = ops::autocast(Op::pow, {&a_in, &b_in})) return pow(c[0], c[1]);
  const auto [a, b] = ops::promote(Op::pow, a_in, b_in);
  Tensor out = binary_forward(Op::pow, a, b);
  if (autograd::needs_grad(a, b)) {
    const bool na = a.requires_grad(), nb = b.requires_grad();
    autograd::record(Op::pow, out, {&a, &b},
                     [na, nb, sa = SavedTensor(a), sb = SavedTensor(b), so = SavedTensor(out)](
                         const Tensor& g, GradList& gi) {
                       Tensor x = sa.get(), e = sb.get();
                       Tensor zero = zeros(Shape{}, {.dtype = g.dtype(), .device = g.device()});
                       // d/da a^b = b·a^(b-1), 0 where b == 0 (else 0·0^-1 = NaN at a = 0);
                       // d/db a^b = a^b·log(a), 0 where a == 0 and b >= 0 (else 0·-inf).
                       // Both as PyTorch's pow_backward_self / pow_backward_exponent.
                       if (na) {
                         Tensor d = mul(g, mul(e, pow(x, sub(e, ones_like(e)))));
                         gi[0] = where(eq(e, 0.0), zero, d);
                       }
                       if (nb) {
                         Tensor d = mul(g, mul(so.get(), log(x)));
                         gi[1] = where(eq(x, 0.0), where(lt(e, 0.0), d, zero), d);
                       }
                     });
  }
  return out;
}

namespace {
// Gradient routing for maximum/minimum: the winner gets g, ties split it evenly (as PyTorch).
Tensor extremum(Op op, const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = ops::promote(op, a_in, b_in);
  Tensor out = binary_forward(op, a, b);
  if (autograd::needs_grad(a, b)) {
    const bool is_max = op == Op::maximum;
    autograd::record(
        op, out, {&a, &b},
        [is_max, sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g, GradList& gi) {
          Tensor x = sa.get(), y = sb.get();
          Tensor wins = (is_max ? gt(x, y) : lt(x, y)).to(g.dtype());
          Tensor ties = eq(x, y).to(g.dtype());
          Tensor share_a = add(wins, mul(ties, 0.5));
          gi[0] = mul(g, share_a);
          gi[1] = sub(g, gi[0]);
        });
  }
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(Op::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(Op::minimum, a, b); }

// ---- with a scalar: out = x·s + t in one pass ----

namespace {
bool is_integral_value(double v) { return std::nearbyint(v) == v; }

// `op` names the op in errors and in the graph (add, mul, scale, sub, div, neg).
Tensor affine(const Tensor& x, double s, double t, Op op) {
  ops::check_defined(op_name(op), x);
  if (!is_floating(x.dtype()) && x.dtype() != DType::boolean) {
    // Integers stay integers with integral scalars (x + 2 is i64) and become f32 otherwise
    // (x * 0.5), as PyTorch; both through the binary kernel.
    if (!is_integral_value(s) || !is_integral_value(t)) return affine(x.to(DType::f32), s, t, op);
    const ops::OpScope op_scope(op, x);
    ops::check_supported(op, x);
    const TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    Tensor y = s == 1.0 ? x : binary_forward(Op::mul, x, full(Shape{}, s, o));
    return t == 0.0 ? (s == 1.0 ? x.clone() : y) : binary_forward(Op::add, y, full(Shape{}, t, o));
  }
  Tensor out = unary_forward(op, UnaryOp::affine, x, s, t);
  if (autograd::needs_grad(x))
    autograd::record(op, out, {&x}, [s](const Tensor& g, GradList& gi) {
      gi[0] = s == 1.0 ? g : affine(g, s, 0.0, Op::scale);
    });
  return out;
}
}  // namespace

Tensor add(const Tensor& a, double b) { return affine(a, 1.0, b, Op::add); }
Tensor mul(const Tensor& a, double b) { return affine(a, b, 0.0, Op::mul); }
Tensor scale(const Tensor& x, double s) { return affine(x, s, 0.0, Op::scale); }

Tensor pow(const Tensor& x, double e) {
  if (const auto c = ops::autocast(Op::pow, {&x})) return pow(c[0], e);
  Tensor out = unary_forward(Op::pow, UnaryOp::pow_scalar, x, e);
  if (autograd::needs_grad(x))
    autograd::record(Op::pow, out, {&x}, [e, sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
      gi[0] = e == 0.0 ? zeros_like(g) : mul(g, mul(pow(sx.get(), e - 1.0), e));
    });
  return out;
}

namespace ops {
// clamp, clamp_min, clamp_max of an integer tensor (the clamp kernel is float-only): maximum
// and minimum with the bounds as 0-d tensors of x's dtype; a fractional bound makes it f32,
// as PyTorch (whose clamp promotes with its scalar bounds). Infinite bounds do nothing.
Tensor clamp_integer(Op op, const Tensor& x, double lo, double hi) {
  const ops::OpScope op_scope(op, x);
  ops::check_supported(op, x);
  const bool fractional = (std::isfinite(lo) && !is_integral_value(lo)) ||
                          (std::isfinite(hi) && !is_integral_value(hi));
  if (fractional) {
    Tensor xf = x.to(DType::f32);
    return op == Op::clamp_min   ? clamp_min(xf, lo)
           : op == Op::clamp_max ? clamp_max(xf, hi)
                                 : clamp(xf, lo, hi);
  }
  const bool wide = x.dtype() == DType::i64;
  const double top = wide ? 9.2233720368547748e18 : 2147483647.0;
  const double bottom = wide ? -9.2233720368547758e18 : -2147483648.0;
  const TensorOptions o{.dtype = x.dtype(), .device = x.device()};
  Tensor out = x;
  if (lo > bottom) out = maximum(out, full(Shape{}, std::min(lo, top), o));
  if (hi < top) out = minimum(out, full(Shape{}, std::max(hi, bottom), o));
  return out.is_same(x) ? x.clone() : out;
}
}  // namespace ops

Tensor clamp(const Tensor& x, double lo, double hi) {
  EMBER_CHECK(!(lo > hi), op_name(Op::clamp), ": lower bound ", lo, " is above upper bound ", hi);
  if (x.defined() && !is_floating(x.dtype())) return ops::clamp_integer(Op::clamp, x, lo, hi);
  Tensor out = unary_forward(Op::clamp, UnaryOp::clamp, x, lo, hi);
  if (autograd::needs_grad(x))
    autograd::record(
        Op::clamp, out, {&x}, [lo, hi, sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
          gi[0] = mul(g, unary_forward(Op::clamp, UnaryOp::clamp_mask, sx.get(), lo, hi));
        });
  return out;
}

// ---- unary ----

Tensor neg(const Tensor& x) { return affine(x, -1.0, 0.0, Op::neg); }

namespace {
// Unary op whose derivative is g · f'(x) with f' computed by the `grad_op` kernel.
Tensor unary_with_grad_kernel(Op op, UnaryOp kernel, UnaryOp grad_kernel, const Tensor& x);
}  // namespace

Tensor ops::relu_backward(const Tensor& grad, const Tensor& x) {
  const DType t = x.dtype();
  const bool fused = grad.shape() == x.shape() && grad.dtype() == t &&
                     grad.device() == x.device() && t != DType::u8 && t != DType::boolean;
  if (!fused) return mul(grad, unary_forward(Op::relu, UnaryOp::relu_grad, x));
  // Note [Memory formats]: the forward input's format (the gradients of a channels_last
  // network stay channels_last), every operand walked in its memory order (a channels_last
  // ReLU's backward took 6x the NCHW one's time on this CPU before, walking strided).
  const MemoryFormat format = format_of(x);
  Tensor out = make_tensor(x.shape(), t, x.device(), format);
  backend::View o = view_of(out), vg = view_of(grad), vx = view_of(x);
  in_memory_order(format, {&o, &vg, &vx});
  backend_of(x).binary(BinaryOp::relu_backward, o, vg, vx);
  return out;
}

namespace {
// Note [Activation backward in one]
// g · f'(x) for gelu and silu is one kernel (a binary kernel entry whose formula calls the
// derivative's), not f'(x) written out and then multiplied: one pass over memory instead of
// three (GPT-2's MLP: 1.7 of 48 ms a step were the two). In f32 and f64 the values are the
// two-kernel path's bitwise (f'(x) rounds to its own dtype, a no-op); in f16/bf16 the product
// is rounded once instead of twice (within one rounding of the two-kernel path).
BinaryOp fused_backward(UnaryOp grad_kernel) {
  switch (grad_kernel) {
    case UnaryOp::gelu_tanh_grad: return BinaryOp::gelu_tanh_backward;
    case UnaryOp::gelu_erf_grad: return BinaryOp::gelu_erf_backward;
    case UnaryOp::silu_grad: return BinaryOp::silu_backward;
    default: return BinaryOp::count;
  }
}

Tensor activation_backward(Op op, UnaryOp grad_kernel, const Tensor& g, const Tensor& x) {
  if (grad_kernel == UnaryOp::relu_grad) return ops::relu_backward(g, x);
  const BinaryOp fused = fused_backward(grad_kernel);
  const bool one_kernel = fused != BinaryOp::count && g.shape() == x.shape() &&
                          g.dtype() == x.dtype() && g.device() == x.device() &&
                          is_floating(x.dtype());
  if (!one_kernel) return mul(g, ops::unary_forward(op, grad_kernel, x));
  const MemoryFormat format = ops::format_of(x);  // as relu_backward
  Tensor out = ops::make_tensor(x.shape(), x.dtype(), x.device(), format);
  backend::View o = ops::view_of(out), vg = ops::view_of(g), vx = ops::view_of(x);
  ops::in_memory_order(format, {&o, &vg, &vx});
  ops::backend_of(x).binary(fused, o, vg, vx);
  return out;
}

}  // namespace

Tensor ops::gelu_tanh_backward(const Tensor& grad, const Tensor& x) {
  return activation_backward(Op::gelu, UnaryOp::gelu_tanh_grad, grad, x);
}

namespace {
Tensor unary_with_grad_kernel(Op op, UnaryOp kernel, UnaryOp grad_kernel, const Tensor& x) {
  Tensor out = unary_forward(op, kernel, x);
  if (autograd::needs_grad(x))
    autograd::record(op, out, {&x},
                     [op, grad_kernel, sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
                       gi[0] = activation_backward(op, grad_kernel, g, sx.get());
                     });
  return out;
}
}  // namespace

Tensor relu(const Tensor& x) {
  return unary_with_grad_kernel(Op::relu, UnaryOp::relu, UnaryOp::relu_grad, x);
}
Tensor silu(const Tensor& x) {
  return unary_with_grad_kernel(Op::silu, UnaryOp::silu, UnaryOp::silu_grad, x);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  if (const auto c = ops::autocast(Op::softplus, {&x})) return softplus(c[0], beta, threshold);
  EMBER_CHECK(beta != 0.0, op_name(Op::softplus), ": beta is 0 (expected a non-zero beta)");
  Tensor out = unary_forward(Op::softplus, UnaryOp::softplus, x, beta, threshold);
  if (autograd::needs_grad(x))
    autograd::record(Op::softplus, out, {&x},
                     [beta, threshold, sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
                       // d/dx = sigmoid(beta·x), and 1 where the op is linear (beta·x > threshold)
                       Tensor bx = mul(sx.get(), beta);
                       gi[0] = where(gt(bx, threshold), g, mul(g, sigmoid(bx)));
                     });
  return out;
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  EMBER_CHECK(approximate == "none" || approximate == "tanh", op_name(Op::gelu),
              ": unknown approximate '", approximate, "' (expected \"none\" or \"tanh\")");
  if (approximate == "tanh")
    return unary_with_grad_kernel(Op::gelu, UnaryOp::gelu_tanh, UnaryOp::gelu_tanh_grad, x);
  return unary_with_grad_kernel(Op::gelu, UnaryOp::gelu_erf, UnaryOp::gelu_erf_grad, x);
}

Tensor abs(const Tensor& x) {
  if (x.defined() && !is_floating(x.dtype())) {  // integers: the kernel is float-only
    const ops::OpScope op_scope(Op::abs, x);
    ops::check_supported(Op::abs, x);
    return maximum(x, neg(x));  // |MIN| wraps to MIN, as PyTorch's
  }
  Tensor out = unary_forward(Op::abs, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::abs, out, {&x}, [sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
      gi[0] = mul(g, sign(sx.get()));
    });
  return out;
}

Tensor sign(const Tensor& x) {
  if (x.defined() && !is_floating(x.dtype())) {  // integers: (x > 0) - (x < 0)
    const ops::OpScope op_scope(Op::sign, x);
    ops::check_supported(Op::sign, x);
    return sub(gt(x, 0.0).to(x.dtype()), lt(x, 0.0).to(x.dtype()));
  }
  Tensor out = unary_forward(Op::sign, x);
  if (autograd::needs_grad(x))  // piecewise constant: zero gradient, as PyTorch
    autograd::record(Op::sign, out, {&x},
                     [](const Tensor& g, GradList& gi) { gi[0] = zeros_like(g); });
  return out;
}

Tensor sqrt(const Tensor& x) {
  Tensor out = unary_forward(Op::sqrt, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::sqrt, out, {&x}, [so = SavedTensor(out)](const Tensor& g, GradList& gi) {
      gi[0] = div(mul(g, 0.5), so.get());
    });
  return out;
}

Tensor rsqrt(const Tensor& x) {
  if (const auto c = ops::autocast(Op::rsqrt, {&x})) return rsqrt(c[0]);
  Tensor out = unary_forward(Op::rsqrt, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::rsqrt, out, {&x}, [so = SavedTensor(out)](const Tensor& g, GradList& gi) {
      // d x^-1/2 = -1/2 x^-3/2 = -1/2 out^3
      gi[0] = mul(g, mul(pow(so.get(), 3.0), -0.5));
    });
  return out;
}

Tensor square(const Tensor& x) {
  Tensor out = unary_forward(Op::square, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::square, out, {&x}, [sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
      gi[0] = mul(g, mul(sx.get(), 2.0));
    });
  return out;
}

Tensor exp(const Tensor& x) {
  if (const auto c = ops::autocast(Op::exp, {&x})) return exp(c[0]);
  Tensor out = unary_forward(Op::exp, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::exp, out, {&x}, [so = SavedTensor(out)](const Tensor& g, GradList& gi) {
      gi[0] = mul(g, so.get());
    });
  return out;
}

Tensor log(const Tensor& x) {
  if (const auto c = ops::autocast(Op::log, {&x})) return log(c[0]);
  Tensor out = unary_forward(Op::log, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::log, out, {&x}, [sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
      gi[0] = div(g, sx.get());
    });
  return out;
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_forward(Op::sigmoid, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::sigmoid, out, {&x},
                     [so = SavedTensor(out)](const Tensor& g, GradList& gi) {
                       Tensor y = so.get();
                       gi[0] = mul(g, mul(y, affine(y, -1.0, 1.0, Op::sub)));
                     });
  return out;
}

Tensor tanh(const Tensor& x) {
  Tensor out = unary_forward(Op::tanh, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::tanh, out, {&x}, [so = SavedTensor(out)](const Tensor& g, GradList& gi) {
      Tensor y = so.get();
      gi[0] = mul(g, affine(square(y), -1.0, 1.0, Op::sub));
    });
  return out;
}

// ---- the math library: sin ... erfinv ----

namespace {
// What a backward rule reads: saving only that keeps the other tensor out of the graph's
// memory (an activation's output, say, lives only as long as something needs it).
enum class Uses { input, output, both };

SavedTensor save_if(bool wanted, const Tensor& t) { return SavedTensor(wanted ? t : Tensor()); }

// A unary op whose gradient is g · dy/dx, with dy/dx made by `derivative(x, y)` from the saved
// input and output (the one `uses` does not name is passed undefined).
template <typename D>
Tensor unary_with(Op op, const Tensor& x, Uses uses, D derivative) {
  if (const auto c = ops::autocast(op, {&x})) return unary_with(op, c[0], uses, derivative);
  Tensor out = ops::unary_forward(op, x);
  if (autograd::needs_grad(x))
    autograd::record(
        op, out, {&x},
        [sx = save_if(uses != Uses::output, x), so = save_if(uses != Uses::input, out), derivative](
            const Tensor& g, GradList& gi) { gi[0] = mul(g, derivative(sx.get(), so.get())); });
  return out;
}

// A step function (floor, ceil, round, trunc): its gradient is zero, as PyTorch's.
Tensor step_op(Op op, const Tensor& x) {
  Tensor out = ops::unary_forward(op, x);
  if (autograd::needs_grad(x))
    autograd::record(op, out, {&x}, [](const Tensor& g, GradList& gi) { gi[0] = zeros_like(g); });
  return out;
}

Tensor one_minus_square(const Tensor& x) { return affine(square(x), -1.0, 1.0, Op::sub); }

using ops::kLn2;
using ops::kTwoOverSqrtPi;
constexpr double kLn10 = 2.30258509299404568402, kSqrtPiOverTwo = 0.88622692545275801365;
}  // namespace

Tensor sin(const Tensor& x) {
  return unary_with(Op::sin, x, Uses::input, [](const Tensor& v, const Tensor&) { return cos(v); });
}
Tensor cos(const Tensor& x) {
  return unary_with(Op::cos, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return neg(sin(v)); });
}
Tensor tan(const Tensor& x) {
  return unary_with(Op::tan, x, Uses::output,
                    [](const Tensor&, const Tensor& y) { return add(square(y), 1.0); });
}
Tensor asin(const Tensor& x) {
  return unary_with(Op::asin, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return rsqrt(one_minus_square(v)); });
}
Tensor acos(const Tensor& x) {
  return unary_with(Op::acos, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return neg(rsqrt(one_minus_square(v))); });
}
Tensor atan(const Tensor& x) {
  return unary_with(Op::atan, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return reciprocal(add(square(v), 1.0)); });
}
Tensor sinh(const Tensor& x) {
  return unary_with(Op::sinh, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return cosh(v); });
}
Tensor cosh(const Tensor& x) {
  return unary_with(Op::cosh, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return sinh(v); });
}
Tensor floor(const Tensor& x) { return step_op(Op::floor, x); }
Tensor ceil(const Tensor& x) { return step_op(Op::ceil, x); }
Tensor round(const Tensor& x) { return step_op(Op::round, x); }
Tensor trunc(const Tensor& x) { return step_op(Op::trunc, x); }
Tensor frac(const Tensor& x) {
  Tensor out = ops::unary_forward(Op::frac, x);
  if (autograd::needs_grad(x))
    autograd::record(Op::frac, out, {&x}, [](const Tensor& g, GradList& gi) { gi[0] = g; });
  return out;
}
Tensor log1p(const Tensor& x) {
  return unary_with(Op::log1p, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return reciprocal(add(v, 1.0)); });
}
Tensor expm1(const Tensor& x) {
  return unary_with(Op::expm1, x, Uses::output,
                    [](const Tensor&, const Tensor& y) { return add(y, 1.0); });
}
Tensor log2(const Tensor& x) {
  return unary_with(Op::log2, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return reciprocal(mul(v, kLn2)); });
}
Tensor log10(const Tensor& x) {
  return unary_with(Op::log10, x, Uses::input,
                    [](const Tensor& v, const Tensor&) { return reciprocal(mul(v, kLn10)); });
}
Tensor exp2(const Tensor& x) {
  return unary_with(Op::exp2, x, Uses::output,
                    [](const Tensor&, const Tensor& y) { return mul(y, kLn2); });
}
Tensor reciprocal(const Tensor& x) {
  return unary_with(Op::reciprocal, x, Uses::output,
                    [](const Tensor&, const Tensor& y) { return neg(square(y)); });
}
Tensor erf(const Tensor& x) {
  return unary_with(Op::erf, x, Uses::input, [](const Tensor& v, const Tensor&) {
    return mul(exp(neg(square(v))), kTwoOverSqrtPi);
  });
}
Tensor erfc(const Tensor& x) {
  return unary_with(Op::erfc, x, Uses::input, [](const Tensor& v, const Tensor&) {
    return mul(exp(neg(square(v))), -kTwoOverSqrtPi);
  });
}
Tensor erfinv(const Tensor& x) {
  return unary_with(Op::erfinv, x, Uses::output, [](const Tensor&, const Tensor& y) {
    return mul(exp(square(y)), kSqrtPiOverTwo);
  });
}

// ---- activations: leaky_relu ... glu ----

namespace {
Tensor constant_of(const Tensor& like, double v) {
  return full(Shape{}, v, {.dtype = like.dtype(), .device = like.device()});
}
// An activation with a kernel of its own, whose gradient derivative(g, x, y) is built from ops
// (the tensor `uses` does not name is passed undefined).
template <typename D>
Tensor activation(Op op, const Tensor& x, double a, Uses uses, D derivative) {
  Tensor out = ops::unary_forward(op, backend::unary_kernel(op), x, a, 0.0);
  if (autograd::needs_grad(x))
    autograd::record(
        op, out, {&x},
        [sx = save_if(uses != Uses::output, x), so = save_if(uses != Uses::input, out), derivative](
            const Tensor& g, GradList& gi) { gi[0] = derivative(g, sx.get(), so.get()); });
  return out;
}
constexpr double kSeluScale = 1.0507009873554804934, kSeluAlpha = 1.6732632423543772848;
}  // namespace

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return activation(Op::leaky_relu, x, negative_slope, Uses::input,
                    [negative_slope](const Tensor& g, const Tensor& v, const Tensor&) {
                      return where(gt(v, 0.0), g, mul(g, negative_slope));
                    });
}
Tensor elu(const Tensor& x, double alpha) {
  return activation(Op::elu, x, alpha, Uses::both,
                    [alpha](const Tensor& g, const Tensor& v, const Tensor& y) {
                      return where(gt(v, 0.0), g, mul(g, add(y, alpha)));  // alpha·e^x = y + alpha
                    });
}
Tensor selu(const Tensor& x) {
  return activation(
      Op::selu, x, 0.0, Uses::both, [](const Tensor& g, const Tensor& v, const Tensor& y) {
        return where(gt(v, 0.0), mul(g, kSeluScale), mul(g, add(y, kSeluScale * kSeluAlpha)));
      });
}
Tensor mish(const Tensor& x) {
  return activation(
      Op::mish, x, 0.0, Uses::input, [](const Tensor& g, const Tensor& v, const Tensor&) {
        Tensor t = tanh(softplus(v));
        return mul(g, add(t, mul(mul(v, affine(square(t), -1.0, 1.0, Op::sub)), sigmoid(v))));
      });
}
Tensor hardswish(const Tensor& x) {
  return activation(
      Op::hardswish, x, 0.0, Uses::input, [](const Tensor& g, const Tensor& v, const Tensor&) {
        // 0 below -3, 1 above 3, x/3 + 1/2 between (PyTorch's hardswish_backward)
        Tensor d =
            where(lt(v, -3.0), constant_of(v, 0.0),
                  where(gt(v, 3.0), constant_of(v, 1.0), affine(v, 1.0 / 3.0, 0.5, Op::mul)));
        return mul(g, d);
      });
}
Tensor hardsigmoid(const Tensor& x) {
  return activation(
      Op::hardsigmoid, x, 0.0, Uses::input, [](const Tensor& g, const Tensor& v, const Tensor&) {
        return where(logical_and(gt(v, -3.0), lt(v, 3.0)), mul(g, 1.0 / 6.0), zeros_like(g));
      });
}
Tensor logsigmoid(const Tensor& x) {
  return activation(
      Op::logsigmoid, x, 0.0, Uses::input,
      [](const Tensor& g, const Tensor& v, const Tensor&) { return mul(g, sigmoid(neg(v))); });
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  EMBER_CHECK(!(min_val > max_val), op_name(Op::hardtanh), ": min_val ", min_val,
              " is above max_val ", max_val);
  Tensor out = unary_forward(Op::hardtanh, UnaryOp::clamp, x, min_val, max_val);
  if (autograd::needs_grad(x))
    autograd::record(Op::hardtanh, out, {&x},
                     [min_val, max_val, sx = SavedTensor(x)](const Tensor& g, GradList& gi) {
                       Tensor v = sx.get();  // strictly inside, as PyTorch's hardtanh_backward
                       gi[0] = where(logical_and(gt(v, min_val), lt(v, max_val)), g, zeros_like(g));
                     });
  return out;
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  const ops::OpScope op_scope(Op::prelu, x);
  ops::check_supported(Op::prelu, x);
  ops::check_defined(op_name(Op::prelu), weight, "weight");
  Tensor w = weight;
  if (weight.numel() == 1) {
    w = weight.reshape(Shape{});
  } else {
    EMBER_CHECK(x.dim() >= 2 && x.size(1) == weight.numel(), op_name(Op::prelu), ": ",
                weight.numel(), " weights for input shape ", x.shape().to_string(),
                " (expected 1, or one per channel: input dim 1)");
    std::vector<int64_t> s(static_cast<size_t>(x.dim()), 1);
    s[1] = weight.numel();
    w = weight.reshape(Shape(s));
  }
  return where(gt(x.detach(), 0.0), x, mul(x, w));
}

Tensor glu(const Tensor& x, int64_t dim) {
  const ops::OpScope op_scope(Op::glu, x);
  ops::check_supported(Op::glu, x);
  const int d = wrap_dim(dim, x.dim(), op_name(Op::glu));
  EMBER_CHECK(x.size(d) % 2 == 0, op_name(Op::glu), ": dim ", dim, " has size ", x.size(d),
              " (expected an even size, halved into value and gate)");
  std::vector<Tensor> halves = chunk(x, 2, d);
  return mul(halves[0], sigmoid(halves[1]));
}

// ---- operators ----

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return affine(a, 1.0, -b, Op::sub); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return affine(a, 1.0 / b, 0.0, Op::div); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return affine(b, -1.0, a, Op::sub); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) {
  // True division: an integer (or bool) tensor divides as f32, as PyTorch.
  if (b.defined() && !is_floating(b.dtype())) return a / b.to(DType::f32);
  return mul(pow(b, -1.0), a);
}
Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace ember
