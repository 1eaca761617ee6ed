// src/ops/sort.cpp — sorting and selection along a dim (sort, argsort, topk, kthvalue, median,
// nanmedian, max/min with their indices) and the scans (cumsum, cumprod, cummax, cummin, diff).
//
// Every selection is one order (the backend's sort slot: indices of each row in sorted order,
// NaN greatest, ties in input order) followed by gather, so values are differentiable through
// gather's backward (the gradient goes to the selected positions) and every dtype gather takes.
// Scans are the backend's scan slot; their backward rules are scans too (below).
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using backend::ScanOp;

namespace {

// The positions (i64, x's shape) that sort x along d, from the backend's sort slot (which
// sorts the last dim of a contiguous tensor). x has rank >= 1.
Tensor order_of(const Tensor& x, int d, bool descending) {
  NoGradGuard no_grad;
  const bool last = d == x.dim() - 1;
  Tensor xc = (last ? x : x.transpose(d, -1)).contiguous();
  Tensor idx = ops::make_tensor(xc.shape(), DType::i64, x.device());
  ops::backend_of(x).sort(ops::view_of(idx), ops::view_of(xc), descending);
  return last ? idx : idx.transpose(d, -1);
}

// A 0-d input is handled as one element along dim 0, as PyTorch does.
Tensor as_rank1(const Tensor& x) { return x.dim() == 0 ? x.reshape({1}) : x; }

ValuesIndices finish(const Tensor& x, Tensor values, Tensor indices, int d, bool keepdim) {
  if (x.dim() == 0) return {values.reshape({}), indices.reshape({})};
  if (!keepdim) return {values.squeeze(d), indices.squeeze(d)};
  return {values, indices};
}

void check_nonempty(Op op, const Tensor& x, int d) {
  EMBER_CHECK(x.shape()[d] > 0, op_name(op), ": cannot select from an empty dim ", d, " (shape ",
              x.shape().to_string(), ")");
}

// The element at sorted position k (i64, x's shape with dim d of size 1) along d.
ValuesIndices pick_sorted(const Tensor& x, const Tensor& order, int d, const Tensor& k) {
  Tensor pos = gather(order, d, k);
  return {gather(x, d, pos), pos};
}

ValuesIndices median_of(Op op, const Tensor& x_in, int64_t dim, bool keepdim) {
  const ops::OpScope op_scope(op, x_in);
  ops::check_supported(op, x_in);
  const Tensor x = as_rank1(x_in);
  const int d = wrap_dim(dim, x.dim(), op_name(op));
  check_nonempty(op, x, d);
  const int64_t n = x.shape()[d];
  Shape keep = x.shape();
  keep[d] = 1;
  const TensorOptions f64{.dtype = DType::f64, .device = x.device()};
  Tensor k;  // the sorted position of each median
  if (!is_floating(x.dtype())) {
    k = full(keep, static_cast<double>((n - 1) / 2), {.dtype = DType::i64, .device = x.device()});
  } else {
    NoGradGuard no_grad;
    // Non-NaN elements sort first (Note [Sort order]); `valid` counts them.
    Tensor valid = sum(logical_not(isnan(x)), Shape{d}, true).to(DType::f64);
    Tensor kf = op == Op::median
                    // a NaN in the slice is its median: the first NaN in sorted order
                    ? where(lt(valid, static_cast<double>(n)), valid,
                            scalar_tensor(static_cast<double>((n - 1) / 2), f64))
                    // the lower median of the non-NaN elements (NaN when there are none)
                    : floor(clamp_min(valid - 1.0, 0.0) * 0.5);
    k = kf.to(DType::i64);
  }
  ValuesIndices r = pick_sorted(x, order_of(x, d, false), d, k);
  return finish(x_in, r.values, r.indices, d, keepdim);
}

ValuesIndices extreme_with_indices(Op op, const Tensor& x_in, int64_t dim, bool keepdim) {
  const ops::OpScope op_scope(op, x_in);
  ops::check_supported(op, x_in);
  const Tensor x = as_rank1(x_in);
  const int d = wrap_dim(dim, x.dim(), op_name(op));
  check_nonempty(op, x, d);
  Tensor idx = op == Op::max_with_indices ? argmax(x, d, true) : argmin(x, d, true);
  return finish(x_in, gather(x, d, idx), idx, d, keepdim);
}

}  // namespace

ValuesIndices sort(const Tensor& x_in, int64_t dim, bool descending, bool /*stable*/) {
  const ops::OpScope op_scope(Op::sort, x_in);
  ops::check_supported(Op::sort, x_in);
  const Tensor x = as_rank1(x_in);
  const int d = wrap_dim(dim, x.dim(), "sort");
  Tensor idx = order_of(x, d, descending);
  return finish(x_in, gather(x, d, idx), idx, d, true);
}

Tensor argsort(const Tensor& x_in, int64_t dim, bool descending, bool /*stable*/) {
  const ops::OpScope op_scope(Op::argsort, x_in);
  ops::check_supported(Op::argsort, x_in);
  const Tensor x = as_rank1(x_in);
  const int d = wrap_dim(dim, x.dim(), "argsort");
  Tensor idx = order_of(x, d, descending);
  return x_in.dim() == 0 ? idx.reshape({}) : idx;
}

ValuesIndices topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  const ops::OpScope op_scope(Op::topk, x_in);
  ops::check_supported(Op::topk, x_in);
  const Tensor x = as_rank1(x_in);
  const int d = wrap_dim(dim, x.dim(), "topk");
  const int64_t n = x.shape()[d];
  EMBER_CHECK(k >= 0 && k <= n, "topk: k ", k, " is out of range for dim ", dim, " of size ", n,
              " (expected 0 <= k <= ", n, ")");
  Tensor idx = order_of(x, d, largest).narrow(d, 0, k);
  return finish(x_in, gather(x, d, idx), idx, d, true);
}

ValuesIndices kthvalue(const Tensor& x_in, int64_t k, int64_t dim, bool keepdim) {
  const ops::OpScope op_scope(Op::kthvalue, x_in);
  ops::check_supported(Op::kthvalue, x_in);
  const Tensor x = as_rank1(x_in);
  const int d = wrap_dim(dim, x.dim(), "kthvalue");
  const int64_t n = x.shape()[d];
  EMBER_CHECK(k >= 1 && k <= n, "kthvalue: k ", k, " is out of range for dim ", dim, " of size ", n,
              " (expected 1 <= k <= ", n, ")");
  Tensor pos = order_of(x, d, false).narrow(d, k - 1, 1);
  return finish(x_in, gather(x, d, pos), pos, d, keepdim);
}

ValuesIndices median(const Tensor& x, int64_t dim, bool keepdim) {
  return median_of(Op::median, x, dim, keepdim);
}
Tensor median(const Tensor& x) {
  ops::check_defined("median", x);
  return median_of(Op::median, x.reshape({x.numel()}), 0, false).values;
}
ValuesIndices nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  return median_of(Op::nanmedian, x, dim, keepdim);
}
Tensor nanmedian(const Tensor& x) {
  ops::check_defined("nanmedian", x);
  return median_of(Op::nanmedian, x.reshape({x.numel()}), 0, false).values;
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_with_indices(Op::max_with_indices, x, dim, keepdim);
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_with_indices(Op::min_with_indices, x, dim, keepdim);
}
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { return max(x, dims, keepdim); }
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) { return min(x, dims, keepdim); }

// ---- scans ----

namespace {

// The scan of x along d (rank >= 1, dtype already the result's), recorded for autograd.
// Backward rules:
//   cumsum:  the reverse cumsum of g (each input reaches every later output once);
//   cumprod: cumprod_backward below (exact with zeros);
//   cummax / cummin: g scattered back to the position each output came from.
ValuesIndices run_scan(Op op, ScanOp kind, const Tensor& x, int d, bool reverse);

// d/dx of sum(g · cumprod(x)) along d, exact when x has zeros: with z the first zero of a
// line, positions before z get revcumsum(g · out) / x; z gets revcumsum(g · P) at z, where
// P is the cumprod of x with x_z replaced by 1; positions after z get 0.
Tensor cumprod_backward(const Tensor& g, const Tensor& x, const Tensor& out, int d) {
  Tensor zero = eq(x, 0.0);
  Tensor zeros_so_far = run_scan(Op::cumsum, ScanOp::sum, zero.to(DType::i64), d, false).values;
  Tensor before = eq(zeros_so_far, 0.0);
  Tensor first_zero = logical_and(zero, eq(zeros_so_far, 1.0));
  Tensor ahead = run_scan(Op::cumsum, ScanOp::sum, g * out, d, true).values /
                 masked_fill(x, logical_not(before), 1.0);
  Tensor skipping =
      run_scan(Op::cumprod, ScanOp::prod, masked_fill(x, first_zero, 1.0), d, false).values;
  Tensor at_zero = run_scan(Op::cumsum, ScanOp::sum, g * skipping, d, true).values;
  return where(before, ahead, masked_fill(at_zero, logical_not(first_zero), 0.0));
}

ValuesIndices run_scan(Op op, ScanOp kind, const Tensor& x, int d, bool reverse) {
  const bool indexed = kind == ScanOp::max || kind == ScanOp::min;
  Tensor xc;
  {
    NoGradGuard no_grad;
    xc = x.contiguous();
  }
  Tensor out = ops::make_tensor(x.shape(), x.dtype(), x.device());
  Tensor idx = indexed ? ops::make_tensor(x.shape(), DType::i64, x.device()) : Tensor();
  ops::backend_of(x).scan(kind, ops::view_of(out), indexed ? ops::view_of(idx) : backend::View{},
                          ops::view_of(xc), d, reverse);
  if (autograd::needs_grad(x)) {
    switch (kind) {
      case ScanOp::sum:
        autograd::record(op, out, {&x}, [d, reverse](const Tensor& g, GradList& gi) {
          gi[0] = run_scan(Op::cumsum, ScanOp::sum, g, d, !reverse).values;
        });
        break;
      case ScanOp::prod:
        autograd::record(
            op, out, {&x},
            [d, sx = SavedTensor(x), so = SavedTensor(out)](const Tensor& g, GradList& gi) {
              gi[0] = cumprod_backward(g, sx.get(), so.get(), d);
            });
        break;
      default:
        autograd::record(op, out, {&x},
                         [d, in = x.shape(), si = SavedTensor(idx)](const Tensor& g, GradList& gi) {
                           Tensor z = zeros(in, {.dtype = g.dtype(), .device = g.device()});
                           gi[0] = scatter_add(z, d, si.get(), g);
                         });
    }
  }
  return {out, idx};
}

ValuesIndices scan_op(Op op, ScanOp kind, const Tensor& x_in, int64_t dim) {
  const ops::OpScope op_scope(op, x_in);
  ops::check_supported(op, x_in);
  Tensor x = as_rank1(x_in);
  const int d = wrap_dim(dim, x.dim(), op_name(op));
  // Integer sums and products run in i64, as in PyTorch (an i32 cumsum cannot overflow).
  if ((kind == ScanOp::sum || kind == ScanOp::prod) && !is_floating(x.dtype()))
    x = x.to(DType::i64);
  ValuesIndices r = run_scan(op, kind, x, d, false);
  if (x_in.dim() == 0)
    return {r.values.reshape({}), r.indices.defined() ? r.indices.reshape({}) : r.indices};
  return r;
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) {
  if (const auto c = ops::autocast(Op::cumsum, {&x})) return cumsum(c[0], dim);
  return scan_op(Op::cumsum, ScanOp::sum, x, dim).values;
}
Tensor cumprod(const Tensor& x, int64_t dim) {
  if (const auto c = ops::autocast(Op::cumprod, {&x})) return cumprod(c[0], dim);
  return scan_op(Op::cumprod, ScanOp::prod, x, dim).values;
}
ValuesIndices cummax(const Tensor& x, int64_t dim) {
  return scan_op(Op::cummax, ScanOp::max, x, dim);
}
ValuesIndices cummin(const Tensor& x, int64_t dim) {
  return scan_op(Op::cummin, ScanOp::min, x, dim);
}

Tensor diff(const Tensor& x, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  const ops::OpScope op_scope(Op::diff, x);
  ops::check_supported(Op::diff, x);
  EMBER_CHECK(x.dim() >= 1, "diff: expected a tensor of at least one dim (got a 0-d tensor)");
  EMBER_CHECK(n >= 0, "diff: order n ", n, " (expected n >= 0)");
  const int d = wrap_dim(dim, x.dim(), "diff");
  std::vector<Tensor> parts;
  for (const Tensor* p : {&prepend, &x, &append}) {
    if (!p->defined()) continue;
    Shape want = x.shape(), got = p->shape();
    if (got.size() == want.size()) want[d] = got[d];
    EMBER_CHECK(got == want, "diff: ", p == &prepend ? "prepend" : "append", " shape ",
                got.to_string(), " does not fit input shape ", x.shape().to_string(), " (expected ",
                want.to_string(), ": every dim but ", dim, " equal)");
    ops::check_same_dtype("diff", x, *p);
    ops::check_same_device("diff", x, *p);
    parts.push_back(*p);
  }
  Tensor y = parts.size() == 1 ? x : cat(parts, d);
  for (int64_t i = 0; i < n && y.shape()[d] > 0; ++i) {
    const int64_t len = y.shape()[d] - 1;
    y = y.narrow(d, 1, len) - y.narrow(d, 0, len);
  }
  return y;
}

}  // namespace ember
