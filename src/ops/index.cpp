// src/ops/index.cpp — indexing: index_select, gather, scatter_add, embedding. Index errors name the
// offending index and the valid range.
#include <algorithm>
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
  ops::check_supported(Op::index_select, x);
  ops::check_defined("index_select", index, "index");
  ops::check_index_dtype("index_select", index);
  ops::check_same_device("index_select", x, index);
  EMBER_CHECK(index.dim() <= 1, op_name(Op::index_select), ": index shape ",
              index.shape().to_string(), " (expected a 1-D index)");
  const int d = wrap_dim(dim, x.dim(), "index_select");
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
                       ops::backend_of(z).scatter_add(ops::view_of(z), d, ops::view_of(si.get()),
                                                      ops::view_of(gc));
                       gi[0] = z;
                     });
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
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
  if (!ops::backend_of(x).scatter_add(ops::view_of(out), d, ops::view_of(ic), ops::view_of(sc)))
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
  ops::check_supported(Op::index_fill, x);
  const int d = wrap_dim(dim, std::max(x.dim(), 1), "index_fill");
  check_index_arg(Op::index_fill, x, d, index);
  if (x.dim() == 0) return index_fill(x.reshape({1}), 0, index, value).reshape({});
  return masked_fill(x, rows_mask(x.shape(), d, index, x.device()), value);
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  ops::check_supported(Op::index_copy, x);
  const int d = wrap_dim(dim, std::max(x.dim(), 1), "index_copy");
  check_index_arg(Op::index_copy, x, d, index);
  // The picked rows of x are cleared and the source rows added in: the same as a copy when
  // the indices are distinct (PyTorch leaves duplicates undefined; here they add up).
  return index_add(index_fill(x, d, index, 0.0), d, index, source);
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  ops::check_defined("one_hot", index, "index");
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

}  // namespace ember
