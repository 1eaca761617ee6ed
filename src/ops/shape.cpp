// src/ops/shape.cpp — views (reshape, transpose, permute, slice, expand, squeeze,
// unsqueeze, flatten) and joins (cat, stack, split, chunk), each with its backward.
#include <numeric>

#include "ops/common.hpp"

namespace ember {

using autograd::GradList;

namespace {

Shape infer_shape(const Shape& requested, int64_t numel, const Shape& from) {
  Shape out = requested;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      EMBER_CHECK(infer < 0, op_name(Op::reshape), ": more than one -1 in ", requested.to_string());
      infer = i;
    } else {
      EMBER_CHECK(out[i] >= 0, op_name(Op::reshape), ": negative size in ", requested.to_string());
      known *= out[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, op_name(Op::reshape), ": shape ",
                requested.to_string(), " is invalid for ", numel, " elements (from shape ",
                from.to_string(), ")");
    out[infer] = numel / known;
  }
  EMBER_CHECK(out.numel() == numel, op_name(Op::reshape), ": cannot reshape ", from.to_string(),
              " (", numel, " elements) to ", requested.to_string(), " (", out.numel(),
              " elements)");
  return out;
}

// Strides for viewing (shape, strides) as `target` without a copy, if possible
// (PyTorch's rule: each run of target dims must map onto a run of mergeable source dims).
bool view_strides(const Shape& shape, const Shape& strides, const Shape& target, Shape* out) {
  const int64_t numel = shape.numel();
  *out = Shape::filled(target.size(), 1);
  if (numel == 0) {
    *out = contiguous_strides(target);
    return true;
  }
  int64_t view_d = target.size() - 1;
  int64_t chunk_base_stride = strides.size() ? strides[strides.size() - 1] : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = shape.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= shape[tensor_d];
    if (tensor_d == 0 ||
        (shape[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor view_impl(const Tensor& x, const Shape& shape, bool allow_copy, Op view_op) {
  const char* op = op_name(view_op);
  ops::check_defined(op, x);
  const Shape target = infer_shape(shape, x.numel(), x.shape());
  Shape strides;
  Tensor out;
  if (x.is_contiguous()) {
    out = ops::make_view(x, target, contiguous_strides(target), x.offset());
  } else if (view_strides(x.shape(), x.strides(), target, &strides)) {
    out = ops::make_view(x, target, strides, x.offset());
  } else {
    EMBER_CHECK(allow_copy, op, ": the tensor's strides ", x.strides().to_string(),
                " do not allow a view of shape ", target.to_string(),
                " (use reshape(), which copies)");
    Tensor c;
    {
      NoGradGuard g;
      c = x.contiguous();
    }
    out = ops::make_view(c, target, contiguous_strides(target), c.offset());
  }
  if (autograd::needs_grad(x))
    autograd::record(view_op, out, {&x},
                     [in = x.shape()](const Tensor& g, GradList& gi) { gi[0] = g.reshape(in); });
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const { return view_impl(*this, shape, false, Op::view); }
Tensor Tensor::reshape(const Shape& shape) const {
  if (shape == this->shape()) return *this;
  return view_impl(*this, shape, true, Op::reshape);
}

Tensor Tensor::permute(const Shape& dims) const {
  ops::check_defined("permute", *this);
  EMBER_CHECK(dims.size() == dim(), op_name(Op::permute), ": ", dims.size(),
              " dims given for a rank-", dim(), " tensor (expected a permutation of all ", dim(),
              " dims)");
  Shape shape = this->shape(), strides = this->strides(), inverse = Shape::filled(dim(), 0);
  bool seen[kMaxRank] = {};
  for (int i = 0; i < dim(); ++i) {
    const int d = wrap_dim(dims[i], dim(), "permute");
    EMBER_CHECK(!seen[d], op_name(Op::permute), ": dim ", d, " repeats in ", dims.to_string());
    seen[d] = true;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
    inverse[d] = i;
  }
  Tensor out = ops::make_view(*this, shape, strides, offset());
  if (autograd::needs_grad(*this))
    autograd::record(Op::permute, out, {this},
                     [inverse](const Tensor& g, GradList& gi) { gi[0] = g.permute(inverse); });
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  ops::check_defined("transpose", *this);
  Shape p = Shape::filled(dim(), 0);
  for (int i = 0; i < dim(); ++i) p[i] = i;
  // Checked before the 0-d shortcut: a 0-d tensor takes dims -1 and 0 only (PyTorch).
  const int a = wrap_dim(d0, dim(), "transpose"), b = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  std::swap(p[a], p[b]);
  return permute(p);
}

Tensor Tensor::t() const {
  EMBER_CHECK(dim() >= 2 || dim() <= 1, "t: rank ", dim());
  if (dim() < 2) return *this;
  return transpose(-2, -1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  ops::check_defined("slice", *this);
  const int w = wrap_dim(d, dim(), "slice");
  EMBER_CHECK(step > 0, op_name(Op::slice), ": step ", step, " (expected a positive step)");
  const int64_t n = shape()[w];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[w] = (end - start + step - 1) / step;
  st[w] = strides()[w] * step;
  Tensor out = ops::make_view(*this, s, st, offset() + start * strides()[w]);
  if (autograd::needs_grad(*this))
    autograd::record(Op::slice, out, {this},
                     [in = shape(), w, start, end, step](const Tensor& g, GradList& gi) {
                       Tensor z = zeros(in, {.dtype = g.dtype(), .device = g.device()});
                       z.slice(w, start, end, step).copy_(g);
                       gi[0] = z;
                     });
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const int w = wrap_dim(d, dim(), "narrow");
  const int64_t n = shape()[w];
  if (start < 0) start += n;
  EMBER_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ",
              start + length, ") is outside dim ", d, " of size ", n);
  return slice(w, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  const int w = wrap_dim(d, dim(), "select");
  const int64_t n = shape()[w];
  EMBER_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d,
              " of size ", n);
  if (index < 0) index += n;
  return slice(w, index, index + 1).squeeze(w);
}

Tensor Tensor::expand(const Shape& target) const {
  ops::check_defined("expand", *this);
  EMBER_CHECK(target.size() >= dim(), op_name(Op::expand), ": cannot expand shape ",
              shape().to_string(), " to ", target.to_string(), " (fewer dims)");
  const int lead = target.size() - dim();
  Shape s = target, st = Shape::filled(target.size(), 0);
  for (int i = 0; i < target.size(); ++i) {
    if (i < lead) {
      EMBER_CHECK(target[i] >= 0, op_name(Op::expand),
                  ": size -1 is not allowed in a new leading dim of ", target.to_string());
      continue;
    }
    const int64_t have = shape()[i - lead];
    int64_t want = target[i] == -1 ? have : target[i];
    EMBER_CHECK(have == want || have == 1, op_name(Op::expand), ": shape ", shape().to_string(),
                " cannot be expanded to ", target.to_string(), " (dim ", i, ": ", have, " vs ",
                want, ")");
    s[i] = want;
    st[i] = (have == want) ? strides()[i - lead] : 0;
  }
  if (s == shape()) return *this;
  Tensor out = ops::make_view(*this, s, st, offset());
  if (autograd::needs_grad(*this))
    autograd::record(Op::expand, out, {this},
                     [in = shape()](const Tensor& g, GradList& gi) { gi[0] = sum_to(g, in); });
  return out;
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t d : shape())
    if (d != 1) s.push_back(d);
  return reshape(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  ops::check_defined("squeeze", *this);
  const int w = wrap_dim(d, dim(), "squeeze");  // a 0-d tensor takes dim -1 or 0 (PyTorch)
  if (dim() == 0) return *this;
  if (shape()[w] != 1) return *this;
  Shape s = shape(), st = strides();
  s.erase(w);
  st.erase(w);
  Tensor out = ops::make_view(*this, s, st, offset());
  if (autograd::needs_grad(*this))
    autograd::record(Op::squeeze, out, {this},
                     [in = shape()](const Tensor& g, GradList& gi) { gi[0] = g.reshape(in); });
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  ops::check_defined("unsqueeze", *this);
  const int w = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape(), st = strides();
  const int64_t inner = w < dim() ? strides()[w] * shape()[w] : 1;
  s.insert(w, 1);
  st.insert(w, inner);
  Tensor out = ops::make_view(*this, s, st, offset());
  if (autograd::needs_grad(*this))
    autograd::record(Op::unsqueeze, out, {this},
                     [in = shape()](const Tensor& g, GradList& gi) { gi[0] = g.reshape(in); });
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  const int a = wrap_dim(start_dim, dim(), "flatten"), b = wrap_dim(end_dim, dim(), "flatten");
  if (dim() == 0) return reshape({1});
  EMBER_CHECK(a <= b, op_name(Op::flatten), ": start_dim ", start_dim, " is after end_dim ",
              end_dim);
  Shape s;
  for (int i = 0; i < a; ++i) s.push_back(shape()[i]);
  int64_t m = 1;
  for (int i = a; i <= b; ++i) m *= shape()[i];
  s.push_back(m);
  for (int i = b + 1; i < dim(); ++i) s.push_back(shape()[i]);
  return reshape(s);
}

// ---- free-function forms ----
Tensor reshape(const Tensor& x, const Shape& shape) { return x.reshape(shape); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { return x.transpose(d0, d1); }
Tensor permute(const Tensor& x, const Shape& dims) { return x.permute(dims); }
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return x.slice(dim, start, end, step);
}
Tensor expand(const Tensor& x, const Shape& shape) { return x.expand(shape); }
Tensor squeeze(const Tensor& x, int64_t dim) { return x.squeeze(dim); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return x.unsqueeze(dim); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return x.flatten(start_dim, end_dim);
}

// ---- joins ----

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), op_name(Op::cat), ": no tensors given (expected at least one)");
  const Tensor& first = tensors[0];
  ops::check_defined("cat", first);
  const int d = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.shape();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    ops::check_defined("cat", t);
    ops::check_same_dtype("cat", first, t);
    ops::check_same_device("cat", first, t);
    EMBER_CHECK(t.dim() == first.dim(), op_name(Op::cat), ": tensor ", i, " has shape ",
                t.shape().to_string(), " but tensor 0 has ", first.shape().to_string(),
                " (expected the same rank)");
    for (int k = 0; k < t.dim(); ++k)
      EMBER_CHECK(k == d || t.shape()[k] == first.shape()[k], op_name(Op::cat), ": tensor ", i,
                  " has shape ", t.shape().to_string(), " but tensor 0 has ",
                  first.shape().to_string(), " (expected equal sizes except in dim ", d, ")");
    total += t.shape()[d];
  }
  out_shape[d] = total;
  Tensor out = ops::make_tensor(out_shape, first.dtype(), first.device());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    const int64_t n = t.shape()[d];
    if (n) {
      Tensor part =
          ops::make_view(out, t.shape(), out.strides(), out.offset() + at * out.strides()[d]);
      ops::backend_of(t).copy(ops::view_of(part), ops::view_of(t));
    }
    sizes.push_back(n);
    at += n;
  }
  if (autograd::needs_grad(tensors)) {
    std::vector<const Tensor*> inputs;
    for (const Tensor& t : tensors) inputs.push_back(&t);
    autograd::record(Op::cat, out, inputs, [sizes, d](const Tensor& g, GradList& gi) {
      int64_t start = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        gi[i] = g.slice(d, start, start + sizes[i]);
        start += sizes[i];
      }
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), op_name(Op::stack), ": no tensors given (expected at least one)");
  ops::check_defined("stack", tensors[0]);
  const int d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    ops::check_defined("stack", tensors[i]);
    EMBER_CHECK(tensors[i].shape() == tensors[0].shape(), op_name(Op::stack), ": tensor ", i,
                " has shape ", tensors[i].shape().to_string(), " but tensor 0 has ",
                tensors[0].shape().to_string(), " (expected equal shapes)");
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  ops::check_defined("split", x);
  const int d = wrap_dim(dim, x.dim(), "split");
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  EMBER_CHECK(total == x.shape()[d], op_name(Op::split), ": sizes sum to ", total, " but dim ", dim,
              " has size ", x.shape()[d]);
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t n : sizes) {
    EMBER_CHECK(n >= 0, op_name(Op::split), ": negative size ", n);
    out.push_back(x.slice(d, start, start + n));
    start += n;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  ops::check_defined("split", x);
  EMBER_CHECK(split_size > 0, op_name(Op::split), ": split_size ", split_size, " (expected > 0)");
  const int d = wrap_dim(dim, x.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t left = x.shape()[d]; left > 0; left -= split_size)
    sizes.push_back(std::min(left, split_size));
  return split(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  ops::check_defined("chunk", x);
  EMBER_CHECK(chunks > 0, op_name(Op::chunk), ": chunks ", chunks, " (expected > 0)");
  const int d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.shape()[d];
  return split(x, std::max<int64_t>((n + chunks - 1) / chunks, 1), d);
}

}  // namespace ember
