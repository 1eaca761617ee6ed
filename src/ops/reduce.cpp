// src/ops/reduce.cpp — reductions over any set of dims (sum, mean, max, min, var, argmax,
// argmin) with keepdim, their backward rules, and sum_to (how autograd undoes broadcasting).
#include <cmath>

#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using backend::ReduceOp;

namespace {

struct Reduced {
  Tensor keep;  // result with reduced dims kept as size 1
  Shape dims;   // the dims as given (wrapped later)
};

void check_unique_dims(const Shape& dims, int rank, const char* op) {
  bool seen[kMaxRank] = {};
  for (int64_t d : dims) {
    const int w = wrap_dim(d, rank, op);
    EMBER_CHECK(!seen[w], op, ": dim ", d, " is listed twice in ", dims.to_string());
    seen[w] = true;
  }
}

Tensor reduce_keep(Op op, const Tensor& x, const Shape& dims, DType out_dtype) {
  const char* name = op_name(op);
  check_unique_dims(dims, x.dim(), name);
  const Shape keep = ops::reduced_shape(x.shape(), dims, name);
  Tensor out = ops::make_tensor(keep, out_dtype, x.device());
  if (out.numel() == 0) return out;  // nothing to write ([0, 3] over dim 1)
  if (x.numel() == 0) {
    // Over a size-0 dim: the empty sum, product and mean (0, 1, NaN, as PyTorch); an extreme
    // of nothing has no value.
    EMBER_CHECK(op == Op::sum || op == Op::prod || op == Op::mean, name,
                ": cannot reduce over a size-0 dim (input shape ", x.shape().to_string(), ", dims ",
                dims.to_string(), ")");
    ops::backend_of(x).fill(ops::view_of(out), op == Op::sum    ? 0.0
                                               : op == Op::prod ? 1.0
                                                                : std::nan(""));
    return out;
  }
  ops::backend_of(x).reduce(backend::reduce_kernel(op), ops::view_of(out), ops::view_of(x));
  return out;
}

Tensor finish_shape(const Tensor& keep, const Tensor& x, const Shape& dims, bool keepdim) {
  if (keepdim) return keep;
  return ops::make_view(keep, ops::squeeze_dims(keep.shape(), x.shape(), dims),
                        contiguous_strides(ops::squeeze_dims(keep.shape(), x.shape(), dims)), 0);
}

// g (shaped like the reduction result) broadcast back to the input's shape.
Tensor expand_back(const Tensor& g, const Shape& keep, const Shape& in) {
  return g.reshape(keep).expand(in);
}

// The elements each output reduces: the product of the reduced dims (keep has size 1 there),
// also when a kept dim is empty ([0, 3] over dim 1 reduces 3 each).
int64_t reduced_count(const Shape& in, const Shape& keep) {
  int64_t n = 1;
  for (int i = 0; i < in.size(); ++i)
    if (keep[i] == 1) n *= in[i];
  return n;
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  if (const auto c = ops::autocast(Op::sum, {&x})) return sum(c[0], dims, keepdim);
  const ops::OpScope op_scope(Op::sum, x);
  ops::check_supported(Op::sum, x);
  if (!is_floating(x.dtype()) && x.dtype() != DType::i64) {
    // Integers and bools sum into i64, as in PyTorch: an i32 sum would overflow silently.
    Tensor wide = x.to(DType::i64);
    return sum(wide, dims, keepdim);
  }
  Tensor keep = reduce_keep(Op::sum, x, dims, x.dtype());
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    autograd::record(Op::sum, out, {&x},
                     [keep_shape = keep.shape(), in = x.shape()](const Tensor& g, GradList& gi) {
                       gi[0] = expand_back(g, keep_shape, in);
                     });
  }
  return out;
}
Tensor sum(const Tensor& x) { return sum(x, Shape{}, false); }

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  const ops::OpScope op_scope(Op::mean, x);
  ops::check_supported(Op::mean, x);
  Tensor keep = reduce_keep(Op::mean, x, dims, x.dtype());
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    const double inv = 1.0 / static_cast<double>(reduced_count(x.shape(), keep.shape()));
    autograd::record(
        Op::mean, out, {&x},
        [inv, keep_shape = keep.shape(), in = x.shape()](const Tensor& g, GradList& gi) {
          gi[0] = expand_back(mul(g, inv), keep_shape, in);
        });
  }
  return out;
}
Tensor mean(const Tensor& x) { return mean(x, Shape{}, false); }

namespace {
Tensor extreme(Op op, const Tensor& x, const Shape& dims, bool keepdim) {
  const ops::OpScope op_scope(op, x);
  ops::check_supported(op, x);
  Tensor keep = reduce_keep(op, x, dims, x.dtype());
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    autograd::record(
        op, out, {&x},
        [sx = SavedTensor(x), sk = SavedTensor(keep), dims](const Tensor& g, GradList& gi) {
          Tensor xv = sx.get(), k = sk.get();
          // Gradient to every position equal to the extremum, split evenly between ties.
          Tensor hit = eq(xv, k).to(g.dtype());
          Tensor count = sum(hit, dims, true);
          gi[0] = mul(hit, div(g.reshape(k.shape()), count));
        });
  }
  return out;
}
}  // namespace

Tensor max(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme(Op::max, x, dims, keepdim);
}
Tensor min(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme(Op::min, x, dims, keepdim);
}
Tensor max(const Tensor& x) { return max(x, Shape{}, false); }
Tensor min(const Tensor& x) { return min(x, Shape{}, false); }

Tensor prod(const Tensor& x, const Shape& dims, bool keepdim) {
  if (const auto c = ops::autocast(Op::prod, {&x})) return prod(c[0], dims, keepdim);
  const ops::OpScope op_scope(Op::prod, x);
  ops::check_supported(Op::prod, x);
  Tensor keep = reduce_keep(Op::prod, x, dims, x.dtype());
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    autograd::record(
        Op::prod, out, {&x},
        [sx = SavedTensor(x), sk = SavedTensor(keep), dims](const Tensor& g, GradList& gi) {
          // d prod / d x_i = the product of the others: prod / x_i where x_i != 0. Where x_i
          // is a slice's only zero it is the product of the slice's non-zeros; where a slice
          // holds two or more zeros every gradient is 0 (PyTorch's prod_backward, exactly).
          Tensor xv = sx.get(), k = sk.get();
          Tensor zero = eq(xv, 0.0);
          Tensor zeros_in = sum(zero, dims, true);
          Tensor one = ones(Shape{}, {.dtype = xv.dtype(), .device = xv.device()});
          Tensor nonzero_prod = prod(where(zero, one, xv), dims, true);
          Tensor at_zero = where(eq(zeros_in, 1.0), nonzero_prod, zeros_like(nonzero_prod));
          Tensor others = where(zero, at_zero, div(k, where(zero, one, xv)));
          gi[0] = mul(others, g.reshape(k.shape()));
        });
  }
  return out;
}
Tensor prod(const Tensor& x) { return prod(x, Shape{}, false); }

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  if (const auto c = ops::autocast(Op::var, {&x})) return var(c[0], dims, correction, keepdim);
  const ops::OpScope op_scope(Op::var, x);
  ops::check_supported(Op::var, x);
  check_unique_dims(dims, x.dim(), "var");
  const Shape keep_shape = ops::reduced_shape(x.shape(), dims, "var");
  const int64_t n = reduced_count(x.shape(), keep_shape);
  EMBER_CHECK(n - correction > 0, op_name(Op::var), ": ", n, " elements with correction ",
              correction, " leave no degrees of freedom (expected more than ", correction,
              " elements)");
  Tensor keep = ops::make_tensor(keep_shape, x.dtype(), x.device());
  ops::backend_of(x).variance(ops::view_of(keep), ops::view_of(x), correction);
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    const double scale_factor = 2.0 / static_cast<double>(n - correction);
    autograd::record(
        Op::var, out, {&x},
        [sx = SavedTensor(x), dims, keep_shape, scale_factor](const Tensor& g, GradList& gi) {
          Tensor xv = sx.get();
          Tensor centered = sub(xv, mean(xv, dims, true));
          gi[0] = mul(mul(centered, scale_factor), g.reshape(keep_shape));
        });
  }
  return out;
}
Tensor var(const Tensor& x, int64_t correction) { return var(x, Shape{}, correction, false); }

namespace {
Tensor arg_extreme(Op op, const Tensor& x, int64_t dim, bool keepdim) {
  const char* name = op_name(op);
  const ops::OpScope op_scope(op, x);
  ops::check_supported(op, x);
  const int d = wrap_dim(dim, x.dim(), name);
  EMBER_CHECK(x.dim() == 0 || x.shape()[d] > 0, name, ": cannot reduce an empty dim (shape ",
              x.shape().to_string(), ")");
  Shape dims{static_cast<int64_t>(d)};
  if (x.dim() == 0) return zeros(Shape{}, {.dtype = DType::i64, .device = x.device()});
  Tensor keep = reduce_keep(op, x, dims, DType::i64);
  return finish_shape(keep, x, dims, keepdim);
}
}  // namespace

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme(Op::argmax, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme(Op::argmin, x, dim, keepdim);
}

// ---- composites: std, logsumexp, norm, the NaN-skipping sums, counts and any/all ----

namespace {
Tensor nonzero_mask(const Tensor& x) {
  return ne(x.detach(), zeros(Shape{}, {.dtype = x.dtype(), .device = x.device()}));
}
}  // namespace

Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  if (const auto c = ops::autocast(Op::std, {&x})) return std(c[0], dims, correction, keepdim);
  const ops::OpScope op_scope(Op::std, x);
  ops::check_supported(Op::std, x);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sqrt(var(x, dims, correction, keepdim));
  }
  if (autograd::needs_grad(x)) {
    // Its own backward, not sqrt's: d std = (x - mean) / ((n - correction) std), and 0 where
    // std is 0 (sqrt's 1 / 2·sqrt(0) made a constant slice's gradient NaN; PyTorch gives 0).
    const Shape keep_shape = ops::reduced_shape(x.shape(), dims, "std");
    const double dof = static_cast<double>(reduced_count(x.shape(), keep_shape) - correction);
    autograd::record(Op::std, out, {&x},
                     [sx = SavedTensor(x), so = SavedTensor(out), dims, keep_shape, dof](
                         const Tensor& g, GradList& gi) {
                       const Tensor xv = sx.get(), s = so.get().reshape(keep_shape);
                       const Tensor scale = where(eq(s, 0.0), zeros_like(s),
                                                  div(g.reshape(keep_shape), mul(s, dof)));
                       gi[0] = mul(sub(xv, mean(xv, dims, true)), scale);
                     });
  }
  return out;
}
Tensor std(const Tensor& x, int64_t correction) { return std(x, Shape{}, correction, false); }

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  if (const auto c = ops::autocast(Op::logsumexp, {&x})) return logsumexp(c[0], dims, keepdim);
  const ops::OpScope op_scope(Op::logsumexp, x);
  ops::check_supported(Op::logsumexp, x);
  if (x.numel() == 0) {  // an empty sum of exponentials: log 0 = -inf (PyTorch)
    return sum(x, dims, keepdim) - static_cast<double>(INFINITY);
  }
  // Shifted by the (constant, detached) maximum so exp cannot overflow; an infinite maximum
  // shifts by 0 instead, so all -inf gives -inf and +inf gives +inf (PyTorch's rule).
  Tensor m = max(x.detach(), dims, true);
  m = where(isinf(m), zeros_like(m), m);
  Tensor out = add(log(sum(exp(sub(x, m)), dims, true)), m);
  if (keepdim) return out;
  return sum(out, dims, false);  // drops the kept size-1 dims (the sum of one element each)
}

Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  if (const auto c = ops::autocast(Op::norm, {&x})) return norm(c[0], p, dims, keepdim);
  const ops::OpScope op_scope(Op::norm, x);
  ops::check_supported(Op::norm, x);
  EMBER_CHECK(!std::isnan(p), op_name(Op::norm), ": the order p is NaN");
  const Tensor a = abs(x);
  if (p == 2.0) return sqrt(sum(square(x), dims, keepdim));
  if (p == 1.0) return sum(a, dims, keepdim);
  if (std::isinf(p)) return p > 0 ? max(a, dims, keepdim) : min(a, dims, keepdim);
  if (p == 0.0) {
    // The count of non-zeros: piecewise constant, so differentiable with a zero gradient (as
    // PyTorch), not cut from the graph.
    Tensor out = sum(nonzero_mask(x), dims, keepdim).to(x.dtype());
    if (autograd::needs_grad(x))
      autograd::record(
          Op::norm, out, {&x},
          [shape = x.shape(), dtype = x.dtype(), device = x.device()](const Tensor&, GradList& gi) {
            gi[0] = zeros(shape, {.dtype = dtype, .device = device});
          });
    return out;
  }
  return pow(sum(pow(a, p), dims, keepdim), 1.0 / p);
}

Tensor nansum(const Tensor& x, const Shape& dims, bool keepdim) {
  const ops::UserOp user(Op::nansum, {&x});
  const ops::OpScope op_scope(Op::nansum, x);
  ops::check_supported(Op::nansum, x);
  return sum(where(isnan(x), zeros(Shape{}, {.dtype = x.dtype(), .device = x.device()}), x), dims,
             keepdim);
}
Tensor nanmean(const Tensor& x, const Shape& dims, bool keepdim) {
  const ops::UserOp user(Op::nanmean, {&x});
  const ops::OpScope op_scope(Op::nanmean, x);
  ops::check_supported(Op::nanmean, x);
  Tensor present = sum(logical_not(isnan(x)), dims, keepdim).to(x.dtype());
  return div(nansum(x, dims, keepdim), present);
}

Tensor count_nonzero(const Tensor& x, const Shape& dims) {
  const ops::OpScope op_scope(Op::count_nonzero, x);
  ops::check_supported(Op::count_nonzero, x);
  return sum(nonzero_mask(x), dims, false);
}

Tensor any(const Tensor& x, const Shape& dims, bool keepdim) {
  const ops::OpScope op_scope(Op::any, x);
  ops::check_supported(Op::any, x);
  return gt(sum(nonzero_mask(x), dims, keepdim), 0.0);
}
Tensor all(const Tensor& x, const Shape& dims, bool keepdim) {
  const ops::OpScope op_scope(Op::all, x);
  ops::check_supported(Op::all, x);
  return eq(sum(logical_not(x.detach()), dims, keepdim), 0.0);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  const ops::OpScope op_scope(Op::sum_to, x);
  ops::check_supported(Op::sum_to, x);
  if (x.shape() == shape) return x;
  const int lead = x.dim() - shape.size();
  EMBER_CHECK(lead >= 0, op_name(Op::sum_to), ": cannot reduce shape ", x.shape().to_string(),
              " to larger rank shape ", shape.to_string());
  Shape dims;
  for (int i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
      continue;
    }
    const int64_t want = shape[i - lead];
    if (want == 1 && x.shape()[i] != 1) {
      dims.push_back(i);
    } else {
      EMBER_CHECK(want == x.shape()[i], op_name(Op::sum_to), ": shape ", x.shape().to_string(),
                  " does not broadcast from ", shape.to_string());
    }
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

}  // namespace ember
