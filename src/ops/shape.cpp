// src/ops/shape.cpp — views (reshape, transpose, permute, slice, expand, squeeze,
// unsqueeze, flatten) and joins (cat, stack, split, chunk), each with its backward.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

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

Tensor Tensor::view(const Shape& shape) const {
  const ops::UserOp user(Op::view, {this});
  return view_impl(*this, shape, false, Op::view);
}
Tensor Tensor::reshape(const Shape& shape) const {
  ops::check_defined("reshape", *this);
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
  ops::check_defined("t", *this);
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
  if (autograd::needs_grad(*this)) {
    // The gradient lands in a slice of the input's (Note [Slice gradients land in place]).
    const Tensor* inputs[] = {this};
    autograd::attach(std::make_shared<autograd::SliceNode>(w, start, end, step), out, inputs);
  }
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  ops::check_defined("narrow", *this);
  const int w = wrap_dim(d, dim(), "narrow");
  const int64_t n = shape()[w];
  if (start < 0) start += n;
  EMBER_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ",
              start + length, ") is outside dim ", d, " of size ", n);
  return slice(w, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  ops::check_defined("select", *this);
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
  ops::check_defined("squeeze", *this);
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
  ops::check_defined("flatten", *this);
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
  if (const auto c = ops::autocast_list(Op::cat, tensors)) return cat(*c, dim);
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
  const ops::UserOp user(Op::stack, tensors);
  if (const auto c = ops::autocast_list(Op::stack, tensors)) return stack(*c, dim);
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
  if (sizes.empty()) sizes.push_back(0);  // a size-0 dim is one empty piece (PyTorch)
  return split(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  ops::check_defined("chunk", x);
  EMBER_CHECK(chunks > 0, op_name(Op::chunk), ": chunks ", chunks, " (expected > 0)");
  const int d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.shape()[d];
  if (n == 0) return std::vector<Tensor>(static_cast<size_t>(chunks), x.slice(d, 0, 0));
  return split(x, (n + chunks - 1) / chunks, d);
}

// ---- rearrangements (issue 16): views, index_select and cat, so every one is
// differentiable (index_select's backward adds up repeated picks) and takes every dtype ----

namespace {

// An i64 index tensor on `device` from host positions (a few bytes: the shapes decide it).
Tensor positions(const std::vector<int64_t>& v, Device device) {
  return from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())}).to(device);
}

// Each dim of `dims` wrapped, refusing repeats.
std::vector<int> unique_dims(const Shape& dims, int rank, const char* op) {
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(std::max(rank, 1)), false);
  for (int64_t d : dims) {
    const int w = wrap_dim(d, rank, op);
    EMBER_CHECK(!seen[w], op, ": dim ", d, " is listed twice in ", dims.to_string());
    seen[w] = true;
    out.push_back(w);
  }
  return out;
}

}  // namespace

Tensor flip(const Tensor& x, const Shape& dims) {
  const ops::OpScope op_scope(Op::flip, x);
  ops::check_supported(Op::flip, x);
  const std::vector<int> flipped = unique_dims(dims, x.dim(), "flip");
  if (x.dim() == 0) return x.clone();  // nothing to reverse (PyTorch returns the value)
  Tensor y = x;
  for (int d : flipped) {
    const int64_t n = x.shape()[d];
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[i] = n - 1 - i;
    y = index_select(y, d, positions(idx, x.device()));
  }
  return y.is_same(x) ? x.clone() : y;
}

Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims) {
  const ops::OpScope op_scope(Op::roll, x);
  ops::check_supported(Op::roll, x);
  if (dims.empty()) {
    EMBER_CHECK(shifts.size() == 1, "roll: ", shifts.size(),
                " shifts without dims (expected one shift, applied to the flattened tensor)");
    return roll(x.reshape({x.numel()}), shifts, Shape{0}).reshape(x.shape());
  }
  EMBER_CHECK(shifts.size() == dims.size(), "roll: ", shifts.size(), " shifts for ", dims.size(),
              " dims ", dims.to_string(), " (expected one shift per dim)");
  Tensor y = x;
  for (int i = 0; i < dims.size(); ++i) {
    const int d = wrap_dim(dims[i], x.dim(), "roll");
    const int64_t n = x.dim() ? x.shape()[d] : 1;
    if (n == 0) continue;
    const int64_t k = ((shifts[i] % n) + n) % n;
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) idx[j] = (j - k + n) % n;  // out[j] = x[j - k]
    y = index_select(y, d, positions(idx, x.device()));
  }
  return y.is_same(x) ? x.clone() : y;
}

Tensor repeat(const Tensor& x, const Shape& repeats) {
  const ops::OpScope op_scope(Op::repeat, x);
  ops::check_supported(Op::repeat, x);
  EMBER_CHECK(repeats.size() >= x.dim(), "repeat: ", repeats.size(), " repeats ",
              repeats.to_string(), " for a ", x.dim(), "-d input (expected at least ", x.dim(),
              ")");
  EMBER_CHECK(repeats.size() < kMaxRank, "repeat: ", repeats.size(), " repeats (at most ",
              kMaxRank - 1, ")");
  Shape lifted = Shape::filled(repeats.size() - x.dim(), 1);
  for (int64_t s : x.shape()) lifted.push_back(s);
  // One dim at a time: [..., s, ...] -> [..., r, s, ...] (an expanded view) -> [..., r·s, ...].
  Tensor y = x.reshape(lifted);
  for (int i = 0; i < repeats.size(); ++i) {
    EMBER_CHECK(repeats[i] >= 0, "repeat: repeats ", repeats.to_string(),
                " (expected every count >= 0)");
    if (repeats[i] == 1) continue;
    Shape expanded = y.shape(), merged = y.shape();
    expanded.insert(i, repeats[i]);
    merged[i] *= repeats[i];
    y = y.unsqueeze(i).expand(expanded).reshape(merged);
  }
  return y.is_same(x) || y.storage() == x.storage() ? y.clone() : y;
}

Tensor tile(const Tensor& x, const Shape& reps) {
  const ops::OpScope op_scope(Op::tile, x);
  ops::check_supported(Op::tile, x);
  Shape full_reps;
  for (int i = reps.size(); i < x.dim(); ++i) full_reps.push_back(1);
  for (int64_t r : reps) full_reps.push_back(r);
  return repeat(x, full_reps);
}

namespace {
// repeat_interleave's dim: a 0-d tensor has none to repeat along (PyTorch: IndexError).
int interleaved_dim(const Tensor& x, int64_t dim) {
  EMBER_CHECK(x.dim() > 0, "repeat_interleave: dim ", dim,
              " of a 0-d tensor (expected a tensor with at least one dim, or no dim to repeat "
              "the flattened tensor)");
  return wrap_dim(dim, x.dim(), "repeat_interleave");
}
}  // namespace

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  const ops::OpScope op_scope(Op::repeat_interleave, x);
  ops::check_supported(Op::repeat_interleave, x);
  EMBER_CHECK(repeats >= 0, "repeat_interleave: repeats ", repeats, " (expected >= 0)");
  if (!dim) return repeat_interleave(x.reshape({x.numel()}), repeats, 0);
  const int d = interleaved_dim(x, *dim);
  const int64_t n = x.shape()[d];
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(n * repeats));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < repeats; ++r) idx.push_back(i);
  return index_select(x, d, positions(idx, x.device()));
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  const ops::OpScope op_scope(Op::repeat_interleave, x);
  ops::check_supported(Op::repeat_interleave, x);
  ops::check_defined("repeat_interleave", repeats, "repeats");
  ops::check_index_dtype("repeat_interleave", repeats);
  if (!dim) return repeat_interleave(x.reshape({x.numel()}), repeats, 0);
  const int d = interleaved_dim(x, *dim);
  const int64_t n = x.shape()[d];
  // The output's length is the sum of the counts: they are read on the host (as PyTorch).
  std::vector<int64_t> counts = repeats.to(DType::i64).to_vector<int64_t>();
  if (counts.size() == 1) counts.assign(static_cast<size_t>(n), counts[0]);
  EMBER_CHECK(repeats.dim() <= 1 && static_cast<int64_t>(counts.size()) == n,
              "repeat_interleave: repeats shape ", repeats.shape().to_string(), " for dim ", *dim,
              " of size ", n, " (expected one count, or ", n, ")");
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) {
    EMBER_CHECK(counts[i] >= 0, "repeat_interleave: repeats[", i, "] is ", counts[i],
                " (expected counts >= 0)");
    for (int64_t r = 0; r < counts[i]; ++r) idx.push_back(i);
  }
  return index_select(x, d, positions(idx, x.device()));
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  const ops::OpScope op_scope(Op::unbind, x);
  ops::check_supported(Op::unbind, x);
  const int d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.shape()[d]; ++i) out.push_back(x.select(d, i));
  return out;
}

Tensor movedim(const Tensor& x, const Shape& source, const Shape& destination) {
  const ops::OpScope op_scope(Op::movedim, x);
  ops::check_supported(Op::movedim, x);
  EMBER_CHECK(source.size() == destination.size(), "movedim: source ", source.to_string(),
              " and destination ", destination.to_string(), " (expected as many dims in each)");
  const std::vector<int> src = unique_dims(source, x.dim(), "movedim");
  const std::vector<int> dst = unique_dims(destination, x.dim(), "movedim");
  if (x.dim() == 0) return x.reshape(Shape{});  // dim 0 / -1 of a 0-d tensor: itself (a view)
  std::vector<int64_t> order(static_cast<size_t>(x.dim()), -1);
  std::vector<bool> used(static_cast<size_t>(x.dim()), false);
  for (size_t i = 0; i < src.size(); ++i) {
    order[dst[i]] = src[i];
    used[src[i]] = true;
  }
  int next = 0;  // the other dims keep their order in the free places
  for (int64_t& o : order) {
    if (o >= 0) continue;
    while (used[next]) ++next;
    o = next++;
  }
  return x.permute(Shape(order));
}
Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, Shape{source}, Shape{destination});
}

namespace {
// tril / triu: keep x where (col - row) is within the band, else 0; batched over leading dims.
Tensor band(Op op, const Tensor& x, int64_t diagonal) {
  const ops::OpScope op_scope(op, x);
  ops::check_supported(op, x);
  EMBER_CHECK(x.dim() >= 2, op_name(op), ": input shape ", x.shape().to_string(),
              " (expected at least 2 dims: [..., rows, cols])");
  const TensorOptions i64{.dtype = DType::i64, .device = x.device()};
  const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  Tensor offset = arange(0, static_cast<double>(cols), 1, i64) -
                  arange(0, static_cast<double>(rows), 1, i64).reshape({rows, 1});
  Tensor keep = op == Op::tril ? lt(offset, static_cast<double>(diagonal + 1))
                               : gt(offset, static_cast<double>(diagonal - 1));
  return where(keep, x, zeros(Shape{}, {.dtype = x.dtype(), .device = x.device()}));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return band(Op::tril, x, diagonal); }
Tensor triu(const Tensor& x, int64_t diagonal) { return band(Op::triu, x, diagonal); }

Tensor diag(const Tensor& x, int64_t diagonal) {
  const ops::OpScope op_scope(Op::diag, x);
  ops::check_supported(Op::diag, x);
  EMBER_CHECK(x.dim() == 1 || x.dim() == 2, "diag: input shape ", x.shape().to_string(),
              " (expected a vector, to place on a diagonal, or a matrix, to read one)");
  const int64_t k = diagonal;
  if (x.dim() == 1) {
    // out[r, r + k] = x[r] (k >= 0) or out[c - k, c] = x[c] (k < 0): x broadcast along the
    // other dim and kept on the band col - row == k.
    const int64_t n = x.shape()[0], size = n + (k < 0 ? -k : k);
    Tensor padded = cat({x, zeros({size - n}, {.dtype = x.dtype(), .device = x.device()})}, 0);
    Tensor placed = k >= 0 ? padded.reshape({size, 1}).expand({size, size})
                           : padded.reshape({1, size}).expand({size, size});
    return tril(triu(placed, k), k);
  }
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  const int64_t r0 = k >= 0 ? 0 : -k, c0 = k >= 0 ? k : 0;
  const int64_t len = std::max<int64_t>(0, std::min(rows - r0, cols - c0));
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < len; ++i) idx.push_back((r0 + i) * cols + c0 + i);
  return index_select(x.reshape({rows * cols}), 0, positions(idx, x.device()));
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  const ops::UserOp user(Op::meshgrid, tensors);
  EMBER_CHECK(!tensors.empty(), "meshgrid: no tensors (expected at least one 1-D tensor)");
  EMBER_CHECK(indexing == "ij" || indexing == "xy", "meshgrid: indexing '", indexing,
              "' (expected \"ij\" or \"xy\")");
  Shape full;
  for (const Tensor& t : tensors) {
    ops::check_supported(Op::meshgrid, t);
    EMBER_CHECK(t.dim() <= 1, "meshgrid: input shape ", t.shape().to_string(),
                " (expected 0-d or 1-D tensors)");
    ops::check_same_device("meshgrid", tensors[0], t);
    ops::check_same_dtype("meshgrid", tensors[0], t);  // PyTorch: the same dtype for all
    full.push_back(t.numel());
  }
  const bool xy = indexing == "xy" && tensors.size() >= 2;
  if (xy) std::swap(full[0], full[1]);
  std::vector<Tensor> out;
  for (int i = 0; i < static_cast<int>(tensors.size()); ++i) {
    const int at = xy && i < 2 ? 1 - i : i;  // "xy": the first two inputs vary along dims 1, 0
    Shape s = Shape::filled(static_cast<int>(tensors.size()), 1);
    s[at] = tensors[i].numel();
    out.push_back(tensors[i].reshape(s).expand(full));
  }
  return out;
}

Tensor pad(const Tensor& x, const Shape& pads, const std::string& mode, double value) {
  const ops::OpScope op_scope(Op::pad, x);
  ops::check_supported(Op::pad, x);
  EMBER_CHECK(pads.size() % 2 == 0 && pads.size() / 2 <= x.dim(), "pad: pads ", pads.to_string(),
              " for input shape ", x.shape().to_string(),
              " (expected pairs (before, after), last dim first, at most one per dim)");
  EMBER_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular",
              "pad: mode '", mode, "' (expected constant, reflect, replicate or circular)");
  Tensor y = x;
  for (int p = 0; p < pads.size() / 2; ++p) {
    const int d = x.dim() - 1 - p;
    const int64_t before = pads[2 * p], after = pads[2 * p + 1], n = y.shape()[d];
    if (before == 0 && after == 0) continue;
    if (mode == "constant") {
      // Negative pads crop, as in PyTorch.
      EMBER_CHECK(n + before + after >= 0, "pad: pads ", pads.to_string(), " crop dim ", d,
                  " of size ", n, " below zero");
      const int64_t lo = std::max<int64_t>(0, -before), hi = n - std::max<int64_t>(0, -after);
      Tensor core = y.narrow(d, lo, std::max<int64_t>(0, hi - lo));
      std::vector<Tensor> parts;
      const TensorOptions o{.dtype = y.dtype(), .device = y.device()};
      Shape side = core.shape();
      if (before > 0) {
        side[d] = before;
        parts.push_back(full(side, value, o));
      }
      parts.push_back(core);
      if (after > 0) {
        side[d] = after;
        parts.push_back(full(side, value, o));
      }
      y = parts.size() == 1 ? core : cat(parts, d);
      continue;
    }
    EMBER_CHECK(before >= 0 && after >= 0, "pad: pads ", pads.to_string(), " in mode ", mode,
                " (expected pads >= 0; only constant padding crops)");
    const int64_t limit = mode == "reflect" ? n - 1 : n;
    EMBER_CHECK(mode == "replicate" ? n > 0 : (before <= limit && after <= limit), "pad: pads ",
                pads.to_string(), " in mode ", mode, " for dim ", d, " of size ", n,
                " (expected pads <= ", limit, mode == "reflect" ? ": size - 1" : ": the size", ")");
    std::vector<int64_t> idx;
    for (int64_t i = -before; i < n + after; ++i) {
      int64_t j = i;
      if (mode == "reflect") j = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
      if (mode == "replicate") j = std::clamp<int64_t>(i, 0, n - 1);
      if (mode == "circular") j = ((i % n) + n) % n;
      idx.push_back(j);
    }
    y = index_select(y, d, positions(idx, y.device()));
  }
  return y.is_same(x) ? x.clone() : y;
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  const ops::OpScope op_scope(Op::unfold, x);
  ops::check_supported(Op::unfold, x);
  const int d = wrap_dim(dim, std::max(x.dim(), 1), "unfold");
  const int64_t n = x.dim() ? x.shape()[d] : 1;
  EMBER_CHECK(size >= 0 && size <= n, "unfold: size ", size, " for dim ", dim, " of size ", n,
              " (expected 0 <= size <= ", n, ")");
  EMBER_CHECK(step > 0, "unfold: step ", step, " (expected > 0)");
  const int64_t windows = (n - size) / step + 1;
  std::vector<int64_t> idx;
  for (int64_t w = 0; w < windows; ++w)
    for (int64_t j = 0; j < size; ++j) idx.push_back(w * step + j);
  Tensor xs = x.dim() ? x : x.reshape({1});
  Tensor picked = index_select(xs, d, positions(idx, x.device()));
  Shape s = xs.shape();
  s[d] = windows;
  s.insert(d + 1, size);
  // [..., windows, size, ...] with the window's elements moved last, as Tensor.unfold.
  return movedim(picked.reshape(s), d + 1, -1);
}

Tensor pixel_shuffle(const Tensor& x, int64_t upscale) {
  const ops::OpScope op_scope(Op::pixel_shuffle, x);
  ops::check_supported(Op::pixel_shuffle, x);
  const int64_t r = upscale;
  EMBER_CHECK(r >= 1, "pixel_shuffle: upscale_factor ", r, " (expected >= 1)");
  EMBER_CHECK(x.dim() >= 3 && x.shape()[x.dim() - 3] % (r * r) == 0, "pixel_shuffle: input shape ",
              x.shape().to_string(), " (expected [..., C·", r * r, ", H, W])");
  const int b = x.dim() - 3;
  Shape lead(std::span<const int64_t>(x.shape().data(), static_cast<size_t>(b)));
  const int64_t c = x.shape()[b] / (r * r), h = x.shape()[b + 1], w = x.shape()[b + 2];
  Shape split = lead, merged = lead;
  for (int64_t v : {c, r, r, h, w}) split.push_back(v);
  for (int64_t v : {c, h * r, w * r}) merged.push_back(v);
  Shape order;
  for (int i = 0; i < b; ++i) order.push_back(i);
  for (int64_t v : {0, 3, 1, 4, 2}) order.push_back(b + v);  // [C, H, r, W, r]
  return x.reshape(split).permute(order).reshape(merged);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t downscale) {
  const ops::OpScope op_scope(Op::pixel_unshuffle, x);
  ops::check_supported(Op::pixel_unshuffle, x);
  const int64_t r = downscale;
  EMBER_CHECK(r >= 1, "pixel_unshuffle: downscale_factor ", r, " (expected >= 1)");
  EMBER_CHECK(x.dim() >= 3 && x.shape()[x.dim() - 2] % r == 0 && x.shape()[x.dim() - 1] % r == 0,
              "pixel_unshuffle: input shape ", x.shape().to_string(),
              " (expected [..., C, H, W] with H and W divisible by ", r, ")");
  const int b = x.dim() - 3;
  Shape lead(std::span<const int64_t>(x.shape().data(), static_cast<size_t>(b)));
  const int64_t c = x.shape()[b], h = x.shape()[b + 1] / r, w = x.shape()[b + 2] / r;
  Shape split = lead, merged = lead;
  for (int64_t v : {c, h, r, w, r}) split.push_back(v);
  for (int64_t v : {c * r * r, h, w}) merged.push_back(v);
  Shape order;
  for (int i = 0; i < b; ++i) order.push_back(i);
  for (int64_t v : {0, 2, 4, 1, 3}) order.push_back(b + v);  // [C, r, r, H, W]
  return x.reshape(split).permute(order).reshape(merged);
}

}  // namespace ember
