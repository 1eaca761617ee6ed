// src/ops/search.cpp — issue 32's searches in sorted data: unique and unique_consecutive
// (stable sorts, adjacent comparisons and a cumsum; the distinct count is read on the host,
// as nonzero's), searchsorted and bucketize (a binary search of log2 n gathers on the device).
#include <string>

#include "ember/ops_shape.hpp"
#include "ops/common.hpp"

namespace ember {

namespace {

// The distinct rows of `rows` [n, m] in order (sorted lexicographically first when `sorted`):
// `picks` holds the row of x each distinct value is read from, `inverse` the group of every
// row, `counts` each group's size. NaN differs from everything, itself included.
struct Groups {
  Tensor picks, inverse, counts;
};

Groups group_rows(const Tensor& rows, bool sorted) {
  const int64_t n = rows.shape()[0];
  const TensorOptions i64{.dtype = DType::i64, .device = rows.device()};
  const DType t = rows.dtype();
  // The sort slot orders numbers; bool and u8 sort as i32 (the same order).
  Tensor work = (t == DType::boolean || t == DType::u8) ? rows.to(DType::i32) : rows;
  Tensor order = arange(0, static_cast<double>(n), 1, i64);
  if (n == 0) return {order, order, order};
  if (sorted) {  // least significant column first: stable sorts make the order lexicographic
    for (int64_t c = rows.shape()[1] - 1; c >= 0; --c) {
      Tensor key = index_select(work.select(1, c), 0, order);
      order = index_select(order, 0, argsort(key, 0, false, true));
    }
  }
  Tensor s = index_select(work, 0, order);
  Tensor differs = any(ne(s.narrow(0, 1, n - 1), s.narrow(0, 0, n - 1)), {1});
  Tensor first = cat({ones({1}, {.dtype = DType::boolean, .device = rows.device()}), differs}, 0);
  Tensor group = cumsum(first.to(DType::i64), 0) - 1.0;
  Tensor starts = nonzero(first).reshape({-1});  // the distinct count is read on the host
  Tensor counts = diff(starts, 1, 0, Tensor(), full({1}, static_cast<double>(n), i64));
  Tensor inverse = scatter(zeros({n}, i64), 0, order, group);
  return {index_select(order, 0, starts), inverse, counts};
}

Unique unique_impl(Op op, const Tensor& x, std::optional<int64_t> dim, bool sorted) {
  const ops::UserOp user(op, {&x});
  ops::check_supported(op, x);
  NoGradGuard no_grad;
  if (!dim) {
    Tensor flat = x.reshape({x.numel()});
    Groups g = group_rows(flat.reshape({x.numel(), 1}), sorted);
    return {index_select(flat, 0, g.picks), g.inverse.reshape(x.shape()), g.counts};
  }
  EMBER_CHECK(x.dim() > 0, op_name(op), ": dim ", *dim, " of a 0-d tensor (expected no dim)");
  const int d = wrap_dim(*dim, x.dim(), op_name(op));
  const int64_t n = x.shape()[d];
  const int64_t m = n ? x.numel() / n : 0;
  Tensor rows = movedim(x, d, 0).reshape({n, m});
  Groups g = group_rows(rows, sorted);
  return {index_select(x, d, g.picks), g.inverse, g.counts};
}

}  // namespace

Unique unique(const Tensor& x, std::optional<int64_t> dim) {
  return unique_impl(Op::unique, x, dim, true);
}
Unique unique_consecutive(const Tensor& x, std::optional<int64_t> dim) {
  return unique_impl(Op::unique_consecutive, x, dim, false);
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values,
                    const SearchSortedOptions& options) {
  const ops::UserOp user(Op::searchsorted, {&sorted_sequence, &values, &options.sorter});
  const Tensor& seq_in = sorted_sequence;
  ops::check_supported(Op::searchsorted, seq_in);
  ops::check_defined("searchsorted", values, "values");
  ops::check_same_device("searchsorted", seq_in, values);
  EMBER_CHECK(seq_in.dim() >= 1, "searchsorted: a 0-d sorted_sequence (expected at least 1 dim)");
  bool right = options.right;
  if (options.side) {
    EMBER_CHECK(*options.side == "left" || *options.side == "right", "searchsorted: side '",
                *options.side, "' (expected \"left\" or \"right\")");
    EMBER_CHECK(!(right && *options.side == "left"),
                "searchsorted: side 'left' with right = true (expected them to agree)");
    right = *options.side == "right";
  }
  const int64_t n = seq_in.shape()[seq_in.dim() - 1];
  Tensor seq = seq_in;
  if (options.sorter.defined()) {
    ops::check_index_dtype("searchsorted", options.sorter);
    EMBER_CHECK(options.sorter.shape() == seq_in.shape(), "searchsorted: sorter shape ",
                options.sorter.shape().to_string(), " (expected sorted_sequence's ",
                seq_in.shape().to_string(), ")");
    seq = gather(seq_in, -1, options.sorter.to(DType::i64));
  }
  const DType common = promote_types(seq.dtype(), values.dtype());
  ops::check_supported(Op::searchsorted, common, seq.device());
  NoGradGuard no_grad;
  Tensor s, v;
  if (seq.dim() == 1) {
    s = seq.reshape({1, n});
    v = values.reshape({1, values.numel()});
  } else {
    Shape lead_s = seq.shape(), lead_v = values.shape();
    EMBER_CHECK(values.dim() == seq.dim(), "searchsorted: values shape ",
                values.shape().to_string(), " for sorted_sequence shape ", seq.shape().to_string(),
                " (expected the same leading dims)");
    lead_s.erase(seq.dim() - 1);
    lead_v.erase(values.dim() - 1);
    EMBER_CHECK(lead_s == lead_v, "searchsorted: values shape ", values.shape().to_string(),
                " for sorted_sequence shape ", seq.shape().to_string(),
                " (expected the same leading dims)");
    const int64_t rows = lead_s.numel();
    s = seq.reshape({rows, n});
    v = values.reshape({rows, values.shape()[values.dim() - 1]});
  }
  s = ops::cast_to(s, common);
  v = ops::cast_to(v, common);
  // Binary lifting: pos counts the elements before each value (not >= it; not > it when right);
  // step halves from the largest power of two <= n, so log2(n) + 1 gathers find it.
  Tensor pos = zeros(v.shape(), {.dtype = DType::i64, .device = v.device()});
  int64_t step = 1;
  while (step * 2 <= n) step *= 2;
  for (; n > 0 && step >= 1; step /= 2) {
    Tensor cand = pos + static_cast<double>(step);
    Tensor probe = clamp(cand - 1.0, 0.0, static_cast<double>(n - 1));
    Tensor at = gather(s, 1, probe);
    // PyTorch's tests, NaN included: a NaN value goes last, a NaN in the sequence is "before"
    Tensor before = logical_not(right ? gt(at, v) : ge(at, v));
    pos = where(logical_and(le(cand, static_cast<double>(n)), before), cand, pos);
  }
  Tensor out = pos.reshape(values.shape());
  return options.out_int32 ? out.to(DType::i32) : out;
}

Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32, bool right) {
  const ops::UserOp user(Op::bucketize, {&x, &boundaries});
  ops::check_supported(Op::bucketize, x);
  ops::check_defined("bucketize", boundaries, "boundaries");
  EMBER_CHECK(boundaries.dim() == 1, "bucketize: boundaries shape ", boundaries.shape().to_string(),
              " (expected a 1-D tensor)");
  return searchsorted(boundaries, x, {.out_int32 = out_int32, .right = right});
}

}  // namespace ember
