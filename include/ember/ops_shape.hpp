// ember/ops_shape.hpp — issue 32's shape, indexing, reduction and scan vocabulary (PyTorch's
// names and semantics): joins and splits, diagonals and strided views, index-list factories,
// statistics (quantile, mode, unique, histograms), searches and integrals.
//
//   Tensor y = ember::hstack({a, b});              // torch.hstack
//   auto parts = ember::tensor_split(x, 3, 1);     // torch.tensor_split
//   Tensor q = ember::quantile(x, 0.5, 1);         // torch.quantile
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/ops.hpp"
#include "ember/tensor.hpp"

namespace ember {

// ---- joins and splits ----

/// x rotated by 90° k times in the plane of `dims` (from dims[0] towards dims[1]).
///   rot90(arange(4).reshape({2, 2}))  // [[1, 3], [0, 2]]
Tensor rot90(const Tensor& x, int64_t k = 1, const Shape& dims = {0, 1});
/// x viewed with at least 1 / 2 / 3 dims (0-d -> [1]; [n] -> [1, n]; [n] -> [1, n, 1] and
/// [m, n] -> [m, n, 1] for 3 dims); x itself when it has them already.
///   atleast_2d(arange(3)).shape()  // [1, 3]
Tensor atleast_1d(const Tensor& x);
Tensor atleast_2d(const Tensor& x);
Tensor atleast_3d(const Tensor& x);
/// The same for each tensor of a list.
std::vector<Tensor> atleast_1d(const std::vector<Tensor>& tensors);
std::vector<Tensor> atleast_2d(const std::vector<Tensor>& tensors);
std::vector<Tensor> atleast_3d(const std::vector<Tensor>& tensors);
/// Joined column-wise: along dim 1, or dim 0 when the inputs are 1-D (after atleast_1d).
///   hstack({ones({2}), zeros({3})}).shape()  // [5]
Tensor hstack(const std::vector<Tensor>& tensors);
/// Joined row-wise (along dim 0 after atleast_2d). row_stack is its alias.
///   vstack({ones({3}), zeros({3})}).shape()  // [2, 3]
Tensor vstack(const std::vector<Tensor>& tensors);
Tensor row_stack(const std::vector<Tensor>& tensors);
/// Joined depth-wise (along dim 2 after atleast_3d).
///   dstack({ones({2, 2}), ones({2, 2})}).shape()  // [2, 2, 2]
Tensor dstack(const std::vector<Tensor>& tensors);
/// 0-d and 1-D inputs as columns [n, 1], then joined along dim 1.
///   column_stack({ones({3}), zeros({3, 2})}).shape()  // [3, 3]
Tensor column_stack(const std::vector<Tensor>& tensors);
/// `sections` views along `dim`, the first size % sections one longer (any size works).
///   tensor_split(arange(7), 3)  // [0, 1, 2], [3, 4], [5, 6]
std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
/// The views x[:i0], x[i0:i1], ..., x[ik:] along `dim` (Python slicing: out of range clamps,
/// a later index before an earlier one gives an empty piece).
///   tensor_split(arange(7), std::vector<int64_t>{2, 5})  // [0, 1], [2, 3, 4], [5, 6]
std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices,
                                 int64_t dim = 0);
/// tensor_split along dim 1 (dim 0 for 1-D), dim 0 (2-D and up) and dim 2 (3-D and up);
/// `sections` must divide the dim.
///   hsplit(ones({2, 6}), 3)  // three [2, 2] views
std::vector<Tensor> hsplit(const Tensor& x, int64_t sections);
std::vector<Tensor> hsplit(const Tensor& x, const std::vector<int64_t>& indices);
std::vector<Tensor> vsplit(const Tensor& x, int64_t sections);
std::vector<Tensor> vsplit(const Tensor& x, const std::vector<int64_t>& indices);
std::vector<Tensor> dsplit(const Tensor& x, int64_t sections);
std::vector<Tensor> dsplit(const Tensor& x, const std::vector<int64_t>& indices);
/// Dim `dim` split into `sizes` (one may be -1: inferred).
///   unflatten(ones({2, 12}), 1, {3, -1}).shape()  // [2, 3, 4]
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
/// x.narrow(dim, start, length) as a new contiguous tensor (no storage shared).
Tensor narrow_copy(const Tensor& x, int64_t dim, int64_t start, int64_t length);
/// x expanded to `shape` (a view; x.expand(shape)).
///   broadcast_to(ones({3, 1}), {2, 3, 4}).shape()  // [2, 3, 4]
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// The shape all of `shapes` broadcast to; throws when they do not.
///   broadcast_shapes({{3, 1}, {4}})  // [3, 4]
Shape broadcast_shapes(const std::vector<Shape>& shapes);
/// Each tensor expanded to the common broadcast shape (views).
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors);
/// Aliases: swapaxes and swapdims are transpose, moveaxis is movedim.
///   swapaxes(ones({2, 3}), 0, 1).shape()  // [3, 2]
Tensor swapaxes(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination);
Tensor moveaxis(const Tensor& x, const Shape& source, const Shape& destination);
/// A view of x's storage with `size`, `stride` (in elements) and `storage_offset` (x's own
/// offset when unset); every element it reaches must lie inside the storage. Differentiable:
/// the gradient of overlapping elements adds up.
///   as_strided(arange(6), {2, 2}, {1, 2})  // [[0, 2], [1, 3]]
Tensor as_strided(const Tensor& x, const Shape& size, const Shape& stride,
                  std::optional<int64_t> storage_offset = std::nullopt);
/// The diagonal `offset` of the planes (dim1, dim2) as a view, moved to the last dim.
///   diagonal(arange(9).reshape({3, 3}), 1)  // [1, 5]
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
/// The last dim of x placed on diagonal `offset` of new planes (dim1, dim2) of the output.
///   diag_embed(ones({2, 3})).shape()  // [2, 3, 3]
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
/// diag(x.flatten(), offset): a 2-D matrix with x's elements on a diagonal.
///   diagflat(ones({2, 2})).shape()  // [4, 4]
Tensor diagflat(const Tensor& x, int64_t offset = 0);
/// The sum of a matrix's main diagonal (integers sum into i64, as PyTorch).
///   trace(eye(3))  // 3
Tensor trace(const Tensor& x);
/// The identity (torch.eye): ones on the main diagonal of an n x n (or n x m) matrix, zeros
/// elsewhere, in `options`' dtype and device.
///   eye(3).sum()                  // 3
///   eye(2, 4, {.dtype = DType::i64})
Tensor eye(int64_t n, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m, TensorOptions options = {});
/// The [2, N] i64 coordinates of the lower (upper) triangle of a row x col matrix, row by row;
/// `offset` moves the diagonal that bounds it.
///   tril_indices(3, 3)  // [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
Tensor tril_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = {});
Tensor triu_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = {});
/// The inputs (0-d, 1-D as a row, 2-D) on the diagonal of a block matrix, zeros elsewhere
/// (dtypes promoted).
///   block_diag({ones({2, 2}), ones({1, 3})}).shape()  // [3, 5]
Tensor block_diag(const std::vector<Tensor>& tensors);
/// Every combination of one element of each 1-D input, [N, count] (one input: itself).
///   cartesian_prod({arange(2), arange(3)}).shape()  // [6, 2]
Tensor cartesian_prod(const std::vector<Tensor>& tensors);
/// The length-r combinations of a 1-D x's elements in order, [N, r] (itertools.combinations,
/// or combinations_with_replacement).
///   combinations(arange(4), 2).shape()  // [6, 2]
Tensor combinations(const Tensor& x, int64_t r = 2, bool with_replacement = false);

// ---- reductions, statistics and scans ----

/// log(cumsum(exp(x))) along dim, computed as a scan of logaddexp steps (never exp of the
/// whole input, so large values do not overflow).
///   logcumsumexp(from_vector<float>({0, 0}, {2}), 0)  // [0, log 2]
Tensor logcumsumexp(const Tensor& x, int64_t dim);
/// The most frequent value of each line along dim and its index (PyTorch's rule: of equally
/// frequent values the smallest, at its last position). The counting runs on the host: the
/// input is read from its device.
///   mode(from_vector<float>({3, 1, 1, 3, 2}, {5})).values  // 1 (index 2)
ValuesIndices mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);
/// The minimum and maximum in one call (over all elements, or along dim).
///   aminmax(x).min, aminmax(x, 1).max
struct MinMax {
  Tensor min;
  Tensor max;
};
MinMax aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// var (std) and mean over `dims` (every dim when empty), with Bessel's `correction`.
///   auto [v, m] = var_mean(x, {1}, 0);
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const Shape& dims = {}, int64_t correction = 1,
                                   bool keepdim = false);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const Shape& dims = {}, int64_t correction = 1,
                                   bool keepdim = false);
/// The q-th quantiles along dim (of the flattened input without one): "linear" (default),
/// "lower", "higher", "nearest" (half to even) or "midpoint" between the two order statistics
/// around q·(n - 1). A line with a NaN gives NaN; nanquantile leaves NaNs out (all-NaN: NaN).
/// A 1-D q puts its quantiles in a new leading dim.
///   quantile(from_vector<float>({1, 2, 3, 4}, {4}), 0.5)  // 2.5
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false, const std::string& interpolation = "linear");
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false, const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false, const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false, const std::string& interpolation = "linear");
/// A histogram of `bins` equal bins over [min, max] (elements outside are left out; the
/// data's own range when min == max, which reads the input on the host).
///   histc(from_vector<float>({1, 2, 1}, {3}), 4, 0, 3)  // [0, 2, 1, 0]
Tensor histc(const Tensor& x, int64_t bins = 100, double min = 0.0, double max = 0.0);
/// How often each value 0..max(x) occurs in a 1-D non-negative integer x (or the sum of
/// `weights` there), at least `minlength` long. The length depends on the data: like nonzero,
/// it reads max(x) on the host.
///   bincount(from_vector<int64_t>({0, 2, 2}, {3}))  // [1, 0, 2]
Tensor bincount(const Tensor& x, const Tensor& weights = Tensor(), int64_t minlength = 0);
/// unique's results: the distinct values (sorted), the position of each input element among
/// them (inverse, x's shape; along dim: one per slice) and how often each occurs.
struct Unique {
  Tensor values;
  Tensor inverse;
  Tensor counts;
};
/// The sorted distinct elements of x (or slices along dim), always with inverse and counts
/// (PyTorch's return_inverse/return_counts pick among them). NaNs are distinct. The output
/// size depends on the data: like nonzero, the count is read on the host.
///   unique(from_vector<int64_t>({3, 1, 3}, {3})).values  // [1, 3]
Unique unique(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
/// The same for runs of equal consecutive elements (no sorting).
///   unique_consecutive(from_vector<int64_t>({1, 1, 2, 1}, {4})).values  // [1, 2, 1]
Unique unique_consecutive(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
/// searchsorted's flags: side "left" (first position) or "right" (after equal values; also
/// `right`), an i32 result, and `sorter` (the indices that sort an unsorted sequence).
struct SearchSortedOptions {
  bool out_int32 = false;
  bool right = false;
  std::optional<std::string> side = std::nullopt;
  Tensor sorter = Tensor();
};
/// Where each value would be inserted into the last dim of a sorted sequence to keep it sorted
/// (a 1-D sequence serves every value; otherwise leading dims match the values'). A binary
/// search on the device (log2 n gathers).
///   searchsorted(from_vector<float>({1, 3, 5}, {3}), from_vector<float>({3, 6}, {2}))  // [1, 3]
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values,
                    const SearchSortedOptions& options = {});
/// The bucket of each element of x among 1-D sorted `boundaries` (searchsorted with the
/// arguments swapped; right: boundaries[i-1] <= x < boundaries[i]).
///   bucketize(from_vector<float>({1, 6}, {2}), from_vector<float>({1, 3, 5}, {3}))  // [0, 3]
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32 = false,
                 bool right = false);
/// The trapezoidal rule along dim, with sample points x (1-D, or y's shape) or spacing dx;
/// cumulative_trapezoid keeps the running sums.
///   trapezoid(from_vector<float>({1, 2, 3}, {3}))  // 4
Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor trapezoid(const Tensor& y, double dx = 1.0, int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, double dx = 1.0, int64_t dim = -1);

// ---- indexing ----

/// x's elements at `index` (into the flattened x; negative counts from the end), index's shape.
///   take(arange(6).reshape({2, 3}), from_vector<int64_t>({0, 5}, {2}))  // [0, 5]
Tensor take(const Tensor& x, const Tensor& index);
/// gather along dim after broadcasting x and indices in every other dim; without dim, the
/// flattened x at the flattened indices.
///   take_along_dim(x, argmax(x, 1, true), 1)  // the maxima, [rows, 1]
Tensor take_along_dim(const Tensor& x, const Tensor& indices,
                      std::optional<int64_t> dim = std::nullopt);
/// x with source's elements written (accumulate: added) at `index` of the flattened x.
/// put_ does it in place.
///   put(zeros({2, 2}), from_vector<int64_t>({3}, {1}), ones({1}))  // [[0, 0], [0, 1]]
Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate = false);
Tensor& put_(Tensor& x, const Tensor& index, const Tensor& source, bool accumulate = false);
/// x with the positions where mask (broadcast to x) is true filled, in order, by the first
/// elements of source. Reads the mask's count on the host to check source is long enough.
///   masked_scatter(zeros({3}), mask, from_vector<float>({7, 8}, {2}))
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);
/// x's slices along dim at `index` (1-D) reduced with source's slices by "prod", "mean",
/// "amax" or "amin", including x's own values or not (torch.Tensor.index_reduce).
///   index_reduce(ones({3, 2}), 0, idx, src, "prod")
Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self = true);

}  // namespace ember
