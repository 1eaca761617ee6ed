// src/ops/index.cpp — indexing: index_select, gather, scatter_add, embedding. Index errors name the
// offending index and the valid range.
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

}  // namespace ember
