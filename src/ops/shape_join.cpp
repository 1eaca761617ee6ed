// src/ops/shape_join.cpp — issue 32's joins and splits: atleast_Nd, hstack/vstack/dstack/
// column_stack, tensor_split and hsplit/vsplit/dsplit, block_diag, cartesian_prod,
// combinations, and the index-list factories tril_indices/triu_indices. All are composites of
// views, cat, pad and index_select, so they are differentiable and take every dtype those do.
#include <algorithm>
#include <string>

#include "ember/ops_shape.hpp"
#include "ops/common.hpp"

namespace ember {

namespace {

// x with leading/trailing size-1 dims so that it has at least `rank` dims (PyTorch's rules:
// 1-D [n] is [1, n] as 2-D and [1, n, 1] as 3-D; 2-D [m, n] is [m, n, 1] as 3-D).
Tensor at_least(Op op, const Tensor& x, int rank) {
  const ops::UserOp user(op, {&x});
  ops::check_supported(op, x);
  if (x.dim() >= rank) return x;
  const int64_t n = x.numel();
  if (x.dim() == 0) return x.reshape(Shape::filled(rank, 1));
  if (x.dim() == 1) return x.reshape(rank == 2 ? Shape{1, n} : Shape{1, n, 1});
  return x.unsqueeze(-1);  // 2-D to 3-D
}

std::vector<Tensor> each_at_least(Op op, const std::vector<Tensor>& tensors, int rank) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(at_least(op, t, rank));
  return out;
}

void check_some(Op op, const std::vector<Tensor>& tensors) {
  EMBER_CHECK(!tensors.empty(), op_name(op), ": no tensors given (expected at least one)");
}

// The views x[b0:b1] along d for consecutive bounds (Python slicing: clamped, never reversed).
std::vector<Tensor> slices_at(const Tensor& x, int d, const std::vector<int64_t>& bounds) {
  std::vector<Tensor> out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i)
    out.push_back(x.slice(d, bounds[i], bounds[i + 1]));
  return out;
}

int split_dim(Op op, const Tensor& x, int64_t dim) {
  ops::check_supported(op, x);
  EMBER_CHECK(x.dim() > 0, op_name(op), ": a 0-d input (expected at least 1 dim)");
  return wrap_dim(dim, x.dim(), op_name(op));
}

std::vector<Tensor> split_sections(Op op, const Tensor& x, int64_t sections, int64_t dim) {
  const int d = split_dim(op, x, dim);
  EMBER_CHECK(sections > 0, op_name(op), ": sections ", sections, " (expected > 0)");
  const int64_t n = x.shape()[d], base = n / sections, extra = n % sections;
  std::vector<int64_t> bounds{0};
  for (int64_t i = 0; i < sections; ++i) bounds.push_back(bounds.back() + base + (i < extra));
  return slices_at(x, d, bounds);
}

std::vector<Tensor> split_indices(Op op, const Tensor& x, const std::vector<int64_t>& indices,
                                  int64_t dim) {
  const int d = split_dim(op, x, dim);
  const int64_t n = x.shape()[d];
  std::vector<int64_t> bounds{0};
  for (int64_t i : indices) {
    bounds.push_back(std::clamp<int64_t>(i < 0 ? i + n : i, 0, n));
  }
  bounds.push_back(n);
  // x[b_{i}:b_{i+1}] with b_{i+1} < b_i is empty (slice clamps end to start).
  return slices_at(x, d, bounds);
}

// hsplit / vsplit / dsplit: the dim they split, with their rank requirement.
int named_split_dim(Op op, const Tensor& x) {
  ops::check_supported(op, x);
  const int need = op == Op::hsplit ? 1 : op == Op::vsplit ? 2 : 3;
  EMBER_CHECK(x.dim() >= need, op_name(op), ": input shape ", x.shape().to_string(),
              " (expected at least ", need, " dims)");
  if (op == Op::hsplit) return x.dim() == 1 ? 0 : 1;
  return op == Op::vsplit ? 0 : 2;
}

std::vector<Tensor> named_split(Op op, const Tensor& x, int64_t sections) {
  const ops::UserOp user(op, {&x});
  const int d = named_split_dim(op, x);
  EMBER_CHECK(sections > 0 && x.shape()[d] % sections == 0, op_name(op), ": dim ", d, " of size ",
              x.shape()[d], " cannot be split into ", sections,
              " equal sections (expected a divisor of the size)");
  return split_sections(op, x, sections, d);
}

std::vector<Tensor> named_split(Op op, const Tensor& x, const std::vector<int64_t>& indices) {
  const ops::UserOp user(op, {&x});
  return split_indices(op, x, indices, named_split_dim(op, x));
}

Tensor index_list(const std::vector<int64_t>& v, Device device) {
  return from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())}).to(device);
}

// [2, N] coordinates (r, c) of a row x col matrix with c - r <= offset (lower) or >= offset.
Tensor triangle_indices(const char* op, int64_t row, int64_t col, int64_t offset, bool lower,
                        const TensorOptions& options) {
  EMBER_CHECK(row >= 0 && col >= 0, op, ": row ", row, " and col ", col, " (expected >= 0)");
  const DType dtype = options.dtype.value_or(DType::i64);
  EMBER_CHECK(dtype == DType::i64 || dtype == DType::i32, op, ": dtype ", dtype_name(dtype),
              " (expected i64 or i32)");
  std::vector<int64_t> rows, cols;
  for (int64_t r = 0; r < row; ++r)
    for (int64_t c = 0; c < col; ++c)
      if (lower ? c - r <= offset : c - r >= offset) {
        rows.push_back(r);
        cols.push_back(c);
      }
  rows.insert(rows.end(), cols.begin(), cols.end());
  const int64_t n = static_cast<int64_t>(cols.size());
  return from_vector<int64_t>(rows, Shape{2, n})
      .to(dtype)
      .to(options.device ? *options.device : default_device());
}

}  // namespace

Tensor atleast_1d(const Tensor& x) { return at_least(Op::atleast_1d, x, 1); }
Tensor atleast_2d(const Tensor& x) { return at_least(Op::atleast_2d, x, 2); }
Tensor atleast_3d(const Tensor& x) { return at_least(Op::atleast_3d, x, 3); }
std::vector<Tensor> atleast_1d(const std::vector<Tensor>& tensors) {
  return each_at_least(Op::atleast_1d, tensors, 1);
}
std::vector<Tensor> atleast_2d(const std::vector<Tensor>& tensors) {
  return each_at_least(Op::atleast_2d, tensors, 2);
}
std::vector<Tensor> atleast_3d(const std::vector<Tensor>& tensors) {
  return each_at_least(Op::atleast_3d, tensors, 3);
}

Tensor hstack(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::hstack, tensors);
  check_some(Op::hstack, tensors);
  for (const Tensor& t : tensors) ops::check_supported(Op::hstack, t);
  std::vector<Tensor> parts = each_at_least(Op::hstack, tensors, 1);
  return cat(parts, parts[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::vstack, tensors);
  check_some(Op::vstack, tensors);
  for (const Tensor& t : tensors) ops::check_supported(Op::vstack, t);
  return cat(each_at_least(Op::vstack, tensors, 2), 0);
}
Tensor row_stack(const std::vector<Tensor>& tensors) { return vstack(tensors); }

Tensor dstack(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::dstack, tensors);
  check_some(Op::dstack, tensors);
  for (const Tensor& t : tensors) ops::check_supported(Op::dstack, t);
  return cat(each_at_least(Op::dstack, tensors, 3), 2);
}

Tensor column_stack(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::column_stack, tensors);
  check_some(Op::column_stack, tensors);
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    ops::check_supported(Op::column_stack, t);
    parts.push_back(t.dim() <= 1 ? t.reshape({t.numel(), 1}) : t);
  }
  return cat(parts, 1);
}

std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  const ops::UserOp user(Op::tensor_split, {&x});
  return split_sections(Op::tensor_split, x, sections, dim);
}
std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices,
                                 int64_t dim) {
  const ops::UserOp user(Op::tensor_split, {&x});
  return split_indices(Op::tensor_split, x, indices, dim);
}

std::vector<Tensor> hsplit(const Tensor& x, int64_t sections) {
  return named_split(Op::hsplit, x, sections);
}
std::vector<Tensor> hsplit(const Tensor& x, const std::vector<int64_t>& indices) {
  return named_split(Op::hsplit, x, indices);
}
std::vector<Tensor> vsplit(const Tensor& x, int64_t sections) {
  return named_split(Op::vsplit, x, sections);
}
std::vector<Tensor> vsplit(const Tensor& x, const std::vector<int64_t>& indices) {
  return named_split(Op::vsplit, x, indices);
}
std::vector<Tensor> dsplit(const Tensor& x, int64_t sections) {
  return named_split(Op::dsplit, x, sections);
}
std::vector<Tensor> dsplit(const Tensor& x, const std::vector<int64_t>& indices) {
  return named_split(Op::dsplit, x, indices);
}

Tensor eye(int64_t n, TensorOptions options) { return eye(n, n, options); }
Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  EMBER_CHECK(n >= 0 && m >= 0, "eye: size ", n, " x ", m, " (expected sizes >= 0)");
  Tensor out = zeros({n, m}, options);
  if (n > 0 && m > 0) diagonal(out).fill_(1.0);  // a view: writes out's diagonal
  return out;
}

Tensor tril_indices(int64_t row, int64_t col, int64_t offset, TensorOptions options) {
  return triangle_indices("tril_indices", row, col, offset, true, options);
}
Tensor triu_indices(int64_t row, int64_t col, int64_t offset, TensorOptions options) {
  return triangle_indices("triu_indices", row, col, offset, false, options);
}

Tensor block_diag(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::block_diag, tensors);
  if (tensors.empty()) return zeros({1, 0});  // PyTorch: a [1, 0] tensor
  DType dtype = DType::boolean;
  int64_t cols = 0;
  std::vector<Tensor> blocks;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    ops::check_supported(Op::block_diag, t);
    ops::check_same_device("block_diag", tensors[0], t);
    EMBER_CHECK(t.dim() <= 2, "block_diag: tensor ", i, " has shape ", t.shape().to_string(),
                " (expected 0, 1 or 2 dims)");
    dtype = i == 0 ? t.dtype() : promote_types(dtype, t.dtype());
    blocks.push_back(t.dim() == 2 ? t : t.reshape({1, t.numel()}));
    cols += blocks.back().shape()[1];
  }
  ops::check_supported(Op::block_diag, dtype, tensors[0].device());
  std::vector<Tensor> rows;
  int64_t left = 0;
  for (const Tensor& b : blocks) {
    const int64_t w = b.shape()[1];
    rows.push_back(pad(ops::cast_to(b, dtype), {left, cols - left - w}));
    left += w;
  }
  return cat(rows, 0);
}

Tensor cartesian_prod(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::cartesian_prod, tensors);
  check_some(Op::cartesian_prod, tensors);
  for (size_t i = 0; i < tensors.size(); ++i) {
    ops::check_supported(Op::cartesian_prod, tensors[i]);
    EMBER_CHECK(tensors[i].dim() == 1, "cartesian_prod: tensor ", i, " has shape ",
                tensors[i].shape().to_string(), " (expected 1-D tensors)");
  }
  if (tensors.size() == 1) return tensors[0];
  std::vector<Tensor> columns;
  for (const Tensor& g : meshgrid(tensors, "ij")) columns.push_back(g.reshape({g.numel()}));
  return stack(columns, 1);
}

Tensor combinations(const Tensor& x, int64_t r, bool with_replacement) {
  const ops::UserOp user(Op::combinations, {&x});
  ops::check_supported(Op::combinations, x);
  EMBER_CHECK(x.dim() == 1, "combinations: input shape ", x.shape().to_string(),
              " (expected a 1-D tensor)");
  EMBER_CHECK(r >= 0, "combinations: r ", r, " (expected r >= 0)");
  if (r == 0) return x.narrow(0, 0, 0).clone();  // PyTorch: an empty 1-D tensor
  const int64_t n = x.shape()[0];
  // Every non-decreasing (with replacement) or increasing index tuple, in lexicographic order.
  std::vector<std::vector<int64_t>> picks(static_cast<size_t>(r));
  std::vector<int64_t> at(static_cast<size_t>(r));
  const int64_t step = with_replacement ? 0 : 1;
  for (int64_t k = 0; k < r; ++k) at[k] = k * step;
  while (n > 0 && at[r - 1] < n) {
    for (int64_t k = 0; k < r; ++k) picks[k].push_back(at[k]);
    int64_t k = r - 1;  // the last position that can still move right
    while (k >= 0 && at[k] >= n - 1 - (r - 1 - k) * step) --k;
    if (k < 0) break;
    ++at[k];
    for (int64_t j = k + 1; j < r; ++j) at[j] = at[j - 1] + step;
  }
  if (picks[0].empty()) return x.narrow(0, 0, 0).reshape({0, r}).clone();
  std::vector<Tensor> columns;
  for (const auto& p : picks) columns.push_back(index_select(x, 0, index_list(p, x.device())));
  return stack(columns, 1);
}

}  // namespace ember
