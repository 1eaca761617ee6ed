// src/ops/index_put.cpp — issue 32's indexing: take and take_along_dim (index_select and
// gather), put/put_ (index_copy or index_add on the flattened tensor), masked_scatter (a cumsum
// of the mask picks source's elements) and index_reduce (scatter_reduce with the index spread
// over source's slices). Composites: each is differentiable through its primitives.
#include <algorithm>
#include <string>

#include "ember/ops_shape.hpp"
#include "ops/common.hpp"

namespace ember {

namespace {

// `index` flattened to i64 with negative entries counted from the end of `numel` elements.
Tensor flat_positions(const char* op, const Tensor& index, int64_t numel) {
  ops::check_defined(op, index, "index");
  ops::check_index_dtype(op, index);
  Tensor idx = index.to(DType::i64).reshape({index.numel()});
  return where(lt(idx, 0.0), idx + static_cast<double>(numel), idx);
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& index) {
  const ops::UserOp user(Op::take, {&x, &index});
  ops::check_supported(Op::take, x);
  Tensor idx = flat_positions("take", index, x.numel());
  ops::check_same_device("take", x, index);
  return index_select(x.reshape({x.numel()}), 0, idx).reshape(index.shape());
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  const ops::UserOp user(Op::take_along_dim, {&x, &indices});
  ops::check_supported(Op::take_along_dim, x);
  ops::check_defined("take_along_dim", indices, "indices");
  ops::check_index_dtype("take_along_dim", indices);
  ops::check_same_device("take_along_dim", x, indices);
  const Tensor idx = indices.to(DType::i64);
  if (!dim) return gather(x.reshape({x.numel()}), 0, idx.reshape({idx.numel()}));
  EMBER_CHECK(x.dim() == indices.dim(), "take_along_dim: indices shape ",
              indices.shape().to_string(), " for input shape ", x.shape().to_string(),
              " (expected the same number of dims)");
  const int d = wrap_dim(*dim, x.dim(), "take_along_dim");
  Shape xs = x.shape(), is = idx.shape();
  for (int i = 0; i < x.dim(); ++i) {
    if (i == d) continue;
    const int64_t a = xs[i], b = is[i];
    EMBER_CHECK(a == b || a == 1 || b == 1, "take_along_dim: indices shape ",
                indices.shape().to_string(), " does not broadcast with input shape ",
                x.shape().to_string(), " outside dim ", d);
    xs[i] = is[i] = a == 1 ? b : a;
  }
  return gather(x.expand(xs), d, idx.expand(is));
}

Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
  const ops::UserOp user(Op::put, {&x, &index, &source});
  ops::check_supported(Op::put, x);
  ops::check_defined("put", source, "source");
  ops::check_same_dtype("put", x, source);
  Tensor idx = flat_positions("put", index, x.numel());
  ops::check_same_device("put", x, source);
  ops::check_same_device("put", x, index);
  EMBER_CHECK(source.numel() == index.numel(), "put: source of ", source.numel(),
              " elements for an index of ", index.numel(), " (expected as many)");
  Tensor flat = x.reshape({x.numel()}), src = source.reshape({source.numel()});
  Tensor out = accumulate ? index_add(flat, 0, idx, src) : index_copy(flat, 0, idx, src);
  return out.reshape(x.shape());
}

Tensor& put_(Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
  const ops::UserOp user(Op::put, {&x, &index, &source});
  ops::check_defined("put_", x);
  ops::check_writable("put_", x);
  Tensor result;
  {
    NoGradGuard no_grad;
    result = put(x.detach(), index, source.detach(), accumulate);
  }
  x.copy_(result);
  return x;
}

Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  const ops::UserOp user(Op::masked_scatter, {&x, &mask, &source});
  ops::check_supported(Op::masked_scatter, x);
  ops::check_defined("masked_scatter", mask, "mask");
  ops::check_defined("masked_scatter", source, "source");
  EMBER_CHECK(mask.dtype() == DType::boolean, "masked_scatter: mask dtype ",
              dtype_name(mask.dtype()), " (expected bool)");
  ops::check_same_dtype("masked_scatter", x, source);
  ops::check_same_device("masked_scatter", x, mask);
  ops::check_same_device("masked_scatter", x, source);
  const int64_t n = x.numel();
  Tensor m = mask.expand(x.shape()).reshape({n});
  Tensor slot = cumsum(m.to(DType::i64), 0) - 1.0;  // the source element of each true position
  const int64_t count = n ? slot.select(0, n - 1).item<int64_t>() + 1 : 0;  // read on the host
  EMBER_CHECK(source.numel() >= count, "masked_scatter: source of ", source.numel(),
              " elements for a mask with ", count, " true positions (expected at least as many)");
  if (count == 0) return where(m, x.reshape({n}), x.reshape({n})).reshape(x.shape());
  Tensor picked = index_select(source.reshape({source.numel()}), 0, clamp_min(slot, 0.0));
  return where(m, picked, x.reshape({n})).reshape(x.shape());
}

Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self) {
  const ops::UserOp user(Op::index_reduce, {&x, &index, &source});
  ops::check_supported(Op::index_reduce, x);
  EMBER_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce: reduce '", reduce, "' (expected prod, mean, amax or amin)");
  ops::check_defined("index_reduce", index, "index");
  ops::check_defined("index_reduce", source, "source");
  ops::check_index_dtype("index_reduce", index);
  ops::check_same_dtype("index_reduce", x, source);
  ops::check_same_device("index_reduce", x, index);
  ops::check_same_device("index_reduce", x, source);
  EMBER_CHECK(index.dim() <= 1, "index_reduce: index shape ", index.shape().to_string(),
              " (expected a 1-D index)");
  const int d = wrap_dim(dim, std::max(x.dim(), 1), "index_reduce");
  Shape want = x.dim() ? x.shape() : Shape{1};
  want[d] = index.numel();
  const Shape have = source.dim() ? source.shape() : Shape{1};
  EMBER_CHECK(have == want, "index_reduce: source shape ", source.shape().to_string(),
              " for input shape ", x.shape().to_string(), " and ", index.numel(),
              " indices (expected ", want.to_string(), ")");
  Shape along = Shape::filled(want.size(), 1);
  along[d] = index.numel();
  Tensor spread = index.to(DType::i64).reshape(along).expand(want);
  Tensor xs = x.dim() ? x : x.reshape({1});
  Tensor out = scatter_reduce(xs, d, spread, source.reshape(want), reduce, include_self);
  return x.dim() ? out : out.reshape(Shape{});
}

}  // namespace ember
