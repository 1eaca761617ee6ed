// src/ops/statistics.cpp — issue 32's reductions and scans: logcumsumexp (the scan slot's
// logaddexp steps), mode, aminmax, var_mean/std_mean, quantile/nanquantile, histc, bincount
// and the trapezoidal rule. All but logcumsumexp are composites of sort, gather, index_add
// and the reductions.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "ember/ops_shape.hpp"
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using backend::ScanOp;

namespace {

// The logaddexp scan of x along d (rank >= 1, f32/f64), recorded for autograd. With
// out_j = log Σ_{i<=j} e^{x_i}: d out_j / d x_i = e^{x_i - out_j}, so the gradient is
// e^{x_i} Σ_{j>=i} g_j e^{-out_j}: the sums run as reverse log-domain scans of the positive
// and the negative parts of g (never exp of a large value).
Tensor log_scan(const Tensor& x, int d, bool reverse) {
  Tensor xc;
  {
    NoGradGuard no_grad;
    xc = x.contiguous();
  }
  Tensor out = ops::make_tensor(x.shape(), x.dtype(), x.device());
  if (x.numel() > 0)
    ops::backend_of(x).scan(ScanOp::logaddexp, ops::view_of(out), backend::View{}, ops::view_of(xc),
                            d, reverse);
  if (autograd::needs_grad(x))
    autograd::record(
        Op::logcumsumexp, out, {&x},
        [d, reverse, sx = SavedTensor(x), so = SavedTensor(out)](const Tensor& g, GradList& gi) {
          const Tensor xs = sx.get(), outs = so.get();
          Tensor up = log_scan(log(clamp_min(g, 0.0)) - outs, d, !reverse);
          Tensor down = log_scan(log(clamp_min(neg(g), 0.0)) - outs, d, !reverse);
          gi[0] = exp(xs + up) - exp(xs + down);
        });
  return out;
}

// dim d of x (a 0-d x as one element along dim 0), with its line length checked non-empty.
int line_dim(Op op, const Tensor& x, int64_t dim) {
  const int d = wrap_dim(dim, x.dim(), op_name(op));
  EMBER_CHECK(x.shape()[d] > 0, op_name(op), ": dim ", dim, " of shape ", x.shape().to_string(),
              " is empty (expected at least one element)");
  return d;
}

Shape keep_shape(const Shape& s, int d) {
  Shape k = s;
  k[d] = 1;
  return k;
}

// The position of each line's mode in [rows, n] host values: the most frequent value, the
// smallest of equally frequent ones, at its last position (PyTorch's rule).
template <typename T>
std::vector<int64_t> mode_positions(const std::vector<T>& v, int64_t rows, int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(rows));
  std::vector<int64_t> order(static_cast<size_t>(n));
  auto is_nan = [](T a) { return a != a; };
  auto same = [&](T a, T b) { return a == b || (is_nan(a) && is_nan(b)); };
  for (int64_t r = 0; r < rows; ++r) {
    const T* line = v.data() + r * n;
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      if (is_nan(line[a])) return false;
      return is_nan(line[b]) || line[a] < line[b];
    });
    int64_t best = -1, best_count = 0;
    for (int64_t s = 0; s < n;) {
      int64_t e = s + 1;
      while (e < n && same(line[order[e]], line[order[s]])) ++e;
      if (e - s > best_count) {
        best_count = e - s;
        best = order[e - 1];  // a stable sort keeps equal values in index order
      }
      s = e;
    }
    out[r] = best;
  }
  return out;
}

bool known_interpolation(const std::string& m) {
  return m == "linear" || m == "lower" || m == "higher" || m == "nearest" || m == "midpoint";
}

// quantile / nanquantile at each of `qs` (checked in [0, 1]); a 1-D q (`q_vector`) stacks the
// results in a new leading dim.
Tensor quantiles(Op op, const Tensor& x_in, const std::vector<double>& qs, bool q_vector,
                 std::optional<int64_t> dim, bool keepdim, const std::string& interpolation) {
  const char* name = op_name(op);
  ops::check_supported(op, x_in);
  EMBER_CHECK(known_interpolation(interpolation), name, ": interpolation '", interpolation,
              "' (expected linear, lower, higher, nearest or midpoint)");
  for (double q : qs) EMBER_CHECK(q >= 0.0 && q <= 1.0, name, ": q ", q, " (expected 0 <= q <= 1)");
  const Tensor x =
      dim ? (x_in.dim() == 0 ? x_in.reshape({1}) : x_in) : x_in.reshape({x_in.numel()});
  const int d = line_dim(op, x, dim.value_or(0));
  const int64_t n = x.shape()[d];
  const Shape keep = keep_shape(x.shape(), d);
  const TensorOptions f64{.dtype = DType::f64, .device = x.device()};
  Tensor sorted = sort(x, d).values;  // NaN last
  Tensor valid_count, has_nan;
  {
    NoGradGuard no_grad;
    Tensor nan = isnan(x);
    if (op == Op::nanquantile)
      valid_count = sum(logical_not(nan), {d}, true).to(DType::f64);
    else
      has_nan = any(nan, {d}, true);
  }
  auto pick = [&](const Tensor& rank) { return gather(sorted, d, rank.to(DType::i64)); };
  std::vector<Tensor> results;
  for (double q : qs) {
    Tensor rank = op == Op::nanquantile ? clamp_min((valid_count - 1.0) * q, 0.0)
                                        : full(keep, q * static_cast<double>(n - 1), f64);
    Tensor below = floor(rank), above = ceil(rank), r;
    if (interpolation == "lower") {
      r = pick(below);
    } else if (interpolation == "higher") {
      r = pick(above);
    } else if (interpolation == "nearest") {
      r = pick(round(rank));
    } else {
      Tensor lo = pick(below), hi = pick(above);
      Tensor w = interpolation == "midpoint" ? full(keep, 0.5, f64) : rank - below;
      r = lo + (hi - lo) * w.to(x.dtype());
    }
    if (has_nan.defined())
      r = where(has_nan, full(Shape{}, std::nan(""), {.dtype = x.dtype(), .device = x.device()}),
                r);
    if (!dim)
      r = keepdim ? r.reshape(Shape::filled(x_in.dim(), 1)) : r.reshape(Shape{});
    else if (!keepdim || x_in.dim() == 0)
      r = x_in.dim() == 0 ? r.reshape(Shape{}) : r.squeeze(d);
    results.push_back(r);
  }
  return q_vector ? stack(results, 0) : results[0];
}

std::vector<double> q_values(Op op, const Tensor& x, const Tensor& q) {
  ops::check_defined(op_name(op), q, "q");
  EMBER_CHECK(q.dim() <= 1, op_name(op), ": q shape ", q.shape().to_string(),
              " (expected a 0-d or 1-D tensor)");
  ops::check_same_dtype(op_name(op), x, q);
  return q.to(DType::f64).to_vector<double>();
}

Tensor trapezoid_impl(Op op, const Tensor& y, const Tensor& x, double dx, int64_t dim) {
  const char* name = op_name(op);
  ops::check_supported(op, y);
  EMBER_CHECK(y.dim() >= 1, name, ": a 0-d y (expected at least 1 dim)");
  const int d = wrap_dim(dim, y.dim(), name);
  const int64_t n = y.shape()[d], len = std::max<int64_t>(n - 1, 0);
  Tensor yy = y, spacing;
  if (x.defined()) {
    auto [ya, xa] = ops::promote(op, y, x);
    yy = ya;
    if (xa.dim() == 1) {
      EMBER_CHECK(xa.numel() == n, name, ": x of ", xa.numel(), " points for dim ", dim,
                  " of size ", n, " (expected as many)");
      Shape s = Shape::filled(y.dim(), 1);
      s[d] = len;
      spacing = diff(xa).reshape(s);
    } else {
      EMBER_CHECK(xa.dim() == y.dim(), name, ": x shape ", xa.shape().to_string(), " for y shape ",
                  y.shape().to_string(), " (expected 1-D or y's rank)");
      spacing = diff(xa, 1, d);
    }
  }
  Tensor pairs = n > 0 ? yy.narrow(d, 1, len) + yy.narrow(d, 0, len) : yy;
  Tensor area = spacing.defined() ? pairs * spacing * 0.5 : pairs * (0.5 * dx);
  return op == Op::cumulative_trapezoid ? cumsum(area, d) : sum(area, {d});
}

}  // namespace

Tensor logcumsumexp(const Tensor& x_in, int64_t dim) {
  const ops::OpScope op_scope(Op::logcumsumexp, x_in);
  ops::check_supported(Op::logcumsumexp, x_in);
  const Tensor x = x_in.dim() == 0 ? x_in.reshape({1}) : x_in;
  const int d = wrap_dim(dim, x.dim(), "logcumsumexp");
  Tensor out = log_scan(x, d, false);
  return x_in.dim() == 0 ? out.reshape(Shape{}) : out;
}

ValuesIndices mode(const Tensor& x_in, int64_t dim, bool keepdim) {
  const ops::UserOp user(Op::mode, {&x_in});
  ops::check_supported(Op::mode, x_in);
  const Tensor x = x_in.dim() == 0 ? x_in.reshape({1}) : x_in;
  const int d = line_dim(Op::mode, x, dim);
  const int64_t n = x.shape()[d], rows = x.numel() / n;
  std::vector<int64_t> at;
  Shape line_keep;  // x's shape with d moved last, of size 1
  {
    NoGradGuard no_grad;
    Tensor lines = movedim(x.detach(), d, -1).contiguous();
    line_keep = keep_shape(lines.shape(), lines.dim() - 1);
    if (x.dtype() == DType::i64)
      at = mode_positions(lines.to_vector<int64_t>(), rows, n);
    else
      at = mode_positions(lines.to(DType::f64).to_vector<double>(), rows, n);
  }
  Tensor idx = movedim(from_vector<int64_t>(at, line_keep).to(x.device()), -1, d).contiguous();
  Tensor values = gather(x, d, idx);
  if (x_in.dim() == 0) return {values.reshape(Shape{}), idx.reshape(Shape{})};
  if (!keepdim) return {values.squeeze(d), idx.squeeze(d)};
  return {values, idx};
}

MinMax aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  const ops::UserOp user(Op::aminmax, {&x});
  ops::check_supported(Op::aminmax, x);
  const Shape dims = dim ? Shape{*dim} : Shape{};
  if (dim && x.dim() > 0) line_dim(Op::aminmax, x, *dim);
  return {amin(x, dims, keepdim), amax(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> var_mean(const Tensor& x, const Shape& dims, int64_t correction,
                                   bool keepdim) {
  const ops::UserOp user(Op::var_mean, {&x});
  ops::check_supported(Op::var_mean, x);
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::pair<Tensor, Tensor> std_mean(const Tensor& x, const Shape& dims, int64_t correction,
                                   bool keepdim) {
  const ops::UserOp user(Op::std_mean, {&x});
  ops::check_supported(Op::std_mean, x);
  return {ember::std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  const ops::UserOp user(Op::quantile, {&x});
  return quantiles(Op::quantile, x, {q}, false, dim, keepdim, interpolation);
}
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  const ops::UserOp user(Op::quantile, {&x, &q});
  ops::check_supported(Op::quantile, x);
  return quantiles(Op::quantile, x, q_values(Op::quantile, x, q), q.dim() == 1, dim, keepdim,
                   interpolation);
}
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  const ops::UserOp user(Op::nanquantile, {&x});
  return quantiles(Op::nanquantile, x, {q}, false, dim, keepdim, interpolation);
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  const ops::UserOp user(Op::nanquantile, {&x, &q});
  ops::check_supported(Op::nanquantile, x);
  return quantiles(Op::nanquantile, x, q_values(Op::nanquantile, x, q), q.dim() == 1, dim, keepdim,
                   interpolation);
}

Tensor histc(const Tensor& x, int64_t bins, double min, double max) {
  const ops::UserOp user(Op::histc, {&x});
  ops::check_supported(Op::histc, x);
  EMBER_CHECK(bins > 0, "histc: bins ", bins, " (expected bins > 0)");
  EMBER_CHECK(min <= max, "histc: max ", max, " is below min ", min, " (expected min <= max)");
  NoGradGuard no_grad;
  double lo = min, hi = max;
  if (lo == hi && x.numel() > 0) {  // the data's own range, read on the host
    lo = amin(x).to(DType::f64).item<double>();
    hi = amax(x).to(DType::f64).item<double>();
  }
  if (lo == hi) {
    lo -= 1.0;
    hi += 1.0;
  }
  EMBER_CHECK(std::isfinite(lo) && std::isfinite(hi), "histc: range [", lo, ", ", hi,
              "] is not finite (expected finite bounds)");
  Tensor flat = x.reshape({x.numel()});
  Tensor inside = logical_and(ge(flat, lo), le(flat, hi));  // NaN is outside
  Tensor pos = floor((flat - lo) * static_cast<double>(bins) / (hi - lo));
  Tensor bin = clamp(where(inside, pos, zeros_like(pos)), 0.0, static_cast<double>(bins - 1));
  Tensor counts = zeros({bins}, {.dtype = x.dtype(), .device = x.device()});
  return index_add(counts, 0, bin.to(DType::i64), inside.to(x.dtype()));
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  const ops::UserOp user(Op::bincount, {&x, &weights});
  ops::check_supported(Op::bincount, x);
  EMBER_CHECK(x.dim() == 1, "bincount: input shape ", x.shape().to_string(),
              " (expected a 1-D tensor of non-negative integers)");
  EMBER_CHECK(minlength >= 0, "bincount: minlength ", minlength, " (expected >= 0)");
  if (weights.defined()) {
    EMBER_CHECK(weights.shape() == x.shape(), "bincount: weights shape ",
                weights.shape().to_string(), " (expected the input's ", x.shape().to_string(), ")");
    ops::check_same_device("bincount", x, weights);
  }
  NoGradGuard no_grad;
  int64_t size = minlength;
  if (x.numel() > 0) {  // the length depends on the data: read on the host, as nonzero
    const int64_t lo = amin(x).to(DType::i64).item<int64_t>();
    EMBER_CHECK(lo >= 0, "bincount: value ", lo, " (expected non-negative integers)");
    size = std::max(size, amax(x).to(DType::i64).item<int64_t>() + 1);
  }
  const DType out = weights.defined() ? weights.dtype() : DType::i64;
  Tensor src = weights.defined() ? weights.detach()
                                 : ones({x.numel()}, {.dtype = DType::i64, .device = x.device()});
  return index_add(zeros({size}, {.dtype = out, .device = x.device()}), 0, x, src);
}

Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  const ops::UserOp user(Op::trapezoid, {&y, &x});
  ops::check_defined("trapezoid", x, "x");
  return trapezoid_impl(Op::trapezoid, y, x, 1.0, dim);
}
Tensor trapezoid(const Tensor& y, double dx, int64_t dim) {
  const ops::UserOp user(Op::trapezoid, {&y});
  return trapezoid_impl(Op::trapezoid, y, Tensor(), dx, dim);
}
Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  const ops::UserOp user(Op::cumulative_trapezoid, {&y, &x});
  ops::check_defined("cumulative_trapezoid", x, "x");
  return trapezoid_impl(Op::cumulative_trapezoid, y, x, 1.0, dim);
}
Tensor cumulative_trapezoid(const Tensor& y, double dx, int64_t dim) {
  const ops::UserOp user(Op::cumulative_trapezoid, {&y});
  return trapezoid_impl(Op::cumulative_trapezoid, y, Tensor(), dx, dim);
}

}  // namespace ember
