// src/ops/index.cpp — indexing: index_select, gather, scatter_add, embedding. Index errors name the
// offending index and the valid range.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

// ---- indexing ----

namespace {

// Finds the first index outside [0, size) and throws naming it (called after a kernel
// reported a bad index, so the host scan only runs on the error path).
[[noreturn]] void throw_bad_index(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  std::vector<int64_t> v = index.to(DType::i64).to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= size)
      detail::throw_error(detail::concat(op, ": index ", v[i], " (at position ", i,
                                         ") is out of range for dim ", dim, " of size ", size,
                                         " (expected indices in [0, ", size, "))"));
  detail::throw_error(
      detail::concat(op, ": an index is out of range for dim ", dim, " of size ", size));
}

Tensor index_add_into(const Shape& shape, int d, const Tensor& index, const Tensor& src) {
  Tensor z = zeros(shape, {.dtype = src.dtype(), .device = src.device()});
  Tensor sc = src.contiguous();
  ops::backend_of(z).index_add(ops::view_of(z), d, ops::view_of(index), ops::view_of(sc));
  return z;
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const ops::OpScope op_scope(Op::index_select, x);
  ops::check_supported(Op::index_select, x);
  ops::check_defined("index_select", index, "index");
  ops::check_index_dtype("index_select", index);
  ops::check_same_device("index_select", x, index);
  EMBER_CHECK(index.dim() <= 1, op_name(Op::index_select), ": index shape ",
              index.shape().to_string(), " (expected a 1-D index)");
  const int d = wrap_dim(dim, x.dim(), "index_select");
  if (x.dim() == 0) {
    // A 0-d tensor is one element along its only possible dim: every index must be 0, and
    // the result is the value itself (0-d), as PyTorch.
    EMBER_CHECK(index.numel() >= 1, op_name(Op::index_select),
                ": an empty index for a 0-d input (expected at least one index, 0)");
    return index_select(x.reshape({1}), 0, index.reshape({index.numel()}))
        .narrow(0, 0, 1)
        .reshape(Shape{});
  }
  Tensor xc = x.contiguous(), ic = index.contiguous();
  Shape shape = x.shape();
  if (x.dim() > 0) shape[d] = index.numel();
  Tensor out = ops::make_tensor(shape, x.dtype(), x.device());
  if (!ops::backend_of(x).index_select(ops::view_of(out), ops::view_of(xc), d, ops::view_of(ic)))
    throw_bad_index("index_select", ic, dim, x.dim() ? x.shape()[d] : 1);
  if (autograd::needs_grad(x))
    autograd::record(Op::index_select, out, {&x},
                     [in = x.shape(), d, si = SavedTensor(ic)](const Tensor& g, GradList& gi) {
                       gi[0] = index_add_into(in, d, si.get(),
                                              g);  // scatter-add: repeated indices accumulate
                     });
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const ops::OpScope op_scope(Op::gather, x);
  ops::check_supported(Op::gather, x);
  ops::check_defined("gather", index, "index");
  ops::check_index_dtype("gather", index);
  ops::check_same_device("gather", x, index);
  const int d = wrap_dim(dim, x.dim(), "gather");
  EMBER_CHECK(index.dim() == x.dim(), op_name(Op::gather), ": index shape ",
              index.shape().to_string(), " and input shape ", x.shape().to_string(),
              " (expected the same rank)");
  for (int i = 0; i < x.dim(); ++i)
    EMBER_CHECK(i == d || index.shape()[i] <= x.shape()[i], op_name(Op::gather), ": index shape ",
                index.shape().to_string(), " is larger than input shape ", x.shape().to_string(),
                " in dim ", i);
  Tensor xc = x.contiguous(), ic = index.contiguous();
  Tensor out = ops::make_tensor(index.shape(), x.dtype(), x.device());
  if (!ops::backend_of(x).gather(ops::view_of(out), ops::view_of(xc), d, ops::view_of(ic)))
    throw_bad_index("gather", ic, dim, x.shape()[d]);
  if (autograd::needs_grad(x))
    autograd::record(Op::gather, out, {&x},
                     [in = x.shape(), d, si = SavedTensor(ic)](const Tensor& g, GradList& gi) {
                       Tensor z = zeros(in, {.dtype = g.dtype(), .device = g.device()});
                       Tensor gc = g.contiguous();
                       ops::backend_of(z).scatter(backend::ScatterOp::sum, ops::view_of(z), d,
                                                  ops::view_of(si.get()), ops::view_of(gc));
                       gi[0] = z;
                     });
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const ops::OpScope op_scope(Op::scatter_add, x);
  ops::check_supported(Op::scatter_add, x);
  ops::check_defined("scatter_add", index, "index");
  ops::check_defined("scatter_add", src, "src");
  ops::check_index_dtype("scatter_add", index);
  ops::check_same_dtype("scatter_add", x, src);
  ops::check_same_device("scatter_add", x, src);
  const int d = wrap_dim(dim, x.dim(), "scatter_add");
  EMBER_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), op_name(Op::scatter_add),
              ": index shape ", index.shape().to_string(), ", src shape ", src.shape().to_string(),
              " and input shape ", x.shape().to_string(), " (expected the same rank)");
  for (int i = 0; i < x.dim(); ++i)
    EMBER_CHECK(index.shape()[i] <= src.shape()[i] && (i == d || index.shape()[i] <= x.shape()[i]),
                op_name(Op::scatter_add), ": index shape ", index.shape().to_string(),
                " does not fit src ", src.shape().to_string(), " and input ",
                x.shape().to_string());
  Tensor out;
  {
    NoGradGuard g;
    out = x.clone();
  }
  Tensor ic = index.contiguous();
  // src is cut to index's shape so the kernel sees matching contiguous layouts.
  Tensor sv = src;
  for (int i = 0; i < x.dim(); ++i)
    if (sv.shape()[i] != index.shape()[i]) sv = sv.slice(i, 0, index.shape()[i]);
  Tensor sc;
  {
    NoGradGuard g;
    sc = sv.contiguous();
  }
  if (!ops::backend_of(x).scatter(backend::ScatterOp::sum, ops::view_of(out), d, ops::view_of(ic),
                                  ops::view_of(sc)))
    throw_bad_index("scatter_add", ic, dim, x.shape()[d]);
  if (autograd::needs_grad(x, src)) {
    const bool ns = src.requires_grad();
    autograd::record(
        Op::scatter_add, out, {&x, &src},
        [ns, d, si = SavedTensor(ic), src_shape = src.shape()](const Tensor& g, GradList& gi) {
          gi[0] = g;
          if (ns) {
            Tensor picked = gather(g, d, si.get());
            Tensor z = zeros(src_shape, {.dtype = g.dtype(), .device = g.device()});
            Tensor part = z;
            for (int i = 0; i < picked.dim(); ++i) part = part.slice(i, 0, picked.shape()[i]);
            part.copy_(picked);
            gi[1] = z;
          }
        });
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& index) {
  const ops::UserOp user(Op::embedding, {&weight, &index});
  const ops::OpScope op_scope(Op::embedding, weight);
  ops::check_supported(Op::embedding, weight, "weight");
  ops::check_defined("embedding", index, "index");
  EMBER_CHECK(weight.dim() == 2, op_name(Op::embedding), ": weight shape ",
              weight.shape().to_string(), " (expected [num_embeddings, embedding_dim])");
  ops::check_index_dtype("embedding", index);
  Shape out_shape = index.shape();
  out_shape.push_back(weight.shape()[1]);
  return index_select(weight, 0, index.reshape({index.numel()})).reshape(out_shape);
}

// ---- selection by mask and the index_* family (issue 16) ----

namespace {

// The flat positions (i64, ascending) of the non-zero elements of `mask` and their count.
// The count sizes the result, so it is read on the host, as in PyTorch; the positions come
// from a stable sort that moves non-zero elements first, on the mask's device.
Tensor nonzero_positions(const Tensor& mask) {
  NoGradGuard no_grad;
  Tensor flat = mask.reshape({mask.numel()});
  Tensor is_zero = eq(flat, 0.0).to(DType::i32);
  const int64_t count = flat.numel() - sum(is_zero).item<int64_t>();
  return argsort(is_zero, 0).narrow(0, 0, count);
}

// A bool mask over dim `d` of a tensor of `shape` (broadcastable to it) set at `index`.
Tensor rows_mask(const Shape& shape, int d, const Tensor& index, Device device) {
  Tensor hits = zeros({shape[d]}, {.dtype = DType::i64, .device = device});
  Tensor ones_ = ones({index.numel()}, {.dtype = DType::i64, .device = device});
  Shape s = Shape::filled(shape.size(), 1);
  s[d] = shape[d];
  return gt(index_add(hits, 0, index.reshape({index.numel()}), ones_), 0.0).reshape(s);
}

void check_index_arg(Op op, const Tensor& x, int d, const Tensor& index) {
  const char* name = op_name(op);
  ops::check_defined(name, index, "index");
  ops::check_index_dtype(name, index);
  ops::check_same_device(name, x, index);
  EMBER_CHECK(index.dim() <= 1, name, ": index shape ", index.shape().to_string(),
              " (expected a 1-D index)");
  (void)d;
}

}  // namespace

Tensor nonzero(const Tensor& x) {
  const ops::OpScope op_scope(Op::nonzero, x);
  ops::check_supported(Op::nonzero, x);
  Tensor flat = nonzero_positions(x);
  const int64_t count = flat.numel();
  const TensorOptions i64{.dtype = DType::i64, .device = x.device()};
  if (x.dim() == 0) return zeros({count, 0}, i64);
  // Coordinate d of each position: a grid of dim d's coordinates, picked at the positions.
  std::vector<Tensor> coords;
  for (int d = 0; d < x.dim(); ++d) {
    Shape s = Shape::filled(x.dim(), 1);
    s[d] = x.shape()[d];
    Tensor grid = arange(0, static_cast<double>(x.shape()[d]), 1, i64).reshape(s).expand(x.shape());
    coords.push_back(index_select(grid.reshape({x.numel()}), 0, flat));
  }
  return stack(coords, 1);
}

std::vector<Tensor> where(const Tensor& condition) {
  Tensor nz = nonzero(condition);
  std::vector<Tensor> out;
  for (int d = 0; d < nz.shape()[1]; ++d) out.push_back(nz.select(1, d).contiguous());
  return out;
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  const ops::OpScope op_scope(Op::masked_select, x);
  ops::check_supported(Op::masked_select, x);
  ops::check_defined("masked_select", mask, "mask");
  EMBER_CHECK(mask.dtype() == DType::boolean, "masked_select: mask dtype ",
              dtype_name(mask.dtype()), " (expected bool)");
  ops::check_same_device("masked_select", x, mask);
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  Tensor xb = x.expand(shape).reshape({shape.numel()});
  return index_select(xb, 0, nonzero_positions(mask.expand(shape)));
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha) {
  const ops::OpScope op_scope(Op::index_add, x);
  ops::check_supported(Op::index_add, x);
  const int d = wrap_dim(dim, std::max(x.dim(), 1), "index_add");
  check_index_arg(Op::index_add, x, d, index);
  ops::check_defined("index_add", source, "source");
  ops::check_same_dtype("index_add", x, source);
  ops::check_same_device("index_add", x, source);
  Shape want = x.shape();
  if (x.dim()) want[d] = index.numel();
  EMBER_CHECK(source.shape() == want, "index_add: source shape ", source.shape().to_string(),
              " for input shape ", x.shape().to_string(), " and ", index.numel(),
              " indices (expected ", want.to_string(), ")");
  Tensor out, src;
  {
    NoGradGuard no_grad;
    out = x.clone();
    src = alpha == 1.0 ? source.contiguous() : (source * alpha).contiguous();
  }
  Tensor ic = index.contiguous().reshape({index.numel()});
  if (!ops::backend_of(x).index_add(ops::view_of(out), d, ops::view_of(ic), ops::view_of(src)))
    throw_bad_index("index_add", ic, dim, x.dim() ? x.shape()[d] : 1);
  if (autograd::needs_grad(x, source)) {
    autograd::record(Op::index_add, out, {&x, &source},
                     [d, alpha, si = SavedTensor(ic)](const Tensor& g, GradList& gi) {
                       gi[0] = g;
                       Tensor picked = index_select(g, d, si.get());
                       gi[1] = alpha == 1.0 ? picked : picked * alpha;
                     });
  }
  return out;
}

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, double value) {
  const ops::OpScope op_scope(Op::index_fill, x);
  ops::check_supported(Op::index_fill, x);
  const int d = wrap_dim(dim, std::max(x.dim(), 1), "index_fill");
  check_index_arg(Op::index_fill, x, d, index);
  if (x.dim() == 0) return index_fill(x.reshape({1}), 0, index, value).reshape({});
  return masked_fill(x, rows_mask(x.shape(), d, index, x.device()), value);
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  const ops::UserOp user(Op::index_copy, {&x, &index, &source});
  const ops::OpScope op_scope(Op::index_copy, x);
  ops::check_supported(Op::index_copy, x);
  const int d = wrap_dim(dim, std::max(x.dim(), 1), "index_copy");
  check_index_arg(Op::index_copy, x, d, index);
  // The picked rows of x are cleared and the source rows added in: a copy, once each index is
  // kept only at its last position (PyTorch leaves duplicates to whichever copy lands last;
  // here the last one always wins, on every backend, and the overwritten source rows get no
  // gradient). Stable sort, then the last of each run of equal indices.
  const Tensor flat = index.reshape({-1});
  const int64_t k = flat.numel();
  if (k < 2) return index_add(index_fill(x, d, index, 0.0), d, index, source);
  const Tensor order = argsort(flat, 0, false, true);
  const Tensor sorted = index_select(flat, 0, order);
  const Tensor last_of_run =
      cat({ne(sorted.narrow(0, 0, k - 1), sorted.narrow(0, 1, k - 1)),
           full({1}, 1.0, {.dtype = DType::boolean, .device = index.device()})},
          0);
  const Tensor keep = masked_select(order, last_of_run);  // positions in index, ascending rows
  const Tensor idx = index_select(flat, 0, keep);
  const Tensor src = source.dim() == 0 ? source : index_select(source, d, keep);
  return index_add(index_fill(x, d, idx, 0.0), d, idx, src);
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  ops::check_defined("one_hot", index, "index");
  const ops::OpScope op_scope(Op::one_hot, index);
  ops::check_supported(Op::one_hot, index);
  EMBER_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, "one_hot: index dtype ",
              dtype_name(index.dtype()), " (expected i64 or i32 class indices)");
  // The range check reads the extremes on the host (PyTorch does the same).
  const int64_t lo = index.numel() ? min(index.to(DType::f64)).item<double>() : 0;
  const int64_t hi = index.numel() ? max(index.to(DType::f64)).item<double>() : -1;
  EMBER_CHECK(lo >= 0, "one_hot: class index ", lo, " is negative (expected indices >= 0)");
  if (num_classes < 0) num_classes = hi + 1;
  EMBER_CHECK(hi < num_classes, "one_hot: class index ", hi, " is out of range for ", num_classes,
              " classes (expected indices < num_classes)");
  const TensorOptions i64{.dtype = DType::i64, .device = index.device()};
  Shape s = Shape::filled(index.dim() + 1, 1);
  s[index.dim()] = num_classes;
  return eq(index.to(DType::i64).unsqueeze(-1),
            arange(0, static_cast<double>(num_classes), 1, i64).reshape(s))
      .to(DType::i64);
}

// ---- scatter, scatter_reduce and embedding_bag (issue 16) ----

namespace {

// The checks of scatter / scatter_reduce, and src cut to index's shape (contiguous).
Tensor scatter_source(Op op, const Tensor& x, int d, const Tensor& index, const Tensor& src) {
  const char* name = op_name(op);
  ops::check_defined(name, index, "index");
  ops::check_defined(name, src, "src");
  ops::check_index_dtype(name, index);
  ops::check_same_dtype(name, x, src);
  ops::check_same_device(name, x, src);
  ops::check_same_device(name, x, index);
  EMBER_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), name, ": index shape ",
              index.shape().to_string(), ", src shape ", src.shape().to_string(),
              " and input shape ", x.shape().to_string(), " (expected the same rank)");
  for (int i = 0; i < x.dim(); ++i)
    EMBER_CHECK(index.shape()[i] <= src.shape()[i] && (i == d || index.shape()[i] <= x.shape()[i]),
                name, ": index shape ", index.shape().to_string(), " does not fit src ",
                src.shape().to_string(), " and input ", x.shape().to_string());
  Tensor sv = src;
  for (int i = 0; i < x.dim(); ++i)
    if (sv.shape()[i] != index.shape()[i]) sv = sv.slice(i, 0, index.shape()[i]);
  return sv;
}

// out = x with src scattered in by `kind` (no autograd: the callers record it).
Tensor scatter_raw(backend::ScatterOp kind, const Tensor& x, int d, const Tensor& index,
                   const Tensor& src) {
  NoGradGuard no_grad;
  Tensor out = x.clone(), ic = index.contiguous(), sc = src.contiguous();
  if (!ops::backend_of(x).scatter(kind, ops::view_of(out), d, ops::view_of(ic), ops::view_of(sc)))
    throw_bad_index(kind == backend::ScatterOp::assign ? "scatter" : "scatter_reduce", ic, d,
                    x.shape()[d]);
  return out;
}

// Where any index of a scatter lands in x's shape (bool).
Tensor scattered_mask(const Tensor& x, int d, const Tensor& index) {
  Tensor hits = zeros(x.shape(), {.dtype = DType::i64, .device = x.device()});
  Tensor one = ones(index.shape(), {.dtype = DType::i64, .device = x.device()});
  return gt(scatter_raw(backend::ScatterOp::sum, hits, d, index, one), 0.0);
}

// The identity of each reduction, for the targets when include_self is false.
double identity_of(const std::string& reduce, DType dtype) {
  if (reduce == "prod") return 1.0;
  if (reduce == "amax")
    return is_floating(dtype) ? -std::numeric_limits<double>::infinity()
                              : (dtype == DType::i32 ? std::numeric_limits<int32_t>::lowest()
                                                     : -9.2233720368547758e18);
  if (reduce == "amin")
    return is_floating(dtype) ? std::numeric_limits<double>::infinity()
                              : (dtype == DType::i32 ? std::numeric_limits<int32_t>::max()
                                                     : 9.2233720368547748e18);
  return 0.0;  // sum, mean
}

}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const ops::OpScope op_scope(Op::scatter, x);
  ops::check_supported(Op::scatter, x);
  const int d = wrap_dim(dim, x.dim(), "scatter");
  Tensor sv = scatter_source(Op::scatter, x, d, index, src);
  Tensor out = scatter_raw(backend::ScatterOp::assign, x, d, index, sv);
  if (autograd::needs_grad(x, src)) {
    autograd::record(Op::scatter, out, {&x, &src},
                     [d, si = SavedTensor(index.contiguous()), src_shape = src.shape()](
                         const Tensor& g, GradList& gi) {
                       // x's gradient is 0 where it was overwritten, src's is g at its target.
                       gi[0] = masked_fill(g, scattered_mask(g, d, si.get()), 0.0);
                       Tensor picked = gather(g, d, si.get());
                       std::vector<int64_t> pads;
                       for (int i = picked.dim() - 1; i >= 0; --i) {
                         pads.push_back(0);
                         pads.push_back(src_shape[i] - picked.shape()[i]);
                       }
                       gi[1] = pad(picked, Shape(pads));
                     });
  }
  return out;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value) {
  const ops::UserOp user(Op::scatter, {&x, &index});
  ops::check_defined("scatter", index, "index");
  // A constant source (it needs no gradient): only x's, where it was not overwritten.
  return scatter(x, dim, index,
                 full(index.shape(), value, {.dtype = x.dtype(), .device = x.device()}));
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  const ops::OpScope op_scope(Op::scatter_reduce, x);
  ops::check_supported(Op::scatter_reduce, x);
  using backend::ScatterOp;
  EMBER_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" ||
                  reduce == "amin",
              "scatter_reduce: reduce '", reduce,
              "' (expected \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\")");
  const int d = wrap_dim(dim, x.dim(), "scatter_reduce");
  Tensor sv = scatter_source(Op::scatter_reduce, x, d, index, src);
  const ScatterOp kind = reduce == "prod"   ? ScatterOp::prod
                         : reduce == "amax" ? ScatterOp::max
                         : reduce == "amin" ? ScatterOp::min
                                            : ScatterOp::sum;
  Tensor ic = index.contiguous();
  Tensor out, count, hit;
  {
    NoGradGuard no_grad;
    hit = scattered_mask(x, d, ic);
    Tensor base = include_self ? x : masked_fill(x, hit, identity_of(reduce, x.dtype()));
    out = scatter_raw(kind, base, d, ic, sv);
    if (reduce == "mean") {
      Tensor one = ones(ic.shape(), {.dtype = x.dtype(), .device = x.device()});
      count = scatter_raw(ScatterOp::sum, zeros_like(x), d, ic, one) + (include_self ? 1.0 : 0.0);
      count = clamp_min(count.to(DType::f64), 1.0);
      out = out.to(DType::f64) / count;
      if (!is_floating(x.dtype())) out = floor(out);  // PyTorch's floor division for integers
      out = out.to(x.dtype());
      count = count.to(x.dtype());
    }
  }
  if (autograd::needs_grad(x, src)) {
    autograd::record(
        Op::scatter_reduce, out, {&x, &src},
        [d, reduce, include_self, si = SavedTensor(ic), sx = SavedTensor(x), ss = SavedTensor(sv),
         so = SavedTensor(out), sh = SavedTensor(hit),
         sn = count.defined() ? SavedTensor(count) : SavedTensor(),
         src_shape = src.shape()](const Tensor& g, GradList& gi) {
          const Tensor xi = sx.get(), s = ss.get(), r = so.get(), idx = si.get(), hit_ = sh.get();
          const Tensor zero = zeros(Shape{}, {.dtype = g.dtype(), .device = g.device()});
          Tensor gx, gs;  // per element of x and of the (cut) source
          if (reduce == "sum") {
            gx = g;
            gs = gather(g, d, idx);
          } else if (reduce == "mean") {
            Tensor gn = g / sn.get();
            gx = where(hit_, gn, g);
            gs = gather(gn, d, idx);
          } else if (reduce == "amax" || reduce == "amin") {
            // Split between every element equal to the result, as PyTorch.
            Tensor self_eq = eq(xi, r).to(g.dtype());
            if (!include_self) self_eq = masked_fill(self_eq, hit_, 0.0);
            Tensor src_eq = eq(s, gather(r, d, idx)).to(g.dtype());
            Tensor ties = scatter_raw(backend::ScatterOp::sum, self_eq, d, idx, src_eq);
            Tensor share = g / clamp_min(ties, 1.0);
            gx = where(hit_, share * self_eq, g);
            gs = gather(share, d, idx) * src_eq;
          } else {  // prod: the product of the others, exact with zeros
            Tensor self_zero = eq(xi, 0.0).to(g.dtype());
            if (!include_self) self_zero = masked_fill(self_zero, hit_, 0.0);
            Tensor zeros_at =
                scatter_raw(backend::ScatterOp::sum, self_zero, d, idx, eq(s, 0.0).to(g.dtype()));
            Tensor self_nz = include_self
                                 ? masked_fill(xi, eq(xi, 0.0), 1.0)
                                 : masked_fill(masked_fill(xi, eq(xi, 0.0), 1.0), hit_, 1.0);
            Tensor nz_prod = scatter_raw(backend::ScatterOp::prod, self_nz, d, idx,
                                         masked_fill(s, eq(s, 0.0), 1.0));
            auto others = [&](const Tensor& e, const Tensor& r_, const Tensor& zc,
                              const Tensor& nzp) {
              Tensor safe = masked_fill(e, eq(e, 0.0), 1.0);
              return where(eq(zc, 0.0), r_ / safe,
                           where(logical_and(eq(zc, 1.0), eq(e, 0.0)), nzp, zero));
            };
            gx = where(hit_, g * others(xi, r, zeros_at, nz_prod), g);
            gs = gather(g, d, idx) *
                 others(s, gather(r, d, idx), gather(zeros_at, d, idx), gather(nz_prod, d, idx));
          }
          if (!include_self) gx = where(hit_, zero, gx);
          gi[0] = gx;
          std::vector<int64_t> pads;
          for (int i = gs.dim() - 1; i >= 0; --i) {
            pads.push_back(0);
            pads.push_back(src_shape[i] - gs.shape()[i]);
          }
          gi[1] = pad(gs, Shape(pads));
        });
  }
  return out;
}

Tensor embedding_bag(const Tensor& weight, const Tensor& input, const Tensor& offsets,
                     const std::string& mode, const Tensor& per_sample_weights,
                     bool include_last_offset, std::optional<int64_t> padding_idx) {
  const ops::UserOp user(Op::embedding_bag, {&weight, &input, &offsets});
  const ops::OpScope op_scope(Op::embedding_bag, weight);
  ops::check_supported(Op::embedding_bag, weight, "weight");
  EMBER_CHECK(weight.dim() == 2, "embedding_bag: weight shape ", weight.shape().to_string(),
              " (expected [num_embeddings, embedding_dim])");
  EMBER_CHECK(mode == "sum" || mode == "mean" || mode == "max", "embedding_bag: mode '", mode,
              "' (expected \"sum\", \"mean\" or \"max\")");
  ops::check_defined("embedding_bag", input, "input");
  ops::check_index_dtype("embedding_bag", input);
  const Device dev = weight.device();
  const TensorOptions i64{.dtype = DType::i64, .device = dev};
  Tensor flat, bag_of;
  int64_t bags = 0;
  if (input.dim() == 2) {
    EMBER_CHECK(!offsets.defined(), "embedding_bag: offsets given with a 2-D input of shape ",
                input.shape().to_string(), " (expected none: each row is a bag)");
    bags = input.shape()[0];
    const int64_t len = input.shape()[1];
    flat = input.reshape({bags * len});
    bag_of = repeat_interleave(arange(0, static_cast<double>(bags), 1, i64), len, 0);
  } else {
    EMBER_CHECK(input.dim() == 1 && offsets.defined() && offsets.dim() == 1,
                "embedding_bag: input shape ", input.shape().to_string(),
                offsets.defined() ? " with offsets shape " + offsets.shape().to_string()
                                  : std::string(" without offsets"),
                " (expected a 1-D input with 1-D offsets, or a 2-D input)");
    ops::check_index_dtype("embedding_bag", offsets);
    flat = input;
    Tensor starts = offsets.to(DType::i64);
    if (include_last_offset) starts = starts.narrow(0, 0, std::max<int64_t>(starts.numel() - 1, 0));
    bags = starts.numel();
    const int64_t n = flat.numel();
    // A mark at each bag's start; the running count of marks, less one, is each entry's bag.
    std::vector<int64_t> host = starts.to(Device::cpu()).to_vector<int64_t>();
    for (size_t b = 0; b < host.size(); ++b)
      EMBER_CHECK(host[b] >= 0 && host[b] <= n && (b == 0 ? host[b] == 0 : host[b] >= host[b - 1]),
                  "embedding_bag: offsets[", b, "] is ", host[b],
                  " (expected non-decreasing offsets from 0, each <= ", n, ")");
    Tensor inside = starts.narrow(0, 0, bags);
    Tensor marks = zeros({n + 1}, i64);
    marks = index_add(marks, 0, inside, ones({bags}, i64));
    bag_of = (cumsum(marks, 0) - 1).narrow(0, 0, n);
  }
  Tensor rows = index_select(weight, 0, flat.reshape({flat.numel()}));  // [n, D]
  Tensor keep = ones({flat.numel()}, {.dtype = weight.dtype(), .device = dev});
  if (padding_idx)
    keep =
        logical_not(eq(flat.to(DType::i64), static_cast<double>(*padding_idx))).to(weight.dtype());
  if (per_sample_weights.defined()) {
    EMBER_CHECK(mode == "sum", "embedding_bag: per_sample_weights with mode '", mode,
                "' (expected mode \"sum\")");
    EMBER_CHECK(per_sample_weights.shape() == input.shape(),
                "embedding_bag: per_sample_weights shape ", per_sample_weights.shape().to_string(),
                " (expected the input's shape ", input.shape().to_string(), ")");
    rows = rows * per_sample_weights.reshape({flat.numel(), 1});
  }
  rows = rows * keep.reshape({flat.numel(), 1});
  const int64_t width = weight.shape()[1];
  const TensorOptions wo{.dtype = weight.dtype(), .device = dev};
  Tensor counts = index_add(zeros({bags}, wo), 0, bag_of, keep);
  if (mode == "max") {
    Tensor where_to = bag_of.reshape({flat.numel(), 1}).expand({flat.numel(), width});
    Tensor masked = where(gt(keep.reshape({flat.numel(), 1}), 0.0), rows,
                          full(Shape{}, -std::numeric_limits<double>::infinity(), wo));
    Tensor out = scatter_reduce(zeros({bags, width}, wo), 0, where_to, masked, "amax", false);
    return where(gt(counts.reshape({bags, 1}), 0.0), out, zeros(Shape{}, wo));
  }
  Tensor out = index_add(zeros({bags, width}, wo), 0, bag_of, rows);
  if (mode == "mean") out = out / clamp_min(counts, 1.0).reshape({bags, 1});
  return out;
}

}  // namespace ember
