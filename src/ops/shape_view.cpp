// src/ops/shape_view.cpp — issue 32's views and diagonals: as_strided and diagonal (views
// with their own backward), rot90, unflatten, narrow_copy, the broadcast helpers, the
// transpose/movedim aliases, diag_embed, diagflat and trace (composites).
#include <algorithm>
#include <string>

#include "ember/ops_shape.hpp"
#include "ember/storage.hpp"
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;

namespace {

// The storage position of every element of a (shape, strides, offset) view, in row-major
// order of the view: an i64 tensor on `device` built from arange (no host buffer, so a
// backward inside a captured step may run it).
Tensor element_positions(const Shape& shape, const Shape& strides, int64_t offset, Device device) {
  const TensorOptions i64{.dtype = DType::i64, .device = device};
  Tensor at = full(Shape{}, static_cast<double>(offset), i64);
  for (int d = 0; d < shape.size(); ++d) {
    Shape along = Shape::filled(shape.size(), 1);
    along[d] = shape[d];
    Tensor steps = arange(0, static_cast<double>(shape[d]), 1, i64);
    at = at + (steps * static_cast<double>(strides[d])).reshape(along);
  }
  return at.expand(shape).reshape({shape.numel()});
}

// The last storage position a (shape, strides, offset) view with non-negative strides reaches.
int64_t last_position(const Shape& shape, const Shape& strides, int64_t offset) {
  int64_t last = offset;
  for (int d = 0; d < shape.size(); ++d) last += shape[d] > 0 ? (shape[d] - 1) * strides[d] : 0;
  return last;
}

// A zero gradient of `size` elements with g's values added at positions `at` (repeats add up).
Tensor scatter_grad(const Tensor& g, int64_t size, const Tensor& at) {
  Tensor base = zeros({size}, {.dtype = g.dtype(), .device = g.device()});
  if (at.numel() == 0) return base;
  return index_add(base, 0, at, g.reshape({g.numel()}));
}

}  // namespace

Tensor rot90(const Tensor& x, int64_t k, const Shape& dims) {
  const ops::UserOp user(Op::rot90, {&x});
  ops::check_supported(Op::rot90, x);
  EMBER_CHECK(dims.size() == 2, "rot90: dims ", dims.to_string(), " (expected two dims)");
  EMBER_CHECK(x.dim() >= 2, "rot90: input shape ", x.shape().to_string(),
              " (expected at least 2 dims)");
  const int a = wrap_dim(dims[0], x.dim(), "rot90"), b = wrap_dim(dims[1], x.dim(), "rot90");
  EMBER_CHECK(a != b, "rot90: dims ", dims.to_string(), " (expected two different dims)");
  switch (((k % 4) + 4) % 4) {
    case 1: return flip(x, {b}).transpose(a, b);
    case 2: return flip(x, {a, b});
    case 3: return flip(x, {a}).transpose(a, b);
    default: return x.clone();
  }
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  const ops::UserOp user(Op::unflatten, {&x});
  ops::check_supported(Op::unflatten, x);
  EMBER_CHECK(x.dim() > 0, "unflatten: a 0-d input (expected at least 1 dim)");
  const int d = wrap_dim(dim, x.dim(), "unflatten");
  EMBER_CHECK(!sizes.empty(), "unflatten: no sizes (expected at least one)");
  const int64_t n = x.shape()[d];
  Shape s = sizes;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      EMBER_CHECK(infer < 0, "unflatten: sizes ", sizes.to_string(), " (expected at most one -1)");
      infer = i;
    } else {
      EMBER_CHECK(s[i] >= 0, "unflatten: sizes ", sizes.to_string(), " (expected sizes >= 0)");
      known *= s[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known > 0 && n % known == 0, "unflatten: sizes ", sizes.to_string(),
                " do not divide dim ", dim, " of size ", n);
    s[infer] = n / known;
  }
  EMBER_CHECK(s.numel() == n, "unflatten: sizes ", sizes.to_string(), " have ", s.numel(),
              " elements (expected dim ", dim, "'s size ", n, ")");
  Shape out;
  for (int i = 0; i < d; ++i) out.push_back(x.shape()[i]);
  for (int64_t v : s) out.push_back(v);
  for (int i = d + 1; i < x.dim(); ++i) out.push_back(x.shape()[i]);
  return x.reshape(out);
}

Tensor narrow_copy(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  const ops::UserOp user(Op::narrow_copy, {&x});
  ops::check_supported(Op::narrow_copy, x);
  return x.narrow(dim, start, length).clone();
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  const ops::UserOp user(Op::broadcast_to, {&x});
  ops::check_supported(Op::broadcast_to, x);
  return x.expand(shape);
}

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  Shape out;
  for (const Shape& s : shapes) {
    const int rank = std::max(out.size(), s.size());
    Shape next = Shape::filled(rank, 1);
    for (int i = 0; i < rank; ++i) {
      const int a = out.size() - rank + i, b = s.size() - rank + i;
      const int64_t x = a >= 0 ? out[a] : 1, y = b >= 0 ? s[b] : 1;
      EMBER_CHECK(x == y || x == 1 || y == 1, "broadcast_shapes: shape ", s.to_string(),
                  " does not broadcast with ", out.to_string(), " (dim ", i, ": ", y, " vs ", x,
                  ")");
      next[i] = x == 1 ? y : x;
    }
    out = next;
  }
  return out;
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::broadcast_tensors, tensors);
  std::vector<Shape> shapes;
  for (const Tensor& t : tensors) {
    ops::check_supported(Op::broadcast_tensors, t);
    shapes.push_back(t.shape());
  }
  const Shape full = broadcast_shapes(shapes);
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(t.expand(full));
  return out;
}

Tensor swapaxes(const Tensor& x, int64_t dim0, int64_t dim1) { return transpose(x, dim0, dim1); }
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1) { return transpose(x, dim0, dim1); }
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, source, destination);
}
Tensor moveaxis(const Tensor& x, const Shape& source, const Shape& destination) {
  return movedim(x, source, destination);
}

Tensor as_strided(const Tensor& x, const Shape& size, const Shape& stride,
                  std::optional<int64_t> storage_offset) {
  const ops::OpScope op_scope(Op::as_strided, x);
  ops::check_supported(Op::as_strided, x);
  EMBER_CHECK(size.size() == stride.size(), "as_strided: size ", size.to_string(), " and stride ",
              stride.to_string(), " (expected as many strides as sizes)");
  const int64_t offset = storage_offset.value_or(x.offset());
  EMBER_CHECK(offset >= 0, "as_strided: storage_offset ", offset, " (expected >= 0)");
  const int64_t capacity =
      x.storage() ? static_cast<int64_t>(x.storage()->bytes() / element_size(x.dtype())) : 0;
  for (int i = 0; i < size.size(); ++i)
    EMBER_CHECK(size[i] >= 0 && stride[i] >= 0, "as_strided: size ", size.to_string(),
                " and stride ", stride.to_string(), " (expected sizes and strides >= 0)");
  const int64_t last = last_position(size, stride, offset);
  EMBER_CHECK(size.numel() == 0 || last < capacity, "as_strided: size ", size.to_string(),
              ", stride ", stride.to_string(), " and offset ", offset, " reach element ", last,
              " of a storage of ", capacity,
              " elements (expected every element inside the storage)");
  Tensor out = ops::make_view(x, size, stride, offset);
  if (autograd::needs_grad(x)) {
    // The gradient in storage space (overlapping output elements add up), read back through
    // x's own geometry; a storage element x itself reaches k times gets 1/k of it each time.
    autograd::record(
        Op::as_strided, out, {&x},
        [xs = x.shape(), xst = x.strides(), xo = x.offset(), size, stride, offset](const Tensor& g,
                                                                                   GradList& gi) {
          if (xs.numel() == 0 || size.numel() == 0) {
            gi[0] = zeros(xs, {.dtype = g.dtype(), .device = g.device()});
            return;
          }
          const int64_t lo = std::min(offset, xo);
          const int64_t span =
              std::max(last_position(size, stride, offset), last_position(xs, xst, xo)) - lo + 1;
          Tensor out_at = element_positions(size, stride, offset - lo, g.device());
          Tensor in_at = element_positions(xs, xst, xo - lo, g.device());
          Tensor flat = scatter_grad(g, span, out_at);
          Tensor reads = scatter_grad(
              ones({xs.numel()}, {.dtype = g.dtype(), .device = g.device()}), span, in_at);
          gi[0] = (index_select(flat, 0, in_at) / index_select(reads, 0, in_at)).reshape(xs);
        });
  }
  return out;
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const ops::OpScope op_scope(Op::diagonal, x);
  ops::check_supported(Op::diagonal, x);
  EMBER_CHECK(x.dim() >= 2, "diagonal: input shape ", x.shape().to_string(),
              " (expected at least 2 dims)");
  const int a = wrap_dim(dim1, x.dim(), "diagonal"), b = wrap_dim(dim2, x.dim(), "diagonal");
  EMBER_CHECK(a != b, "diagonal: dim1 ", dim1, " and dim2 ", dim2,
              " are the same dim (expected two different dims)");
  const int64_t rows = x.shape()[a], cols = x.shape()[b];
  const int64_t r0 = offset >= 0 ? 0 : -offset, c0 = offset >= 0 ? offset : 0;
  const int64_t n = std::max<int64_t>(0, std::min(rows - r0, cols - c0));
  // The geometry of the diagonal over strides `st` (x's, or a contiguous gradient's).
  auto geometry = [&](const Shape& st, int64_t base, Shape* shape, Shape* strides) {
    *shape = x.shape();
    *strides = st;
    shape->erase(std::max(a, b));
    shape->erase(std::min(a, b));
    strides->erase(std::max(a, b));
    strides->erase(std::min(a, b));
    shape->push_back(n);
    strides->push_back(st[a] + st[b]);
    return n > 0 ? base + r0 * st[a] + c0 * st[b] : base;
  };
  Shape shape, strides;
  const int64_t at = geometry(x.strides(), x.offset(), &shape, &strides);
  Tensor out = ops::make_view(x, shape, strides, at);
  if (autograd::needs_grad(x)) {
    Shape gs, gst;
    const int64_t g_at = geometry(contiguous_strides(x.shape()), 0, &gs, &gst);
    autograd::record(Op::diagonal, out, {&x},
                     [xs = x.shape(), gs, gst, g_at](const Tensor& g, GradList& gi) {
                       Tensor places = element_positions(gs, gst, g_at, g.device());
                       gi[0] = scatter_grad(g, xs.numel(), places).reshape(xs);
                     });
  }
  return out;
}

Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const ops::UserOp user(Op::diag_embed, {&x});
  ops::check_supported(Op::diag_embed, x);
  EMBER_CHECK(x.dim() >= 1, "diag_embed: a 0-d input (expected at least 1 dim)");
  const int rank = x.dim() + 1;
  const int a = wrap_dim(dim1, rank, "diag_embed"), b = wrap_dim(dim2, rank, "diag_embed");
  EMBER_CHECK(a != b, "diag_embed: dim1 ", dim1, " and dim2 ", dim2,
              " are the same dim (expected two different dims)");
  const int64_t n = x.shape()[x.dim() - 1], k = offset < 0 ? -offset : offset, m = n + k;
  Tensor padded = x;
  if (k > 0) {
    Shape side = x.shape();
    side[x.dim() - 1] = k;
    padded = cat({x, zeros(side, {.dtype = x.dtype(), .device = x.device()})}, -1);
  }
  // out[..., r, c] = x[..., r] on c - r == offset >= 0; x[..., c] on a negative offset.
  Shape square = padded.shape();
  square.push_back(m);
  Tensor placed = (offset >= 0 ? padded.unsqueeze(-1) : padded.unsqueeze(-2)).expand(square);
  Tensor band = tril(triu(placed, offset), offset);
  return movedim(band, Shape{rank - 2, rank - 1}, Shape{a, b});
}

Tensor diagflat(const Tensor& x, int64_t offset) {
  const ops::UserOp user(Op::diagflat, {&x});
  ops::check_supported(Op::diagflat, x);
  return diag(x.reshape({x.numel()}), offset);
}

Tensor trace(const Tensor& x) {
  const ops::UserOp user(Op::trace, {&x});
  ops::check_supported(Op::trace, x);
  EMBER_CHECK(x.dim() == 2, "trace: input shape ", x.shape().to_string(), " (expected a matrix)");
  return sum(diagonal(x));
}

}  // namespace ember
