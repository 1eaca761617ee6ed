// src/ops/reduce.cpp — reductions over any set of dims (sum, mean, max, min, var, argmax,
// argmin) with keepdim, their backward rules, and sum_to (how autograd undoes broadcasting).
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

Tensor reduce_keep(ReduceOp op, const char* name, const Tensor& x, const Shape& dims,
                   DType out_dtype) {
  check_unique_dims(dims, x.dim(), name);
  const Shape keep = ops::reduced_shape(x.shape(), dims, name);
  Tensor out = ops::make_tensor(keep, out_dtype, x.device());
  if (x.numel() == 0) {
    EMBER_CHECK(op == ReduceOp::sum || op == ReduceOp::prod, name,
                ": cannot reduce an empty tensor (shape ", x.shape().to_string(), ")");
    ops::backend_of(x).fill(ops::view_of(out), op == ReduceOp::sum ? 0.0 : 1.0);
    return out;
  }
  ops::backend_of(x).reduce(op, ops::view_of(out), ops::view_of(x));
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

int64_t reduced_count(const Shape& in, const Shape& keep) {
  return in.numel() / (keep.numel() ? keep.numel() : 1);
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  ops::check_defined("sum", x);
  EMBER_CHECK(x.dtype() != DType::f16 && x.dtype() != DType::bf16, "sum: unsupported dtype ",
              dtype_name(x.dtype()), " (expected f32, f64, or an integer or bool dtype)");
  if (!is_floating(x.dtype()) && x.dtype() != DType::i64) {
    // Integers and bools sum into i64, as in PyTorch: an i32 sum would overflow silently.
    Tensor wide = x.to(DType::i64);
    return sum(wide, dims, keepdim);
  }
  Tensor keep = reduce_keep(ReduceOp::sum, "sum", x, dims, x.dtype());
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    autograd::record("sum", out, {&x},
                     [keep_shape = keep.shape(), in = x.shape()](const Tensor& g, GradList& gi) {
                       gi[0] = expand_back(g, keep_shape, in);
                     });
  }
  return out;
}
Tensor sum(const Tensor& x) { return sum(x, Shape{}, false); }

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  ops::check_defined("mean", x);
  ops::check_float("mean", x);
  Tensor keep = reduce_keep(ReduceOp::mean, "mean", x, dims, x.dtype());
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    const double inv = 1.0 / static_cast<double>(reduced_count(x.shape(), keep.shape()));
    autograd::record(
        "mean", out, {&x},
        [inv, keep_shape = keep.shape(), in = x.shape()](const Tensor& g, GradList& gi) {
          gi[0] = expand_back(mul(g, inv), keep_shape, in);
        });
  }
  return out;
}
Tensor mean(const Tensor& x) { return mean(x, Shape{}, false); }

namespace {
Tensor extreme(ReduceOp op, const char* name, const Tensor& x, const Shape& dims, bool keepdim) {
  ops::check_defined(name, x);
  ops::check_float(name, x);
  Tensor keep = reduce_keep(op, name, x, dims, x.dtype());
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    autograd::record(
        name, out, {&x},
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
  return extreme(ReduceOp::max, "max", x, dims, keepdim);
}
Tensor min(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme(ReduceOp::min, "min", x, dims, keepdim);
}
Tensor max(const Tensor& x) { return max(x, Shape{}, false); }
Tensor min(const Tensor& x) { return min(x, Shape{}, false); }

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  ops::check_defined("var", x);
  ops::check_float("var", x);
  check_unique_dims(dims, x.dim(), "var");
  const Shape keep_shape = ops::reduced_shape(x.shape(), dims, "var");
  const int64_t n = reduced_count(x.shape(), keep_shape);
  EMBER_CHECK(n - correction > 0, "var: ", n, " elements with correction ", correction,
              " leave no degrees of freedom (expected more than ", correction, " elements)");
  Tensor keep = ops::make_tensor(keep_shape, x.dtype(), x.device());
  ops::backend_of(x).variance(ops::view_of(keep), ops::view_of(x), correction);
  Tensor out = finish_shape(keep, x, dims, keepdim);
  if (autograd::needs_grad(x)) {
    const double scale_factor = 2.0 / static_cast<double>(n - correction);
    autograd::record(
        "var", out, {&x},
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
Tensor arg_extreme(ReduceOp op, const char* name, const Tensor& x, int64_t dim, bool keepdim) {
  ops::check_defined(name, x);
  ops::check_float(name, x);
  const int d = wrap_dim(dim, x.dim(), name);
  EMBER_CHECK(x.dim() == 0 || x.shape()[d] > 0, name, ": cannot reduce an empty dim (shape ",
              x.shape().to_string(), ")");
  Shape dims{static_cast<int64_t>(d)};
  if (x.dim() == 0) return zeros(Shape{}, {.dtype = DType::i64, .device = x.device()});
  Tensor keep = reduce_keep(op, name, x, dims, DType::i64);
  return finish_shape(keep, x, dims, keepdim);
}
}  // namespace

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme(ReduceOp::argmax, "argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme(ReduceOp::argmin, "argmin", x, dim, keepdim);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  ops::check_defined("sum_to", x);
  if (x.shape() == shape) return x;
  const int lead = x.dim() - shape.size();
  EMBER_CHECK(lead >= 0, "sum_to: cannot reduce shape ", x.shape().to_string(),
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
      EMBER_CHECK(want == x.shape()[i], "sum_to: shape ", x.shape().to_string(),
                  " does not broadcast from ", shape.to_string());
    }
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

}  // namespace ember
